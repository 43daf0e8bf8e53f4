//! Finite-difference checks of the elementwise rules.

use super::{check, check_with, random_inputs, Case};
use crate::ir::{
    Array, ArrayData, BinaryOp, ComparisonDirection, ElementType, Literal, Op, UnaryOp,
};

fn unary_case(op: UnaryOp) -> crate::ir::Module {
    let mut c = Case::new();
    let x = c.param(&[2, 3]);
    let y = c.em().unary(op, x).unwrap();
    c.finish(y)
}

#[test]
fn unary_math_on_positive_inputs() {
    use UnaryOp::*;
    for (seed, op) in [
        Abs, Negate, Exp, Expm1, Log, Log1p, Tanh, Logistic, Sqrt, Rsqrt, Cbrt, Sine, Cosine, Tan,
        Erf,
    ]
    .into_iter()
    .enumerate()
    {
        check(&unary_case(op), seed as u64, 0.2, 1.4);
    }
}

#[test]
fn unary_math_on_negative_inputs() {
    use UnaryOp::*;
    for (seed, op) in [
        Abs, Exp, Expm1, Tanh, Logistic, Cbrt, Sine, Cosine, Tan, Erf,
    ]
    .into_iter()
    .enumerate()
    {
        check(&unary_case(op), 100 + seed as u64, -1.4, -0.2);
    }
}

#[test]
fn piecewise_constant_ops_have_zero_gradient() {
    use UnaryOp::*;
    for op in [Floor, Ceil, RoundNearestEven, RoundNearestAfz, Sign] {
        let m = unary_case(op);
        let inputs = random_inputs(&m, 3, -2.0, 2.0);
        let g = check_with(&m, &[0], &inputs);
        assert!((0..g[0].len()).all(|i| g[0].data.get_f64(i) == 0.0));
    }
}

fn binary_case(op: BinaryOp) -> crate::ir::Module {
    let mut c = Case::new();
    let a = c.param(&[3, 2]);
    let b = c.param(&[3, 2]);
    let y = c.em().binary(op, a, b).unwrap();
    c.finish(y)
}

#[test]
fn binary_arithmetic() {
    use BinaryOp::*;
    for (seed, op) in [
        Add, Subtract, Multiply, Divide, Maximum, Minimum, Power, Atan2,
    ]
    .into_iter()
    .enumerate()
    {
        check(&binary_case(op), 10 + seed as u64, 0.3, 2.0);
    }
    for (seed, op) in [Add, Subtract, Multiply, Divide, Maximum, Minimum, Atan2]
        .into_iter()
        .enumerate()
    {
        check(&binary_case(op), 20 + seed as u64, -2.0, 2.0);
    }
}

#[test]
fn remainder_away_from_its_jumps() {
    let m = binary_case(BinaryOp::Remainder);
    let a = Array::f32(&[3, 2], vec![5.3, -7.1, 4.4, 9.9, -3.3, 2.2]);
    let b = Array::f32(&[3, 2], vec![1.7, 2.3, -1.9, 3.1, 0.7, -0.9]);
    check_with(&m, &[0, 1], &[Literal::Array(a), Literal::Array(b)]);
}

#[test]
fn power_with_zero_exponent_or_base_has_no_nan() {
    let m = binary_case(BinaryOp::Power);
    let a = Array::f32(&[3, 2], vec![0.0, 0.0, 1.5, 2.0, 0.5, 3.0]);
    let b = Array::f32(&[3, 2], vec![2.0, 3.0, 0.0, 1.0, 2.5, 0.5]);
    let g = check_with(&m, &[0, 1], &[Literal::Array(a), Literal::Array(b)]);
    for grad in &g {
        assert!((0..grad.len()).all(|i| grad.data.get_f64(i).is_finite()));
    }
}

