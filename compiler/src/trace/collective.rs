//! `cross_replica_sum`: the one collective a traced model needs (TF's
//! `tpu_ops.cross_replica_sum`, JAX's `psum`), one HLO `all-reduce` with an add region.
//!
//! The sum runs over `replica_groups`; empty groups mean every replica. The runtime folds the
//! members' values in replica-id order (the interpreter's `CollectiveStep`, which the JIT's
//! collectives also call), so a replicated step is bitwise deterministic.

use super::tensor::Tensor;
use super::tracer::RegionKind;
use crate::ir::{CollectiveAttrs, Op};
use std::collections::HashSet;
use std::panic::Location;

impl Tensor {
    /// The elementwise sum of this tensor over the replicas of each group of `groups`
    /// (`[[0, 1], [2, 3]]`: replicas 0 and 1 sum together, as do 2 and 3); `&[]` sums over
    /// all replicas. Groups must be non-empty, of one size, and name each replica at most
    /// once; whether they cover the run's replicas is checked when the program runs (the
    /// tracer does not know the replica count).
    #[track_caller]
    pub fn cross_replica_sum(&self, groups: &[Vec<usize>]) -> Tensor {
        let groups = groups.to_vec();
        Tensor::op(
            "all-reduce",
            false,
            Location::caller(),
            &[self],
            move |cx, v| {
                check_groups(&groups)?;
                let ty = cx.ty(v[0]);
                if ty.is_pred() {
                    return Err(format!(
                        "cross_replica_sum needs numbers, got {}",
                        cx.describe(v[0])
                    ));
                }
                let region = cx.region(RegionKind::Sum, ty);
                let collective = CollectiveAttrs {
                    replica_groups: groups
                        .iter()
                        .map(|g| g.iter().map(|&r| r as i64).collect())
                        .collect(),
                    channel_id: None,
                    use_global_device_ids: false,
                };
                let shape = cx.shape(v[0]);
                Ok(cx.emit_array(
                    Op::AllReduce {
                        collective,
                        to_apply: region,
                    },
                    shape,
                    &[v[0]],
                ))
            },
        )
    }
}

/// Non-empty groups of one size, each replica in at most one group.
fn check_groups(groups: &[Vec<usize>]) -> Result<(), String> {
    let mut seen = HashSet::new();
    for g in groups {
        if g.is_empty() {
            return Err(format!("replica groups {groups:?} contain an empty group"));
        }
        if g.len() != groups[0].len() {
            return Err(format!(
                "replica groups {groups:?} differ in size (every group needs {} replicas)",
                groups[0].len()
            ));
        }
        for &r in g {
            if !seen.insert(r) {
                return Err(format!("replica groups {groups:?} name replica {r} twice"));
            }
        }
    }
    Ok(())
}
