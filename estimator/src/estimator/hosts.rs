//! Training on the hosts of an MPI job (the `mpi` feature, under `mpirun`): host h runs the
//! block `h*L .. (h+1)*L` of the N shards (L = N / H) and feeds only those; the chief
//! (host 0) alone writes in the model_dir and reads the checkpoint to resume from, and sends
//! what it read to the other hosts, so every host starts from the same state and no host
//! needs to see the chief's files. Without a job of several hosts this is one host, the
//! chief, with every shard.

use super::dealer::{Batch, BatchIter};
use super::trace_step::FedComponent;
use super::variables_state::HostState;
use crate::error::EstimatorError;
use std::ops::Range;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Literal};
use tessel_runtime::feed::{unstack, FeedSource};
use tessel_runtime::session::{
    alone_under_launcher, from_chief, from_every_host, job_hosts, SessionError,
};

/// This process's place among the hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hosts {
    /// This host's index (the MPI rank); 0 is the chief.
    pub index: usize,
    pub count: usize,
}

impl Hosts {
    /// The job this process joined, or one host.
    pub(crate) fn of_job() -> Hosts {
        warn_once_if_alone_under_launcher();
        match job_hosts() {
            Some((index, count)) => Hosts { index, count },
            None => Hosts::one(),
        }
    }

    pub(crate) fn one() -> Hosts {
        Hosts { index: 0, count: 1 }
    }

    /// TF's `is_chief`: host 0 writes checkpoints, events and exports, and evaluates.
    pub(crate) fn is_chief(&self) -> bool {
        self.index == 0
    }

    pub(crate) fn several(&self) -> bool {
        self.count > 1
    }

    /// This host's shards of `shards`: an error when they do not split evenly.
    pub(crate) fn local_shards(&self, shards: usize) -> Result<Range<usize>, EstimatorError> {
        if shards == 0 || !shards.is_multiple_of(self.count) {
            return Err(EstimatorError::value(format!(
                "num_shards {shards} does not split evenly over the {} hosts of the MPI job (use a multiple of {})",
                self.count, self.count
            )));
        }
        let local = shards / self.count;
        Ok(self.index * local..(self.index + 1) * local)
    }

    /// The infeed sources of a loop over every shard: `local`'s for this host's block, and
    /// empty ones for the other hosts' shards, which this host never feeds.
    pub(crate) fn place_sources(
        local: Vec<FeedSource>,
        block: &Range<usize>,
        shards: usize,
    ) -> Vec<FeedSource> {
        let mut local = local.into_iter();
        (0..shards)
            .map(
                |s| match block.contains(&s).then(|| local.next()).flatten() {
                    Some(source) => source,
                    None => Box::new(std::iter::empty()) as FeedSource,
                },
            )
            .collect()
    }
}

/// Warns (once) when an MPI launcher started this process among several but it takes no
/// part in their job, so it would train a model of its own.
fn warn_once_if_alone_under_launcher() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if let Some(warning) = alone_under_launcher() {
        WARNED.call_once(|| log::warn!(target: "tessel", "{warning}"));
    }
}

/// The chief's value of a decision every host must share (resume or skip, stop after this
/// loop); the others' values are ignored.
/// Every host of a training job takes `config.fast_allreduce` (the same on every host, else
/// an error on each); one process ignores it.
pub(crate) fn agree_on_fast_allreduce(
    hosts: Hosts,
    config: &crate::RunConfig,
) -> Result<(), EstimatorError> {
    if !hosts.several() {
        return Ok(());
    }
    tessel_runtime::session::set_fast_allreduce(config.fast_allreduce)
        .map_err(|e| EstimatorError::Value(format!("RunConfig.fast_allreduce: {e}")))
}

pub(crate) fn chief_decides(hosts: Hosts, value: i64) -> Result<i64, EstimatorError> {
    if !hosts.several() {
        return Ok(value);
    }
    let sent = if hosts.is_chief() {
        Literal::Array(i64_array(&[value]))
    } else {
        Literal::Tuple(Vec::new())
    };
    match from_chief(sent).map_err(EstimatorError::Session)? {
        Literal::Array(a) => match i64s(&a).as_deref() {
            Some(&[v]) => Ok(v),
            _ => Err(malformed()),
        },
        _ => Err(malformed()),
    }
}

