//! The host side of a loop run: an infeed thread fills every replica's queue ahead of the
//! device, an outfeed thread collects the per-iteration values (or hands them to a callback
//! as they come), and an optional NaN check looks at the state after the loop. The same for
//! the interpreter and the JIT.

use super::engine::Engine;
use super::error::SessionError;
use super::hosts::{gather_loop_outputs, local_share};
use super::loop_program::{CarriedOnDevice, LoopOptions, LoopOutputs};
use crate::feed::HostFeed;
use crate::feed::{fill_infeed, stack, FeedSource, HostQueues};
use crate::replicas::{Numbering, Residency};
use std::sync::mpsc::Receiver;
use tessel_compiler::ir::{Array, ArrayData, Literal};
use tessel_compiler::training_loop::LoopSignature;

/// Where the per-iteration outputs go.
pub enum Outfeed<'a> {
    /// Collected, and returned stacked K deep in [`LoopOutputs::per_iteration`].
    Collect,
    /// Handed over as they come: `(replica, iteration, outputs)`, on the outfeed thread.
    Callback(&'a mut (dyn FnMut(usize, u64, Vec<Array>) + Send)),
}

/// Runs the loop `engine` holds on `carried.len()` replicas with the host threads around it.
/// In an MPI job of several hosts, this host runs, feeds and drains only its block of the
/// replicas, and the outputs are gathered from all hosts (unless `this_host_only`).
// The loop's parts as its program holds them; a struct for one call would only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_host_loop(
    engine: &Engine,
    signature: &LoopSignature,
    parameter_names: &[&str],
    carried: Vec<Vec<Array>>,
    sources: Vec<FeedSource>,
    outfeed: Outfeed<'_>,
    options: &LoopOptions,
    this_host_only: bool,
    numbering: Numbering,
) -> Result<LoopOutputs, SessionError> {
    let (placement, carried) = local_share(carried, this_host_only)?;
    let (_, sources) = local_share(sources, this_host_only)?;
    let first = placement.map_or(0, |p| p.first);
    let n = carried.len();
    let iterations = signature.iterations;
    let carried: Vec<Vec<Literal>> = carried
        .into_iter()
        .map(|state| state.into_iter().map(Literal::Array).collect())
        .collect();
    let sources = super::trace::time_host_input(engine, sources);
    // The JIT's arenas keep the final carried state for the next run (see `Residency`).
    let residency = Residency {
        from: options.carried_on_device.map(|c| c.0),
        tag: engine.executable().map(|_| Residency::new_tag()),
    };
    let (queues, rx) = HostQueues::new(n, options.queue_depth);
    let (result, outfed) = std::thread::scope(|s| {
        let queues = &queues;
        let infeed = std::thread::Builder::new()
            .name("infeed".into())
            .spawn_scoped(s, move || fill_infeed(queues, sources, iterations))
            .map_err(|e| SessionError::run(format!("starting the infeed thread: {e}")))?;
        let outfeed = std::thread::Builder::new()
            .name("outfeed".into())
            .spawn_scoped(s, move || drain(rx, n, first, outfeed))
            .map_err(|e| SessionError::run(format!("starting the outfeed thread: {e}")))?;
        let result = engine.run_fed(carried, queues, numbering, placement, residency);
        if let Err(e) = &result {
            // Already done by the evaluator; repeated so the host threads surely stop.
            let replica = match e {
                // The queues count this host's replicas from `first`.
                SessionError::Run {
                    replica: Some(r), ..
                } if (first..first + n).contains(r) => r - first,
                _ => 0,
            };
            queues.abort(replica, &e.to_string());
        }
        queues.finish();
        let infeed_ok = infeed.join().is_ok();
        let outfed = outfeed.join().unwrap_or_default();
        if !infeed_ok && result.is_ok() {
            return Err(SessionError::run("the infeed thread panicked"));
        }
        Ok((result, outfed))
    })?;
    let finals = result?;
    let mut out = LoopOutputs {
        carried: Vec::with_capacity(n),
        per_iteration: Vec::with_capacity(n),
        on_device: residency.tag.map(CarriedOnDevice),
    };
    for (local, (state, values)) in finals.into_iter().zip(outfed).enumerate() {
        let r = first + local;
        out.carried.push(into_arrays(state));
        out.per_iteration.push(match values {
            Some(values) => stack_outputs(signature, r, values)?,
            None => Vec::new(),
        });
    }
    let out = gather_loop_outputs(placement, out)?;
    if options.nan_check {
        check_nan(signature, parameter_names, &out)?;
    }
    Ok(out)
}

