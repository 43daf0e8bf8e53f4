//! Which instructions of an unfused computation the JIT recomputes inside their users'
//! kernels instead of writing to memory (a simple producer-into-consumer fusion, so that
//! modules run fast before, or without, the optimizer's fusion pass).
//!
//! An elementwise or shape instruction is fused when every user is itself computed by a
//! kernel and either it is cheap to recompute (broadcast, iota, transpose, slice, reverse: a
//! load with another index), or it has a single user that reads each of its elements at most
//! once (elementwise ops, reduce, pad, slice, ...). Everything else is materialized: roots,
//! values used by dot, convolution, calls, loops, tuples, reshapes.
//!
//! A chain of fused instructions is at most [`MAX_FUSED_DEPTH`] long: a kernel's expression
//! is emitted recursively (`clif/value_at_index.rs`), so a 10,000-op chain fused whole would
//! overflow the stack. Every [`MAX_FUSED_DEPTH`]-th instruction of a longer chain is
//! materialized.

use std::collections::{HashMap, HashSet};
use tessel_compiler::ir::{Computation, InstrId, Op};

/// Ops computed by a generated kernel (rooted at them, or fused into one).
pub(crate) fn is_kernel_op(op: &Op) -> bool {
    match op {
        Op::Copy => false,
        Op::Broadcast { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Pad { .. }
        | Op::Concatenate { .. }
        | Op::Reverse { .. }
        | Op::Iota { .. }
        | Op::DynamicSlice { .. }
        | Op::DynamicUpdateSlice
        | Op::Reduce { .. }
        | Op::ReduceWindow { .. }
        | Op::SelectAndScatter { .. } => true,
        op => op.is_elementwise(),
    }
}

/// Ops that can live inside another kernel's expression.
fn is_fusible(op: &Op) -> bool {
    is_kernel_op(op)
        && !matches!(
            op,
            Op::Reduce { .. } | Op::ReduceWindow { .. } | Op::SelectAndScatter { .. }
        )
}

fn is_cheap(op: &Op) -> bool {
    matches!(
        op,
        Op::Broadcast { .. }
            | Op::Iota { .. }
            | Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Reverse { .. }
    )
}

/// Whether `op` reads each element of its operands at most once per evaluation.
fn reads_each_once(op: &Op) -> bool {
    is_kernel_op(op)
        && !matches!(
            op,
            Op::Broadcast { .. } | Op::ReduceWindow { .. } | Op::SelectAndScatter { .. }
        )
}

/// The longest chain of fused instructions below a kernel's root (see the module doc).
pub(crate) const MAX_FUSED_DEPTH: usize = 256;

/// The instructions of `comp` that are not materialized.
pub(crate) fn plan(comp: &Computation) -> HashSet<InstrId> {
    let root = comp.root();
    let mut fused = HashSet::new();
    // For each fused instruction, how many fused instructions lie between it and the root of
    // the deepest kernel that recomputes it (itself included); users come first in this order.
    let mut depth: HashMap<InstrId, usize> = HashMap::new();
    for id in comp.post_order().into_iter().rev() {
        let instr = comp.get(id);
        if id == root || !is_fusible(&instr.op) || !instr.shape.is_array() {
            continue;
        }
        let users = comp.users(id);
        if users.is_empty() {
            continue;
        }
        let cheap = is_cheap(&instr.op);
        let ok = users.iter().all(|&u| {
            let op = &comp.get(u).op;
            is_kernel_op(op) && (cheap || (users.len() == 1 && reads_each_once(op)))
        });
        let d = 1 + users
            .iter()
            .map(|u| depth.get(u).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        if ok && d <= MAX_FUSED_DEPTH {
            fused.insert(id);
            depth.insert(id, d);
        }
    }
    fused
}

/// For each position in the order of materialized instructions (post-order without the fused
/// ones), the materialized values read for the last time by the instruction at that position
/// (through fused instructions too). Values nothing reads die where they are made; the root
/// never dies.
pub(crate) fn last_uses(
    comp: &Computation,
    fused: &HashSet<InstrId>,
) -> HashMap<usize, Vec<InstrId>> {
    let order: Vec<InstrId> = comp
        .post_order()
        .into_iter()
        .filter(|id| !fused.contains(id))
        .collect();
    let pos: HashMap<InstrId, usize> = order.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    // Effective position of a use by each instruction: its own position, or for a fused one
    // the latest position of the kernels that recompute it.
    let mut eff: HashMap<InstrId, usize> = HashMap::new();
    for id in comp.post_order().into_iter().rev() {
        let e = match pos.get(&id) {
            Some(&p) => p,
            None => comp
                .users(id)
                .iter()
                .filter_map(|u| eff.get(u).copied())
                .max()
                .unwrap_or(0),
        };
        eff.insert(id, e);
    }
    let root = comp.root();
    let mut dying: HashMap<usize, Vec<InstrId>> = HashMap::new();
    for (i, &id) in order.iter().enumerate() {
        if id == root {
            continue;
        }
        let last = comp
            .users(id)
            .iter()
            .filter_map(|u| eff.get(u).copied())
            .max()
            .unwrap_or(i)
            .max(i);
        dying.entry(last).or_default().push(id);
    }
    dying
}
