//! `convert` and `bitcast-convert` with HLO's rules.

use super::*;
use half::{bf16, f16};

fn convert(a: Array, to: ElementType) -> ArrayData {
    let out = Shape::Array(a.shape.with_element_type(to));
    apply(Op::Convert, out, &[a]).unwrap().data
}

#[test]
fn float_to_int_saturates_and_maps_nan_to_zero() {
    let x = f32s(
        &[7],
        &[
            f32::NAN,
            3e9,
            -3e9,
            -1.7,
            1.7,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ],
    );
    assert_eq!(
        convert(x.clone(), ElementType::S32),
        ArrayData::S32(vec![0, i32::MAX, i32::MIN, -1, 1, i32::MAX, i32::MIN])
    );
    assert_eq!(
        convert(x.clone(), ElementType::U32),
        ArrayData::U32(vec![0, 3_000_000_000, 0, 0, 1, u32::MAX, 0])
    );
    assert_eq!(
        convert(x, ElementType::S8),
        ArrayData::S8(vec![0, 127, -128, -1, 1, 127, -128])
    );
}

#[test]
fn int_to_int_wraps_and_int_to_float_rounds_to_even() {
    assert_eq!(
        convert(s32s(&[3], &[300, -1, 128]), ElementType::U8),
        ArrayData::U8(vec![44, 255, 128])
    );
    assert_eq!(
        convert(u32s(&[1], &[u32::MAX]), ElementType::S32),
        ArrayData::S32(vec![-1])
    );
    assert_eq!(
        convert(
            s32s(&[3], &[16_777_217, 16_777_219, -16_777_217]),
            ElementType::F32
        ),
        ArrayData::F32(vec![16_777_216.0, 16_777_220.0, -16_777_216.0])
    );
    assert_eq!(
        convert(u32s(&[1], &[u32::MAX]), ElementType::F32),
        ArrayData::F32(vec![4_294_967_296.0])
    );
}

#[test]
fn conversions_to_and_from_pred() {
    assert_eq!(
        convert(f32s(&[4], &[0.0, -0.0, f32::NAN, 0.5]), ElementType::Pred),
        ArrayData::Pred(vec![false, false, true, true])
    );
    let p = Array::new(
        ArrayShape::new(ElementType::Pred, &[2]),
        ArrayData::Pred(vec![true, false]),
    );
    assert_eq!(convert(p, ElementType::F32), ArrayData::F32(vec![1.0, 0.0]));
}

#[test]
fn half_conversions_round_to_nearest_even() {
    assert_eq!(
        convert(f32s(&[2], &[1.0 + 1.0 / 256.0, 65520.0]), ElementType::BF16),
        ArrayData::BF16(vec![bf16::from_f32(1.0), bf16::from_f32(65536.0)])
    );
    assert_eq!(
        convert(f32s(&[1], &[65520.0]), ElementType::F16),
        ArrayData::F16(vec![f16::INFINITY])
    );
}

#[test]
fn bitcast_convert_keeps_bits() {
    let x = f32s(&[2], &[1.0, -0.0]);
    let u = apply(
        Op::BitcastConvert,
        Shape::array(ElementType::U32, &[2]),
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_eq!(u.data, ArrayData::U32(vec![0x3F80_0000, 0x8000_0000]));
    let back = apply(
        Op::BitcastConvert,
        Shape::array(ElementType::F32, &[2]),
        &[u],
    )
    .unwrap();
    assert_eq!(back.data.to_le_bytes(), x.data.to_le_bytes());
    // Narrower elements add a last dimension.
    let bytes = apply(
        Op::BitcastConvert,
        Shape::array(ElementType::U8, &[2, 4]),
        &[x],
    )
    .unwrap();
    assert_eq!(
        bytes.data,
        ArrayData::U8(vec![0, 0, 0x80, 0x3F, 0, 0, 0, 0x80])
    );
}