/// The array leaves of `l` depth-first, as [`Literal::leaves`] orders them, moved out: the
/// carried state (an embedding table and its moments, tens of MB) is not copied again.
fn into_arrays(l: Literal) -> Vec<Array> {
    fn walk(l: Literal, out: &mut Vec<Array>) {
        match l {
            Literal::Array(a) => out.push(a),
            Literal::Tuple(t) => t.into_iter().for_each(|l| walk(l, out)),
            Literal::Token => {}
        }
    }
    let mut out = Vec::new();
    walk(l, &mut out);
    out
}

/// The outfeed thread's work: every value until all senders are gone, grouped by replica in
/// arrival order (`None` per replica when the callback took them). The callback sees global
/// replica ids: the queues' `0..replicas` are devices `first..`.
fn drain(
    rx: Receiver<(usize, Literal)>,
    replicas: usize,
    first: usize,
    outfeed: Outfeed<'_>,
) -> Vec<Option<Vec<Literal>>> {
    match outfeed {
        Outfeed::Collect => crate::feed::drain_outfeed(rx, replicas)
            .into_iter()
            .map(Some)
            .collect(),
        Outfeed::Callback(deliver) => {
            let mut counts = vec![0u64; replicas];
            for (r, v) in rx {
                if let Some(count) = counts.get_mut(r) {
                    deliver(first + r, *count, v.leaves().into_iter().cloned().collect());
                    *count += 1;
                }
            }
            vec![None; replicas]
        }
    }
}

fn stack_outputs(
    signature: &LoopSignature,
    r: usize,
    values: Vec<Literal>,
) -> Result<Vec<Array>, SessionError> {
    let m = signature.per_iteration_outputs;
    if m == 0 {
        return Ok(Vec::new());
    }
    if values.len() as u64 != signature.iterations {
        return Err(SessionError::on_replica(
            r,
            format!(
                "the outfeed gave {} values for {} iterations",
                values.len(),
                signature.iterations
            ),
        ));
    }
    (0..m)
        .map(|j| {
            let parts: Vec<Array> = values
                .iter()
                .map(|v| v.leaves().get(j).map(|a| (*a).clone()))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    SessionError::on_replica(r, format!("outfeed value lacks output {j}"))
                })?;
            stack(&parts).map_err(|e| SessionError::on_replica(r, e))
        })
        .collect()
}

/// Fails on the first NaN in carried float state, naming replica and parameter; else on the
/// first NaN in a per-iteration output, naming its iteration.
fn check_nan(
    signature: &LoopSignature,
    parameter_names: &[&str],
    out: &LoopOutputs,
) -> Result<(), SessionError> {
    let k = signature.iterations;
    for (r, state) in out.carried.iter().enumerate() {
        for (a, &p) in state.iter().zip(&signature.carried) {
            if let Some(at) = first_nan(a) {
                return Err(SessionError::on_replica(
                    r,
                    format!(
                        "NaN check: carried parameter {p} ({}) holds NaN (first at element {at}) after the loop of {k} iterations",
                        parameter_names.get(p as usize).copied().unwrap_or("?")
                    ),
                ));
            }
        }
    }
    let c = signature.carried.len();
    for (r, stacked) in out.per_iteration.iter().enumerate() {
        for (j, a) in stacked.iter().enumerate() {
            if let Some(at) = first_nan(a) {
                let per = a.len() / (k as usize).max(1);
                return Err(SessionError::on_replica(
                    r,
                    format!(
                        "NaN check: output {} (per-iteration) is NaN first at iteration {}",
                        c + j,
                        at / per.max(1)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The index of the first NaN element of a float array.
fn first_nan(a: &Array) -> Option<usize> {
    match &a.data {
        ArrayData::F32(v) => v.iter().position(|x| x.is_nan()),
        ArrayData::F64(v) => v.iter().position(|x| x.is_nan()),
        ArrayData::F16(v) => v.iter().position(|x| x.is_nan()),
        ArrayData::BF16(v) => v.iter().position(|x| x.is_nan()),
        _ => None,
    }
}
