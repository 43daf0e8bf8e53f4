//! While-loop unrolling: a loop with a small fixed trip count (`crate::loop_counter`) is
//! replaced by that many `call`s of its body, each on the state the previous one returned;
//! the call inliner then inlines them, and the simplifier, constant folding and fusion work
//! across what were iterations. A loop whose body never runs becomes its initial state.
//!
//! Why: JAX's Threefry (every `jax.random` draw, dropout among them) is a `fori_loop` of 5
//! iterations whose body rotates its rotation constants through the loop state. Run as a
//! loop, each iteration is 5 small kernels over the counters; unrolled, the rotations are
//! constants and the 20 rounds fuse into one kernel. XLA's `WhileLoopUnroller` does the same
//! for small trip counts.
//!
//! Limits:
//! - at most [`MAX_TRIPS`] iterations and [`MAX_UNROLLED_INSTRUCTIONS`] body instructions in
//!   all (counted through the computations the body calls), so that a training loop or a long
//!   `scan` stays a loop;
//! - bodies that do anything besides computing (infeed, outfeed, collectives, tokens,
//!   custom-calls), directly or in a computation they call, stay loops: unrolled, the
//!   scheduler could order such effects of different iterations differently.

use super::util::{name_base, pin_roots, while_loops};
use super::{Pass, PassError};
use crate::ir::{ComputationId, InstrId, Instruction, Module, Op};
use crate::loop_counter::find_counter;

/// Most iterations a loop may have to be unrolled.
pub(crate) const MAX_TRIPS: i64 = 8;
/// Most instructions the unrolled copies may add, in all.
pub(crate) const MAX_UNROLLED_INSTRUCTIONS: usize = 2000;

#[derive(Default)]
pub struct WhileLoopUnroller;

impl Pass for WhileLoopUnroller {
    fn name(&self) -> &'static str {
        "while-loop-unroller"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for cid in m.computation_ids().collect::<Vec<_>>() {
            for w in while_loops(m, cid) {
                if let Some(trips) = unrollable(m, cid, w) {
                    unroll(m, cid, w, trips);
                    changed = true;
                }
            }
        }
        Ok(changed)
    }
}

/// The trip count of loop `w` in `comp` if it is to be unrolled (see the module doc).
fn unrollable(m: &Module, comp: ComputationId, w: InstrId) -> Option<i64> {
    let instr = m.computation(comp).get(w);
    let Op::While { condition, body } = instr.op else {
        return None;
    };
    let counter = find_counter(m, comp, instr.operand(0), condition, body).ok()?;
    let trips = counter.trips.max(0);
    if trips > MAX_TRIPS {
        return None;
    }
    let size = pure_size(m, body, 0)?;
    (size.saturating_mul(trips as usize) <= MAX_UNROLLED_INSTRUCTIONS).then_some(trips)
}

/// Instructions of `comp` and of every computation it calls, or `None` if any has an effect
/// besides its result. Nesting deeper than 64 computations counts as too large.
fn pure_size(m: &Module, comp: ComputationId, depth: usize) -> Option<usize> {
    if depth > 64 {
        return None;
    }
    let mut size = 0usize;
    for (_, instr) in m.computation(comp).instructions() {
        let op = &instr.op;
        if op.has_side_effect()
            || op.is_collective()
            || matches!(op, Op::AfterAll | Op::CustomCall { .. })
        {
            return None;
        }
        size += 1;
        for callee in op.called_computations() {
            size = size.saturating_add(pure_size(m, callee, depth + 1)?);
        }
    }
    Some(size)
}

/// Replaces loop `w` in `comp` by `trips` chained calls of its body.
fn unroll(m: &mut Module, comp: ComputationId, w: InstrId, trips: i64) {
    let instr = m.computation(comp).get(w);
    let Op::While { body, .. } = instr.op else {
        unreachable!("checked by unrollable");
    };
    let (shape, metadata) = (instr.shape.clone(), instr.metadata.clone());
    let base = format!("{}.iteration", name_base(&instr.name));
    let mut state = instr.operand(0);
    for _ in 0..trips {
        let mut call = Instruction::new(
            m.unique_name(&base),
            Op::Call { to_apply: body },
            shape.clone(),
        );
        call.metadata = metadata.clone();
        state = m.computation_mut(comp).add(call, &[state]);
    }
    let c = m.computation_mut(comp);
    c.replace_all_uses(w, state);
    c.remove(w);
}