/// The per-step sums of a loop's outfed values (`width` of them) over this host's shards,
/// each with its number of shards, added up over every host in host order: every host then
/// takes the mean over all the job's shards, as one process running them all does (the
/// logged loss, the hooks' values). Without a job of several hosts, `local` itself.
pub(crate) fn step_sums_over_hosts(
    hosts: Hosts,
    width: usize,
    local: Vec<(Vec<f64>, usize)>,
) -> Result<Vec<(Vec<f64>, usize)>, EstimatorError> {
    if !hosts.several() {
        return Ok(local);
    }
    let steps = local.len();
    let row = width + 1;
    let mut flat = Vec::with_capacity(steps * row);
    for (sums, shards) in &local {
        flat.extend((0..width).map(|i| sums.get(i).copied().unwrap_or(0.0)));
        flat.push(*shards as f64);
    }
    let mine = Literal::Array(Array::new(
        ArrayShape::new(ElementType::F64, &[steps as i64, row as i64]),
        ArrayData::F64(flat),
    ));
    let mut total = vec![(vec![0.0; width], 0usize); steps];
    for (host, theirs) in from_every_host(mine)
        .map_err(EstimatorError::Session)?
        .iter()
        .enumerate()
    {
        let values = match theirs.as_array().map(|a| &a.data) {
            Some(ArrayData::F64(v)) if v.len() == steps * row => v,
            _ => {
                return Err(EstimatorError::Session(SessionError::Run {
                    replica: None,
                    instruction: None,
                    message: format!(
                        "host {host} sent the values of a loop of another form (expected {steps} steps of {width} values)"
                    ),
                }))
            }
        };
        for ((sums, shards), r) in total.iter_mut().zip(values.chunks_exact(row)) {
            sums.iter_mut().zip(r).for_each(|(s, v)| *s += v);
            *shards += r[width] as usize;
        }
    }
    Ok(total)
}

