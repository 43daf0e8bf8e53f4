//! Unary, binary, compare, select and clamp, including NaN, infinities, -0 and integer edges.

use super::*;
use crate::ir::{ComparisonDirection, ComparisonType, UnaryOp};

fn bin(op: BinaryOp, a: Array, b: Array) -> Array {
    let out = Shape::Array(a.shape.clone());
    apply(Op::Binary(op), out, &[a, b]).unwrap()
}

fn un(op: UnaryOp, a: Array) -> Array {
    let out = Shape::Array(a.shape.clone());
    apply(Op::Unary(op), out, &[a]).unwrap()
}

#[test]
fn maximum_and_minimum_propagate_nan() {
    let a = f32s(&[4], &[1.0, f32::NAN, 3.0, f32::NEG_INFINITY]);
    let b = f32s(&[4], &[2.0, 0.0, f32::NAN, -1.0]);
    let max = bin(BinaryOp::Maximum, a.clone(), b.clone());
    let v = as_f32(&max);
    assert_eq!(v[0], 2.0);
    assert!(v[1].is_nan() && v[2].is_nan());
    assert_eq!(v[3], -1.0);
    let min = bin(BinaryOp::Minimum, a, b);
    let v = as_f32(&min);
    assert_eq!(v[0], 1.0);
    assert!(v[1].is_nan() && v[2].is_nan());
    assert_eq!(v[3], f32::NEG_INFINITY);
}

#[test]
fn float_remainder_is_fmod_and_division_by_zero_is_infinite() {
    let r = bin(
        BinaryOp::Remainder,
        f32s(&[3], &[-5.5, 5.5, 1.0]),
        f32s(&[3], &[2.0, -2.0, 0.0]),
    );
    let v = as_f32(&r);
    assert_eq!(&v[..2], &[-1.5, 1.5]);
    assert!(v[2].is_nan());
    let d = bin(
        BinaryOp::Divide,
        f32s(&[3], &[1.0, -1.0, 0.0]),
        f32s(&[3], &[0.0, 0.0, 0.0]),
    );
    let v = as_f32(&d);
    assert_eq!(v[0], f32::INFINITY);
    assert_eq!(v[1], f32::NEG_INFINITY);
    assert!(v[2].is_nan());
}

#[test]
fn u32_arithmetic_wraps() {
    let a = u32s(&[3], &[u32::MAX, 0x8000_0000, 7]);
    let b = u32s(&[3], &[1, 2, 0x2000_0000]);
    assert_eq!(
        bin(BinaryOp::Add, a.clone(), b.clone()).data,
        ArrayData::U32(vec![0, 0x8000_0002, 0x2000_0007])
    );
    assert_eq!(
        bin(BinaryOp::Multiply, a.clone(), b.clone()).data,
        ArrayData::U32(vec![u32::MAX, 0, 0xE000_0000])
    );
    assert_eq!(
        bin(BinaryOp::Subtract, b, a).data,
        ArrayData::U32(vec![2, 0x8000_0002, 0x1FFF_FFF9])
    );
}

#[test]
fn shifts_by_the_bit_width_or_more() {
    let x = u32s(&[5], &[0xF000_000F; 5]);
    let s = u32s(&[5], &[0, 4, 31, 32, 1000]);
    assert_eq!(
        bin(BinaryOp::ShiftLeft, x.clone(), s.clone()).data,
        ArrayData::U32(vec![0xF000_000F, 0x0000_00F0, 0x8000_0000, 0, 0])
    );
    assert_eq!(
        bin(BinaryOp::ShiftRightLogical, x.clone(), s.clone()).data,
        ArrayData::U32(vec![0xF000_000F, 0x0F00_0000, 1, 0, 0])
    );
    // Arithmetic shift of a u32 fills with its top bit.
    assert_eq!(
        bin(BinaryOp::ShiftRightArithmetic, x, s).data,
        ArrayData::U32(vec![0xF000_000F, 0xFF00_0000, u32::MAX, u32::MAX, u32::MAX])
    );
    // s32: a negative amount is a huge unsigned one.
    let y = s32s(&[4], &[-8, -8, 8, -8]);
    let t = s32s(&[4], &[1, 32, 40, -1]);
    assert_eq!(
        bin(BinaryOp::ShiftRightArithmetic, y.clone(), t.clone()).data,
        ArrayData::S32(vec![-4, -1, 0, -1])
    );
    assert_eq!(
        bin(BinaryOp::ShiftRightLogical, y.clone(), t.clone()).data,
        ArrayData::S32(vec![0x7FFF_FFFC, 0, 0, 0])
    );
    assert_eq!(
        bin(BinaryOp::ShiftLeft, y, t).data,
        ArrayData::S32(vec![-16, 0, 0, 0])
    );
}

