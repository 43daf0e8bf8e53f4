//! Shape inference: the result shape of every op from its operands' shapes and attributes.
//! Errors name the op and every operand shape involved.

use crate::ir::{Module, Op, Shape};
use std::fmt;

/// Why an op cannot be applied to operands of these shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError {
    pub message: String,
}

impl ShapeError {
    pub fn new(message: impl Into<String>) -> ShapeError {
        ShapeError {
            message: message.into(),
        }
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ShapeError {}

/// The shape `op` produces from operands of shapes `operands`. `module` gives the signatures
/// of called computations (reduce's `to_apply`, `call`, `while`, ...).
pub fn infer_shape(module: &Module, op: &Op, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let _ = (module, operands);
    Err(ShapeError::new(format!(
        "shape inference for {} is not written yet",
        op.opcode_name()
    )))
}