#[test]
fn max_splits_ties_in_half_like_jax() {
    // max(x, y) with x == y: each gets half of the cotangent.
    let m = binary_case(BinaryOp::Maximum);
    let x = Array::f32(&[3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = Array::f32(&[3, 2], vec![1.0, 0.0, 3.0, 9.0, 5.0, 0.0]);
    let grad = super::super::grad_module(&m, &[0, 1]).unwrap();
    let out = crate::interpreter::evaluate(&grad, &[Literal::Array(x), Literal::Array(y)]).unwrap();
    let parts = out.as_tuple().unwrap();
    let gx = parts[1].as_array().unwrap();
    let gy = parts[2].as_array().unwrap();
    for i in 0..6 {
        let w = 0.5 + ((i * 7919 + 13) % 101) as f64 / 101.0;
        let (expect_x, expect_y) = match i {
            0 | 2 | 4 => (w / 2.0, w / 2.0),
            3 => (0.0, w),
            _ => (w, 0.0),
        };
        assert!((gx.data.get_f64(i) - expect_x).abs() < 1e-6, "x {i}");
        assert!((gy.data.get_f64(i) - expect_y).abs() < 1e-6, "y {i}");
    }
}

#[test]
fn relu_gives_no_gradient_at_zero_like_tf_and_jax_nn_relu() {
    // max(x, 0) and max(0, x) with a constant zero: g where x > 0, 0 at x == 0 (TF's
    // ReluGrad), where a general max would give x == 0 half.
    for zero_first in [false, true] {
        let mut c = Case::new();
        let x = c.param(&[3, 2]);
        let mut em = c.em();
        let zero = em.full_like(x, 0.0).unwrap();
        let (a, b) = if zero_first { (zero, x) } else { (x, zero) };
        let y = em.binary(BinaryOp::Maximum, a, b).unwrap();
        let m = c.finish(y);
        let x = Array::f32(&[3, 2], vec![0.0, 2.0, -3.0, 0.0, 5.0, -0.0]);
        let grad = super::super::grad_module(&m, &[0]).unwrap();
        let out = crate::interpreter::evaluate(&grad, &[Literal::Array(x)]).unwrap();
        let gx = out.as_tuple().unwrap()[1].as_array().unwrap().clone();
        for i in 0..6 {
            let w = 0.5 + ((i * 7919 + 13) % 101) as f64 / 101.0;
            let expect = if i == 1 || i == 4 { w } else { 0.0 };
            assert!(
                (gx.data.get_f64(i) - expect).abs() < 1e-6,
                "zero first {zero_first}, x[{i}]"
            );
        }
    }
}

#[test]
fn select_gives_no_gradient_to_the_predicate() {
    let mut c = Case::new();
    let a = c.param(&[4]);
    let b = c.param(&[4]);
    let mut em = c.em();
    let p = em.compare(ComparisonDirection::Gt, a, b).unwrap();
    let s = em.select(p, a, b).unwrap();
    let e = em.unary(UnaryOp::Exp, s).unwrap();
    let y = em.mul(e, a).unwrap();
    check(&c.finish(y), 5, -1.0, 1.0);
}

#[test]
fn clamp_with_array_and_scalar_bounds() {
    let mut c = Case::new();
    let lo = c.param(&[6]);
    let x = c.param(&[6]);
    let hi = c.param(&[6]);
    let y = c.op(Op::Clamp, &[6], &[lo, x, hi]);
    let m = c.finish(y);
    let lo_v = Array::f32(&[6], vec![-1.0, -1.0, -1.0, 0.5, 0.2, -3.0]);
    let x_v = Array::f32(&[6], vec![-2.0, 0.3, 4.0, 0.1, 0.7, 1.0]);
    let hi_v = Array::f32(&[6], vec![1.0, 1.0, 1.0, 2.0, 0.1, 3.0]);
    check_with(
        &m,
        &[0, 1, 2],
        &[
            Literal::Array(lo_v),
            Literal::Array(x_v),
            Literal::Array(hi_v),
        ],
    );

    let mut c = Case::new();
    let lo = c.param(&[]);
    let x = c.param(&[5]);
    let hi = c.param(&[]);
    let y = c.op(Op::Clamp, &[5], &[lo, x, hi]);
    let m = c.finish(y);
    let x_v = Array::f32(&[5], vec![-2.0, -0.3, 0.2, 0.9, 3.0]);
    check_with(
        &m,
        &[0, 1, 2],
        &[
            Literal::Array(Array::scalar_f32(-0.5)),
            Literal::Array(x_v),
            Literal::Array(Array::scalar_f32(0.5)),
        ],
    );
}

#[test]
fn convert_between_floats_passes_the_gradient_and_from_int_stops_it() {
    let mut c = Case::new();
    let x = c.param(&[3]);
    let k = c.param_of(ElementType::S32, &[3]);
    let mut em = c.em();
    let h = em.convert(x, ElementType::F64).unwrap();
    let h2 = em.mul(h, h).unwrap();
    let back = em.convert(h2, ElementType::F32).unwrap();
    let kf = em.convert(k, ElementType::F32).unwrap();
    let y = em.mul(back, kf).unwrap();
    let m = c.finish(y);
    let k_v = Literal::Array(Array::new(
        crate::ir::ArrayShape::new(ElementType::S32, &[3]),
        ArrayData::S32(vec![2, -1, 3]),
    ));
    let x_v = Literal::Array(Array::f32(&[3], vec![0.5, 1.5, -0.7]));
    let g = check_with(&m, &[0, 1], &[x_v, k_v]);
    // The integer parameter's gradient is zeros of its own type.
    assert_eq!(g[1].element_type(), ElementType::S32);
    assert!((0..3).all(|i| g[1].data.get_f64(i) == 0.0));
}

#[test]
fn a_value_used_many_times_accumulates() {
    let mut c = Case::new();
    let x = c.param(&[2, 2]);
    let mut em = c.em();
    let a = em.mul(x, x).unwrap();
    let b = em.unary(UnaryOp::Sine, x).unwrap();
    let d = em.add(a, b).unwrap();
    let y = em.mul(d, x).unwrap();
    check(&c.finish(y), 9, -1.0, 1.0);
}
