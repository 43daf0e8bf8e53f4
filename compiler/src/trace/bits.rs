//! Integer bit ops for counter-based random numbers on the device: `and`, `or`, `xor`,
//! shifts, `bitcast-convert`, `iota` and `replica-id` (what threefry2x32 and its conversion
//! to floats need, as JAX traces them).

use super::dims::{array_shape, IntoDims};
use super::tensor::Tensor;
use super::tracer::Tracer;
use crate::ir::{BinaryOp, ElementType, Op};
use std::panic::Location;

impl Tensor {
    /// Bitwise `and` (integers or pred), with broadcasting.
    #[track_caller]
    pub fn bitwise_and(&self, other: &Tensor) -> Tensor {
        self.binary_op(BinaryOp::And, other)
    }

    /// Bitwise `or` (integers or pred), with broadcasting.
    #[track_caller]
    pub fn bitwise_or(&self, other: &Tensor) -> Tensor {
        self.binary_op(BinaryOp::Or, other)
    }

    /// Bitwise `xor` (integers or pred), with broadcasting.
    #[track_caller]
    pub fn bitwise_xor(&self, other: &Tensor) -> Tensor {
        self.binary_op(BinaryOp::Xor, other)
    }

    /// `self << bits` (HLO gives 0 for shifts of the bit width or more).
    #[track_caller]
    pub fn shift_left(&self, bits: &Tensor) -> Tensor {
        self.binary_op(BinaryOp::ShiftLeft, bits)
    }

    /// `self >> bits`, filling with zeros.
    #[track_caller]
    pub fn shift_right_logical(&self, bits: &Tensor) -> Tensor {
        self.binary_op(BinaryOp::ShiftRightLogical, bits)
    }

    /// Reinterprets the bits of each element as `ty`, which must have the same bit width
    /// (`u32` to `f32`, say).
    #[track_caller]
    pub fn bitcast(&self, ty: ElementType) -> Tensor {
        Tensor::op(
            "bitcast_convert",
            false,
            Location::caller(),
            &[self],
            |cx, v| {
                let from = cx.ty(v[0]);
                if from.bit_width() != ty.bit_width() || from.is_pred() || ty.is_pred() {
                    return Err(format!(
                        "cannot reinterpret {} as {ty}: the bit widths differ",
                        cx.describe(v[0])
                    ));
                }
                let shape = cx.shape(v[0]).with_element_type(ty);
                Ok(cx.emit_array(Op::BitcastConvert, shape, &[v[0]]))
            },
        )
    }
}

impl Tracer {
    /// `0, 1, 2, ...` along `dimension` of an array of `dims` (fixed sizes), of an integer or
    /// float type.
    #[track_caller]
    pub fn iota(&mut self, dims: impl IntoDims, ty: ElementType, dimension: usize) -> Tensor {
        let loc = Location::caller();
        let dims = dims.into_dims();
        self.emit_leaf("iota", loc, move |cx| {
            if dimension >= dims.len() || dims.iter().any(|d| d.is_unknown()) || ty.is_pred() {
                return Err(format!(
                    "iota needs fixed dimensions, a dimension below their rank and a numeric type, got {} along {dimension}",
                    super::dims::describe(&array_shape(ty, &dims))
                ));
            }
            Ok(cx.iota(ty, &dims, dimension))
        })
    }

    /// The number of the replica running the program (a `u32` scalar; 0 on one replica).
    #[track_caller]
    pub fn replica_id(&mut self) -> Tensor {
        let loc = Location::caller();
        self.emit_leaf("replica_id", loc, |cx| {
            Ok(cx.emit_array(
                Op::ReplicaId,
                crate::ir::ArrayShape::scalar(ElementType::U32),
                &[],
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::ElementType::{F32, F64, U32};
    use crate::trace::{Dim, Tracer};

    #[test]
    fn bit_ops_check_their_operands() {
        let mut t = Tracer::new("bits");
        let x = t.parameter("x", &[4], U32);
        let f = t.parameter("f", &[4], F32);
        let ok = x
            .bitwise_xor(&x)
            .shift_left(&x.scalar_like(3.0))
            .bitcast(F32);
        assert_eq!(ok.element_type(), Some(F32));
        let _ = f.bitwise_and(&f); // floats have no bits to and
        let _ = x.bitcast(F64); // 32 to 64 bits
        let _ = t.iota(&[Dim::Unknown, Dim::Fixed(2)], U32, 0);
        let _ = t.iota([3i64].as_slice(), U32, 1);
        let id = t.replica_id();
        assert_eq!(id.element_type(), Some(U32));
        let issues = t.issues();
        let ops: Vec<&str> = issues.iter().map(|i| i.op.as_str()).collect();
        assert_eq!(
            ops,
            ["and", "bitcast_convert", "iota", "iota"],
            "{issues:?}"
        );
    }
}
