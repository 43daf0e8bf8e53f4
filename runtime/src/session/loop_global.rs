//! A shard_map step's loop on global arrays: the global state is split once and every
//! iteration's global batch by the module's in-shardings (each replica's infeed gets its own
//! piece); the final state and the per-iteration outputs are assembled by the out-shardings.
//!
//! The body's parameters and outputs must be the entry's, in the same order (JAX's
//! `shard_map` of a train step is): then the loop contract (fed and carried parameters, the
//! first outputs being the carried parameters' new values) reads the same on the body.

use super::error::SessionError;
use super::loop_program::LoopOutputs;
use crate::feed::{stack, unstack};
use crate::shard_map::{ShardMap, ShardMapError};
use tessel_compiler::ir::{Array, Literal};
use tessel_compiler::training_loop::LoopSignature;

fn not_loopable(message: String) -> SessionError {
    SessionError::ShardMap(ShardMapError { message })
}

/// Fails unless the body's parameters and outputs are the entry's, in order.
pub(crate) fn check_loopable(sharded: &ShardMap, params: usize) -> Result<(), SessionError> {
    let sources = sharded.body_parameter_sources();
    if sources != (0..params).collect::<Vec<_>>() {
        return Err(not_loopable(format!(
            "a loop over a shard_map module needs the body's parameters to be the entry's in order (they come from entry parameters {sources:?})"
        )));
    }
    let outputs = sharded.output_sources();
    if outputs != (0..outputs.len()).collect::<Vec<_>>() {
        return Err(not_loopable(format!(
            "a loop over a shard_map module needs the entry's outputs to be the body's in order (they are body outputs {outputs:?})"
        )));
    }
    Ok(())
}

/// Every replica's loop arguments: its carried pieces, its fed pieces stacked K deep.
pub(crate) fn split_loop_args(
    sharded: &ShardMap,
    sig: &LoopSignature,
    global: &[Array],
) -> Result<Vec<Vec<Array>>, SessionError> {
    let k = sig.iterations as usize;
    let n = sharded.replicas();
    let mut fed_slices: Vec<Vec<Array>> = Vec::new();
    for &i in &sig.fed {
        let a = global
            .get(i as usize)
            .ok_or_else(|| SessionError::run(format!("no argument for parameter {i}")))?;
        fed_slices.push(unstack(a).map_err(SessionError::run)?);
    }
    if fed_slices.iter().any(|s| s.len() != k) {
        return Err(SessionError::run(format!(
            "fed arguments must be stacked {k} deep"
        )));
    }
    // Every replica's pieces per iteration: the global arguments with iteration j's batch.
    let mut per_replica: Vec<Vec<Vec<Array>>> = vec![Vec::with_capacity(k); n];
    for j in 0..k {
        let mut args = global.to_vec();
        for (s, &i) in fed_slices.iter().zip(&sig.fed) {
            args[i as usize] = s[j].clone();
        }
        for (r, pieces) in sharded.split(&args)?.into_iter().enumerate() {
            let arrays = pieces
                .into_iter()
                .map(|l| {
                    l.into_array()
                        .ok_or_else(|| SessionError::run("a body argument is not an array"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            per_replica[r].push(arrays);
        }
    }
    per_replica
        .iter()
        .map(|iters| {
            (0..iters[0].len())
                .map(|i| {
                    if sig.fed.contains(&(i as u32)) {
                        let parts: Vec<Array> = iters.iter().map(|a| a[i].clone()).collect();
                        stack(&parts).map_err(SessionError::run)
                    } else {
                        Ok(iters[0][i].clone())
                    }
                })
                .collect()
        })
        .collect()
}

/// The entry's outputs, global: the final carried values, then the per-iteration outputs
/// stacked K deep.
pub(crate) fn assemble_loop_outputs(
    sharded: &ShardMap,
    sig: &LoopSignature,
    out: &LoopOutputs,
) -> Result<Vec<Array>, SessionError> {
    let k = sig.iterations as usize;
    let n = sharded.replicas();
    // Iteration j's body results per replica: the final state with that iteration's values.
    let per_iteration: Vec<Vec<Vec<Array>>> = out
        .per_iteration
        .iter()
        .map(|stacked| stacked.iter().map(unstack).collect::<Result<Vec<_>, _>>())
        .collect::<Result<_, _>>()
        .map_err(SessionError::run)?;
    let mut assembled: Vec<Vec<Array>> = Vec::with_capacity(k);
    for j in 0..k {
        let results: Vec<Literal> = (0..n)
            .map(|r| {
                let mut leaves: Vec<Literal> =
                    out.carried[r].iter().cloned().map(Literal::Array).collect();
                leaves.extend(
                    per_iteration[r]
                        .iter()
                        .map(|values| Literal::Array(values[j].clone())),
                );
                Literal::Tuple(leaves)
            })
            .collect();
        assembled.push(sharded.assemble(&results)?);
    }
    let c = sig.carried.len();
    let mut outputs = assembled[0][..c].to_vec();
    for o in c..assembled[0].len() {
        let parts: Vec<Array> = assembled.iter().map(|a| a[o].clone()).collect();
        outputs.push(stack(&parts).map_err(SessionError::run)?);
    }
    Ok(outputs)
}
