//! `unary`: any HLO elementwise unary op by its [`UnaryOp`], for the ones without a named
//! method (`floor`, `ceil`, `cosine`, `sine`, ...), so callers need not build instructions.

use super::tensor::Tensor;
use crate::ir::UnaryOp;
use std::panic::Location;

impl Tensor {
    /// HLO's unary `op` elementwise (`x.unary(UnaryOp::Floor)`). Float-only ops on integers
    /// are trace errors, as for the named methods.
    #[track_caller]
    pub fn unary(&self, op: UnaryOp) -> Tensor {
        Tensor::op(op.name(), false, Location::caller(), &[self], |cx, v| {
            cx.unary(op, v[0])
        })
    }
}