#[test]
fn integer_division_edge_cases() {
    let a = s32s(&[4], &[7, -7, i32::MIN, 5]);
    let b = s32s(&[4], &[0, 2, -1, -3]);
    assert_eq!(
        bin(BinaryOp::Divide, a.clone(), b.clone()).data,
        ArrayData::S32(vec![-1, -3, i32::MIN, -1])
    );
    assert_eq!(
        bin(BinaryOp::Remainder, a, b).data,
        ArrayData::S32(vec![7, -1, 0, 2])
    );
    let u = bin(BinaryOp::Divide, u32s(&[2], &[9, 9]), u32s(&[2], &[0, 2]));
    assert_eq!(u.data, ArrayData::U32(vec![u32::MAX, 4]));
}

#[test]
fn integer_power() {
    let r = bin(
        BinaryOp::Power,
        s32s(&[6], &[2, -3, 0, 1, 2, -1]),
        s32s(&[6], &[10, 3, 0, -5, -1, -3]),
    );
    assert_eq!(r.data, ArrayData::S32(vec![1024, -27, 1, 1, 0, -1]));
    let w = bin(BinaryOp::Power, u32s(&[1], &[3]), u32s(&[1], &[21]));
    assert_eq!(w.data, ArrayData::U32(vec![3u32.wrapping_pow(21)]));
}

#[test]
fn round_nearest_even_and_sign_keep_ties_and_zero_signs() {
    let r = un(
        UnaryOp::RoundNearestEven,
        f32s(&[7], &[0.5, 1.5, 2.5, -2.5, -0.5, 2.6, -0.0]),
    );
    let v = as_f32(&r);
    assert_eq!(&v[..6], &[0.0, 2.0, 2.0, -2.0, -0.0, 3.0]);
    assert!(v[4].is_sign_negative() && v[6].is_sign_negative());
    let afz = un(UnaryOp::RoundNearestAfz, f32s(&[2], &[2.5, -2.5]));
    assert_eq!(as_f32(&afz), &[3.0, -3.0]);
    let s = un(UnaryOp::Sign, f32s(&[4], &[-0.0, 3.0, -2.0, f32::NAN]));
    let v = as_f32(&s);
    assert!(v[0] == 0.0 && v[0].is_sign_negative());
    assert_eq!(&v[1..3], &[1.0, -1.0]);
    assert!(v[3].is_nan());
}

#[test]
fn unary_float_functions() {
    let x = f32s(&[3], &[0.0, 1.0, -2.0]);
    assert_close(
        as_f32(&un(UnaryOp::Logistic, x.clone())),
        &[0.5, 0.7310586, 0.11920292],
    );
    assert_close(
        as_f32(&un(UnaryOp::Tanh, x.clone())),
        &[0.0, 0.7615942, -0.9640276],
    );
    assert_close(
        as_f32(&un(UnaryOp::Expm1, x.clone())),
        &[0.0, 1.7182817, -0.86466473],
    );
    let r = un(UnaryOp::Rsqrt, f32s(&[2], &[4.0, 0.0]));
    assert_eq!(as_f32(&r), &[0.5, f32::INFINITY]);
    let l = un(UnaryOp::Log, f32s(&[2], &[0.0, -1.0]));
    assert_eq!(as_f32(&l)[0], f32::NEG_INFINITY);
    assert!(as_f32(&l)[1].is_nan());
}

#[test]
fn integer_unary_ops() {
    let x = s32s(&[4], &[i32::MIN, -5, 0, 12]);
    assert_eq!(
        un(UnaryOp::Abs, x.clone()).data,
        ArrayData::S32(vec![i32::MIN, 5, 0, 12])
    );
    assert_eq!(
        un(UnaryOp::Negate, x.clone()).data,
        ArrayData::S32(vec![i32::MIN, 5, 0, -12])
    );
    assert_eq!(
        un(UnaryOp::Sign, x.clone()).data,
        ArrayData::S32(vec![-1, -1, 0, 1])
    );
    assert_eq!(
        un(UnaryOp::PopCnt, x.clone()).data,
        ArrayData::S32(vec![1, 31, 0, 2])
    );
    assert_eq!(
        un(UnaryOp::Clz, x.clone()).data,
        ArrayData::S32(vec![0, 0, 32, 28])
    );
    assert_eq!(
        un(UnaryOp::Not, u32s(&[1], &[0x0F0F_0000])).data,
        ArrayData::U32(vec![0xF0F0_FFFF])
    );
    assert!(apply(
        Op::Unary(UnaryOp::Exp),
        Shape::array(ElementType::S32, &[4]),
        &[x]
    )
    .is_err());
}

