//! Figures about a module that the compile report prints: kernels and fusions.

use super::util::code_computations;
use crate::ir::{Module, Op};

/// Whether an instruction runs as a kernel of its own (a loop nest or a library call) rather
/// than being a view, a value known at compile time, or control flow.
pub(crate) fn is_kernel(op: &Op) -> bool {
    !matches!(
        op,
        Op::Parameter(_)
            | Op::Constant(_)
            | Op::Tuple
            | Op::GetTupleElement { .. }
            | Op::Bitcast
            | Op::Reshape
            | Op::AfterAll
            | Op::While { .. }
            | Op::Call { .. }
            | Op::Conditional { .. }
            | Op::ReplicaId
            | Op::PartitionId
    )
}

/// Kernels in the entry and in the computations it runs through control flow.
pub fn kernel_count(m: &Module) -> usize {
    code_computations(m)
        .into_iter()
        .map(|cid| {
            let c = m.computation(cid);
            c.ids()
                .iter()
                .filter(|&&id| is_kernel(&c.get(id).op))
                .count()
        })
        .sum()
}

/// Fusion instructions in the entry and in the computations it runs through control flow.
pub(crate) fn fusion_count(m: &Module) -> usize {
    code_computations(m)
        .into_iter()
        .map(|cid| {
            let c = m.computation(cid);
            c.ids()
                .iter()
                .filter(|&&id| matches!(c.get(id).op, Op::Fusion { .. }))
                .count()
        })
        .sum()
}