/// The chief's state (its restored checkpoint or initial values, step and input position) on
/// every host. Another host's `state` is `None`: it reads nothing from the model_dir.
pub(crate) fn state_from_chief(
    hosts: Hosts,
    state: Option<HostState>,
) -> Result<HostState, EstimatorError> {
    if !hosts.several() {
        return state.ok_or_else(malformed);
    }
    let sent = match &state {
        Some(s) if hosts.is_chief() => {
            let mut parts = vec![Literal::Array(i64_array(&[
                s.global_step,
                s.input_batches as i64,
            ]))];
            parts.extend(s.values.iter().cloned().map(Literal::Array));
            Literal::Tuple(parts)
        }
        _ => Literal::Tuple(Vec::new()),
    };
    let received = from_chief(sent).map_err(EstimatorError::Session)?;
    if let Some(own) = state.filter(|_| hosts.is_chief()) {
        return Ok(own);
    }
    let Literal::Tuple(parts) = received else {
        return Err(malformed());
    };
    let mut parts = parts.into_iter();
    let (Some(Literal::Array(head)), values) = (parts.next(), parts) else {
        return Err(malformed());
    };
    let Some(&[global_step, input_batches]) = i64s(&head).as_deref() else {
        return Err(malformed());
    };
    let values = values
        .map(|l| match l {
            Literal::Array(a) => Ok(a),
            _ => Err(malformed()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HostState {
        global_step,
        values,
        input_batches: input_batches as u64,
        restored_from: None,
        warm_started_from: None,
        warm_start_note: None,
    })
}

fn i64_array(v: &[i64]) -> Array {
    Array::new(
        ArrayShape::new(ElementType::S64, &[v.len() as i64]),
        ArrayData::S64(v.to_vec()),
    )
}

/// An s64 array's values, exactly (a seed needs all 64 bits).
fn i64s(a: &Array) -> Option<Vec<i64>> {
    match &a.data {
        ArrayData::S64(v) => Some(v.clone()),
        _ => None,
    }
}

fn malformed() -> EstimatorError {
    EstimatorError::Session(SessionError::Run {
        replica: None,
        instruction: None,
        message: "the chief sent a state of another form".to_string(),
    })
}

/// The components one shard is fed when a host's input_fn makes batches for its `local`
/// shards together (TF's PER_HOST_V1): each component's leading dimension split `local` ways.
pub(crate) fn per_shard_components(
    host: &[FedComponent],
    local: usize,
) -> Result<Vec<FedComponent>, EstimatorError> {
    host.iter()
        .map(|c| match c.dims.first() {
            Some(&rows) if rows > 0 && rows % local as i64 == 0 => {
                let mut dims = c.dims.clone();
                dims[0] = rows / local as i64;
                Ok(FedComponent {
                    dims,
                    ..c.clone()
                })
            }
            _ => Err(EstimatorError::Input(format!(
                "component `{}` is {:?} per host, which does not split along its first dimension over the host's {local} shards (batch it with params[\"batch_size\"], the per-host batch)",
                c.name, c.dims
            ))),
        })
        .collect()
}

/// A host's batches, each split along its leading dimension into `local` shard batches
/// (in shard order): the dealer hands them to the host's shards in turn.
pub(crate) fn split_batches(batches: BatchIter, local: usize) -> BatchIter {
    if local == 1 {
        return batches;
    }
    Box::new(
        batches.flat_map(move |batch| match batch.and_then(|b| split(b, local)) {
            Ok(shards) => shards.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        }),
    )
}

fn split(batch: Batch, local: usize) -> Result<Vec<Batch>, tessel_runtime::feed::FeedError> {
    let mut shards: Vec<Batch> = vec![Vec::with_capacity(batch.len()); local];
    for a in batch {
        let rows = a.shape.dims.first().copied().unwrap_or(0);
        let mut dims = vec![local as i64, rows / local as i64];
        dims.extend(a.shape.dims.iter().skip(1).copied());
        let stacked = Array::try_new(ArrayShape::new(a.shape.element_type, &dims), a.data)
            .map_err(|e| tessel_runtime::feed::FeedError::message(e.to_string()))?;
        for (shard, part) in shards.iter_mut().zip(unstack(&stacked)?) {
            shard.push(part);
        }
    }
    Ok(shards)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_runtime::feed::FeedError;

    fn rows(n: i64, first: i32) -> Array {
        Array::new(
            ArrayShape::new(ElementType::S32, &[n, 2]),
            ArrayData::S32((first..first + 2 * n as i32).collect()),
        )
    }

    #[test]
    fn hosts_split_the_shards_into_contiguous_blocks() {
        let h = Hosts { index: 1, count: 2 };
        assert_eq!(h.local_shards(4).unwrap(), 2..4);
        assert!(!h.is_chief());
        let e = h.local_shards(3).unwrap_err().to_string();
        assert!(
            e.contains("num_shards 3 does not split evenly over the 2 hosts"),
            "{e}"
        );
        assert_eq!(Hosts::one().local_shards(3).unwrap(), 0..3);
    }

    #[test]
    fn a_host_batch_splits_into_its_shards_batches_in_order() {
        let batches: BatchIter = Box::new((0..2).map(|i| Ok(vec![rows(4, 100 * i)])));
        let got: Vec<Vec<i32>> = split_batches(batches, 2)
            .map(|b| match &b.unwrap()[0].data {
                ArrayData::S32(v) => v.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                vec![0, 1, 2, 3],
                vec![4, 5, 6, 7],
                vec![100, 101, 102, 103],
                vec![104, 105, 106, 107]
            ]
        );
        let failing: BatchIter = Box::new(std::iter::once(Err(FeedError::message("bad"))));
        assert_eq!(
            split_batches(failing, 2)
                .next()
                .unwrap()
                .unwrap_err()
                .to_string(),
            "bad"
        );
    }

    #[test]
    fn per_shard_components_divide_the_host_batch() {
        let c = FedComponent {
            name: "x".into(),
            element_type: ElementType::F32,
            dims: vec![6, 784],
        };
        assert_eq!(
            per_shard_components(std::slice::from_ref(&c), 3).unwrap()[0].dims,
            vec![2, 784]
        );
        let e = per_shard_components(&[c], 4).unwrap_err().to_string();
        assert!(e.contains("over the host's 4 shards"), "{e}");
    }

    #[test]
    fn only_the_local_block_is_fed() {
        let local: Vec<FeedSource> = (0..2)
            .map(|i| Box::new(std::iter::once(Ok(Literal::Array(rows(1, i))))) as FeedSource)
            .collect();
        let mut placed = Hosts::place_sources(local, &(2..4), 4);
        assert_eq!(placed.len(), 4);
        assert!(placed[0].next().is_none() && placed[1].next().is_none());
        assert!(placed[2].next().is_some() && placed[3].next().is_some());
    }

    #[test]
    fn a_host_input_fn_learns_its_host() {
        let p = super::super::params::Params::new().with_batch_size(64);
        assert_eq!((p.host_index(), p.num_hosts()), (0, 1));
        let host = p.for_input_host(1, 2);
        assert_eq!((host.host_index(), host.num_hosts()), (1, 2));
        assert_eq!(host.get("context").and_then(|c| c.as_i64()), Some(1));
        assert_eq!(host.batch_size(), 64);
    }

    #[test]
    fn one_host_decides_alone() {
        assert_eq!(chief_decides(Hosts::one(), 7).unwrap(), 7);
    }
}
