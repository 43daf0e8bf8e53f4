//! Writing a `while` body's results straight into the loop state.
//!
//! A body computes new values into fresh buffers, which the loop then copies over its state
//! buffers: for a training loop that is a copy of every parameter per iteration. Instead, an
//! instruction whose value becomes state element k writes into state buffer k directly when
//! that is safe:
//! - nothing but this instruction still reads the old state element (its live references are
//!   the loop's own hold plus values whose last reader is this instruction), and
//! - if the instruction reads the old element itself, it reads it only at the element it
//!   writes: through elementwise ops of the output's dimensions (a generated kernel loads an
//!   element's inputs before storing it, also 4 lanes at a time).
//!
//! Then the body's result is already where the state is, and the loop's copy is skipped.

use crate::jit::buffer::{Addr, Buffer, Loc};
use crate::jit::clif::value_at_index::Leaf;
use std::collections::{HashMap, HashSet};
use tessel_compiler::ir::{Computation, InstrId, Op, Shape};

/// For a computation whose root is a tuple and whose result should land in `dest` (a while
/// body and its state): the state buffer each root operand may be written into. Operands that
/// appear twice in the root are left out (one buffer cannot hold two results).
pub fn root_slots(comp: &Computation, dest: Option<&Loc>) -> HashMap<InstrId, Buffer> {
    let mut slots = HashMap::new();
    let Some(Loc::Tuple(dest)) = dest else {
        return slots;
    };
    let root = comp.get(comp.root());
    if !matches!(root.op, Op::Tuple) {
        return slots;
    }
    let operands = root.operands();
    for (k, &id) in operands.iter().enumerate() {
        let once = operands.iter().filter(|&&o| o == id).count() == 1;
        if let (true, Some(Loc::Array(b))) = (once, dest.get(k)) {
            if matches!(b.addr, Addr::Arena(_)) {
                slots.insert(id, b.clone());
            }
        }
    }
    slots
}

/// Whether `slot` may be the output of an instruction of shape `shape` computed now.
/// `refs` are the live references per arena block; `read_here` the locations whose last reader
/// is this instruction; `reads_aligned` checks the instruction's own reads of the slot.
pub fn can_write_in_place(
    slot: &Buffer,
    shape: &Shape,
    refs: &HashMap<usize, u32>,
    read_here: &[&Loc],
    reads_aligned: impl FnOnce() -> bool,
) -> bool {
    let Some(want) = shape.as_array() else {
        return false;
    };
    if slot.shape.element_type != want.element_type || slot.shape.dims != want.dims {
        return false;
    }
    let Addr::Arena(off) = slot.addr else {
        return false;
    };
    let live = refs.get(&off).copied().unwrap_or(0);
    let here: u32 = read_here
        .iter()
        .map(|l| l.leaves().iter().filter(|b| b.addr == slot.addr).count() as u32)
        .sum();
    // One reference is the loop's hold on its state; every other one must end here.
    live == 1 + here && (here == 0 || reads_aligned())
}

/// Whether the kernel computing `root` of `comp` (reading the materialized `leaves`) reads
/// buffer `slot` only at the index it writes: every path from `root` to a leaf in `slot` goes
/// through elementwise ops whose dimensions are the output's.
pub fn reads_only_aligned(
    comp: &Computation,
    root: InstrId,
    leaves: &HashMap<InstrId, Leaf>,
    slot: Addr,
) -> bool {
    let Some(out) = comp.get(root).shape.as_array() else {
        return false;
    };
    let mut seen = HashSet::new();
    let mut stack = vec![(root, true)];
    while let Some((v, aligned)) = stack.pop() {
        if !seen.insert((v, aligned)) {
            continue;
        }
        if let Some(l) = leaves.get(&v) {
            if l.addr == slot && !(aligned && l.shape.dims == out.dims) {
                return false;
            }
            continue;
        }
        let instr = comp.get(v);
        let keep = aligned
            && instr.op.is_elementwise()
            && instr.shape.as_array().is_some_and(|a| a.dims == out.dims);
        stack.extend(instr.operands().iter().map(|&o| (o, keep)));
    }
    true
}
