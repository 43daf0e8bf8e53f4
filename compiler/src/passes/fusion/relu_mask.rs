//! A ReLU's gradient mask read from the ReLU's output when that output is stored anyway.
//!
//! The gradient of `r = maximum(z, 0)` selects by `compare(z, 0), direction=GT`. The mask
//! `r > 0` is the same predicate: `r` is `z` where `z > 0` and zero elsewhere, and a NaN
//! compares false either way. When `r` is stored anyway (a convolution or a dot reads it, or it
//! is a result), reading `r` for the mask instead of `z` leaves the ReLU as `z`'s only reader,
//! so `z` is computed inside the ReLU's fusion and never stored. In ResNet-20's step each
//! batch-norm/ReLU layer stored both `y` and `relu(y)` and read `y` back to store `relu(y)`;
//! it now stores `relu(y)` once.

use super::*;
use crate::ir::{BinaryOp, ComparisonDirection, ComparisonType};

/// Points every ReLU mask of `c` whose ReLU is stored anyway at the ReLU's output (see the
/// module doc). Returns whether anything changed.
pub(super) fn read_masks_from_stored_relus(c: &mut Computation) -> bool {
    let mut rewrites: Vec<(InstrId, usize, InstrId)> = Vec::new();
    for &id in c.ids() {
        let instr = c.get(id);
        let Op::Compare {
            direction,
            comparison_type: None | Some(ComparisonType::Float),
        } = instr.op
        else {
            continue;
        };
        // `z > 0`, or `0 < z`: the slot of `z`.
        let slot = match direction {
            ComparisonDirection::Gt if is_zero(c, instr.operand(1)) => 0,
            ComparisonDirection::Lt if is_zero(c, instr.operand(0)) => 1,
            _ => continue,
        };
        let z = instr.operand(slot);
        if !c.get(z).shape.element_type().is_some_and(|t| t.is_float()) {
            continue;
        }
        // After CSE a value has at most one ReLU, so the users' order does not matter.
        if let Some(relu) = c
            .users_unordered(z)
            .find(|&u| is_relu_of(c, u, z) && is_stored_anyway(c, u))
        {
            rewrites.push((id, slot, relu));
        }
    }
    for &(id, slot, relu) in &rewrites {
        c.set_operand(id, slot, relu);
    }
    !rewrites.is_empty()
}

/// Whether `r` is `maximum(z, 0)` or `maximum(0, z)`, of `z`'s shape.
fn is_relu_of(c: &Computation, r: InstrId, z: InstrId) -> bool {
    let instr = c.get(r);
    matches!(instr.op, Op::Binary(BinaryOp::Maximum))
        && instr.shape == c.get(z).shape
        && match instr.operands() {
            &[a, b] => (a == z && is_zero(c, b)) || (b == z && is_zero(c, a)),
            _ => false,
        }
}

/// A scalar constant zero, or a broadcast of one.
fn is_zero(c: &Computation, id: InstrId) -> bool {
    let mut instr = c.get(id);
    if matches!(instr.op, Op::Broadcast { .. }) {
        instr = c.get(instr.operand(0));
    }
    match &instr.op {
        Op::Constant(lit) => lit
            .as_array()
            .is_some_and(|a| a.len() == 1 && a.data.get_f64(0) == 0.0),
        _ => false,
    }
}