#[test]
fn is_finite_gives_pred() {
    let r = apply(
        Op::Unary(UnaryOp::IsFinite),
        Shape::array(ElementType::Pred, &[4]),
        &[f32s(&[4], &[1.0, f32::INFINITY, f32::NAN, -0.0])],
    )
    .unwrap();
    assert_eq!(r.data, ArrayData::Pred(vec![true, false, false, true]));
}

#[test]
fn compare_with_nan_and_total_order() {
    let a = f32s(&[4], &[f32::NAN, 1.0, -0.0, f32::NAN]);
    let b = f32s(&[4], &[f32::NAN, f32::NAN, 0.0, 1.0]);
    let cmp = |direction, comparison_type| {
        apply(
            Op::Compare {
                direction,
                comparison_type,
            },
            Shape::array(ElementType::Pred, &[4]),
            &[a.clone(), b.clone()],
        )
        .unwrap()
        .data
    };
    assert_eq!(
        cmp(ComparisonDirection::Eq, None),
        ArrayData::Pred(vec![false, false, true, false])
    );
    assert_eq!(
        cmp(ComparisonDirection::Ne, None),
        ArrayData::Pred(vec![true, true, false, true])
    );
    assert_eq!(
        cmp(ComparisonDirection::Lt, None),
        ArrayData::Pred(vec![false, false, false, false])
    );
    // Total order: -0 < +0, NaN above everything.
    assert_eq!(
        cmp(ComparisonDirection::Lt, Some(ComparisonType::TotalOrder)),
        ArrayData::Pred(vec![false, true, true, false])
    );
    let u = apply(
        Op::Compare {
            direction: ComparisonDirection::Gt,
            comparison_type: None,
        },
        Shape::array(ElementType::Pred, &[1]),
        &[u32s(&[1], &[0x8000_0000]), u32s(&[1], &[1])],
    )
    .unwrap();
    assert_eq!(u.data, ArrayData::Pred(vec![true]), "u32 compares unsigned");
}

#[test]
fn select_and_clamp() {
    let p = Array::new(
        ArrayShape::new(ElementType::Pred, &[3]),
        ArrayData::Pred(vec![true, false, true]),
    );
    let r = apply(
        Op::Select,
        Shape::array(ElementType::F32, &[3]),
        &[p, f32s(&[3], &[1., 2., 3.]), f32s(&[3], &[4., 5., 6.])],
    )
    .unwrap();
    assert_eq!(as_f32(&r), &[1., 5., 3.]);
    let scalar_pred = Array::new(
        ArrayShape::scalar(ElementType::Pred),
        ArrayData::Pred(vec![false]),
    );
    let r = apply(
        Op::Select,
        Shape::array(ElementType::F32, &[2]),
        &[scalar_pred, f32s(&[2], &[1., 2.]), f32s(&[2], &[4., 5.])],
    )
    .unwrap();
    assert_eq!(as_f32(&r), &[4., 5.]);
    let c = apply(
        Op::Clamp,
        Shape::array(ElementType::F32, &[4]),
        &[
            f32s(&[], &[0.0]),
            f32s(&[4], &[-1.0, 0.5, 2.0, f32::NAN]),
            f32s(&[], &[1.0]),
        ],
    )
    .unwrap();
    let v = as_f32(&c);
    assert_eq!(&v[..3], &[0.0, 0.5, 1.0]);
    assert!(v[3].is_nan());
}

#[test]
fn half_types_compute_in_f32_and_round() {
    use half::bf16;
    let a = Array::new(
        ArrayShape::new(ElementType::BF16, &[2]),
        ArrayData::BF16(vec![bf16::from_f32(1.0), bf16::from_f32(256.0)]),
    );
    let b = Array::new(
        ArrayShape::new(ElementType::BF16, &[2]),
        ArrayData::BF16(vec![bf16::from_f32(0.00390625), bf16::from_f32(1.0)]),
    );
    let r = bin(BinaryOp::Add, a, b);
    // 1 + 2^-8 rounds to 1 in bf16 (8 significant bits); 256 + 1 rounds to 256 (ties to even).
    assert_eq!(
        r.data,
        ArrayData::BF16(vec![bf16::from_f32(1.0), bf16::from_f32(256.0)])
    );
}

#[test]
fn mismatched_operands_are_errors() {
    let e = apply(
        Op::Binary(BinaryOp::Add),
        Shape::array(ElementType::F32, &[2]),
        &[f32s(&[2], &[1., 2.]), f32s(&[3], &[1., 2., 3.])],
    )
    .unwrap_err();
    assert!(e.to_string().contains("add"), "{e}");
    let e = apply(
        Op::Binary(BinaryOp::And),
        Shape::array(ElementType::F32, &[1]),
        &[f32s(&[1], &[1.]), f32s(&[1], &[1.])],
    )
    .unwrap_err();
    assert!(e.message.contains("and is not defined on f32"), "{e}");
}
