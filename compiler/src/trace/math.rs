//! Elementwise math: unary functions, comparisons, min/max, select and casts.

use super::tensor::Tensor;
use crate::ir::{BinaryOp, ComparisonDirection, ElementType, UnaryOp};
use std::panic::Location;

impl Tensor {
    #[track_caller]
    fn unary_op(&self, op: UnaryOp) -> Tensor {
        Tensor::op(op.name(), false, Location::caller(), &[self], |cx, v| {
            cx.unary(op, v[0])
        })
    }

    #[track_caller]
    pub fn exp(&self) -> Tensor {
        self.unary_op(UnaryOp::Exp)
    }

    #[track_caller]
    pub fn log(&self) -> Tensor {
        self.unary_op(UnaryOp::Log)
    }

    #[track_caller]
    pub fn tanh(&self) -> Tensor {
        self.unary_op(UnaryOp::Tanh)
    }

    /// `1 / (1 + exp(-x))`, HLO's `logistic`.
    #[track_caller]
    pub fn sigmoid(&self) -> Tensor {
        self.unary_op(UnaryOp::Logistic)
    }

    #[track_caller]
    pub fn sqrt(&self) -> Tensor {
        self.unary_op(UnaryOp::Sqrt)
    }

    #[track_caller]
    pub fn rsqrt(&self) -> Tensor {
        self.unary_op(UnaryOp::Rsqrt)
    }

    #[track_caller]
    pub fn abs(&self) -> Tensor {
        self.unary_op(UnaryOp::Abs)
    }

    /// Elementwise maximum with broadcasting.
    #[track_caller]
    pub fn maximum(&self, other: &Tensor) -> Tensor {
        self.binary_op(BinaryOp::Maximum, other)
    }

    /// Elementwise minimum with broadcasting.
    #[track_caller]
    pub fn minimum(&self, other: &Tensor) -> Tensor {
        self.binary_op(BinaryOp::Minimum, other)
    }

    /// `self ** exponent` elementwise.
    #[track_caller]
    pub fn pow(&self, exponent: &Tensor) -> Tensor {
        self.binary_op(BinaryOp::Power, exponent)
    }

    /// Converts to another element type (`cast(S64)` makes the 64-bit values that the
    /// legality check rejects; it is still traced so that the check can explain it).
    #[track_caller]
    pub fn cast(&self, ty: ElementType) -> Tensor {
        Tensor::op("convert", false, Location::caller(), &[self], |cx, v| {
            Ok(cx.convert(v[0], ty))
        })
    }

    #[track_caller]
    fn compare_op(&self, direction: ComparisonDirection, other: &Tensor) -> Tensor {
        Tensor::op(
            "compare",
            false,
            Location::caller(),
            &[self, other],
            |cx, v| cx.compare(direction, v[0], v[1]),
        )
    }

    /// `self == other` elementwise (a `pred` tensor).
    #[track_caller]
    pub fn equal(&self, other: &Tensor) -> Tensor {
        self.compare_op(ComparisonDirection::Eq, other)
    }

    #[track_caller]
    pub fn not_equal(&self, other: &Tensor) -> Tensor {
        self.compare_op(ComparisonDirection::Ne, other)
    }

    #[track_caller]
    pub fn less(&self, other: &Tensor) -> Tensor {
        self.compare_op(ComparisonDirection::Lt, other)
    }

    #[track_caller]
    pub fn less_equal(&self, other: &Tensor) -> Tensor {
        self.compare_op(ComparisonDirection::Le, other)
    }

    #[track_caller]
    pub fn greater(&self, other: &Tensor) -> Tensor {
        self.compare_op(ComparisonDirection::Gt, other)
    }

    #[track_caller]
    pub fn greater_equal(&self, other: &Tensor) -> Tensor {
        self.compare_op(ComparisonDirection::Ge, other)
    }

    /// `cond ? on_true : on_false` elementwise, with broadcasting of all three; `self` is
    /// the `pred` condition.
    #[track_caller]
    pub fn where_(&self, on_true: &Tensor, on_false: &Tensor) -> Tensor {
        Tensor::op(
            "select",
            false,
            Location::caller(),
            &[self, on_true, on_false],
            |cx, v| cx.select(v[0], v[1], v[2]),
        )
    }

    /// A scalar constant with this tensor's element type (broadcasts against it).
    #[track_caller]
    pub fn scalar_like(&self, value: f64) -> Tensor {
        Tensor::op("constant", false, Location::caller(), &[self], |cx, v| {
            Ok(cx.constant_scalar(cx.ty(v[0]), value))
        })
    }
}
