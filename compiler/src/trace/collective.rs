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

#[cfg(test)]
mod tests {
    use crate::hlo_text::{parse_module, print_module, PrintOptions};
    use crate::ir::ElementType::F32;
    use crate::trace::Tracer;

    #[test]
    fn traces_an_all_reduce_with_its_groups_and_an_add_region() {
        let mut t = Tracer::new("psum");
        let x = t.parameter("x", &[2], F32);
        let y = x.cross_replica_sum(&[vec![0, 2], vec![1, 3]]);
        let m = t.finish(&[&y]).unwrap();
        let text = print_module(&m, &PrintOptions::default());
        assert!(text.contains("all-reduce(") && text.contains("replica_groups={{0,2},{1,3}}"));
        parse_module(&text, None).expect("the printed module parses back");
        // Run on replicas by the estimator's CrossShardOptimizer tests (the runtime has the threads).
    }

    #[test]
    fn bad_groups_are_trace_errors() {
        for (groups, message) in [
            (vec![vec![0, 1], vec![]], "contain an empty group"),
            (vec![vec![0, 1], vec![2]], "differ in size"),
            (vec![vec![0, 1], vec![1, 2]], "name replica 1 twice"),
        ] {
            let mut t = Tracer::new("bad");
            let x = t.parameter("x", &[2], F32);
            let y = x.cross_replica_sum(&groups);
            let err = t.finish(&[&y]).unwrap_err().to_string();
            assert!(err.contains(message), "{err}");
        }
    }
}
