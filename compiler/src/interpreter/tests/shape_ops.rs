//! Data movement ops.

use super::*;
use crate::ir::{PadDim, SliceDim};

fn iota_f32(dims: &[i64]) -> Array {
    let n: i64 = dims.iter().product();
    Array::f32(dims, (0..n).map(|x| x as f32).collect())
}

#[test]
fn iota_counts_along_its_dimension() {
    let r = apply(
        Op::Iota { dimension: 1 },
        Shape::array(ElementType::S32, &[2, 3]),
        &[],
    )
    .unwrap();
    assert_eq!(r.data, ArrayData::S32(vec![0, 1, 2, 0, 1, 2]));
    let r = apply(
        Op::Iota { dimension: 0 },
        Shape::array(ElementType::F32, &[2, 2]),
        &[],
    )
    .unwrap();
    assert_eq!(r.data, ArrayData::F32(vec![0., 0., 1., 1.]));
}

#[test]
fn broadcast_maps_operand_dimensions() {
    let r = apply(
        Op::Broadcast {
            dimensions: vec![1],
        },
        Shape::array(ElementType::F32, &[2, 3]),
        &[f32s(&[3], &[1., 2., 3.])],
    )
    .unwrap();
    assert_eq!(as_f32(&r), &[1., 2., 3., 1., 2., 3.]);
    let r = apply(
        Op::Broadcast {
            dimensions: vec![0],
        },
        Shape::array(ElementType::F32, &[2, 3]),
        &[f32s(&[2], &[1., 2.])],
    )
    .unwrap();
    assert_eq!(as_f32(&r), &[1., 1., 1., 2., 2., 2.]);
}

#[test]
fn transpose_slice_reverse() {
    let x = iota_f32(&[2, 3]);
    let t = apply(
        Op::Transpose {
            permutation: vec![1, 0],
        },
        Shape::array(ElementType::F32, &[3, 2]),
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_eq!(as_f32(&t), &[0., 3., 1., 4., 2., 5.]);
    let s = apply(
        Op::Slice {
            dims: vec![
                SliceDim {
                    start: 1,
                    limit: 2,
                    stride: 1,
                },
                SliceDim {
                    start: 0,
                    limit: 3,
                    stride: 2,
                },
            ],
        },
        Shape::array(ElementType::F32, &[1, 2]),
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_eq!(as_f32(&s), &[3., 5.]);
    let r = apply(
        Op::Reverse {
            dimensions: vec![0, 1],
        },
        Shape::array(ElementType::F32, &[2, 3]),
        &[x],
    )
    .unwrap();
    assert_eq!(as_f32(&r), &[5., 4., 3., 2., 1., 0.]);
}

#[test]
fn pad_with_negative_edges_and_interior() {
    let x = f32s(&[3], &[1., 2., 3.]);
    let r = apply(
        Op::Pad {
            dims: vec![PadDim {
                low: -1,
                high: 2,
                interior: 1,
            }],
        },
        Shape::array(ElementType::F32, &[6]),
        &[x, f32s(&[], &[9.])],
    )
    .unwrap();
    // Interior-padded: 1 9 2 9 3, then high 9 9, and low -1 drops the first element.
    assert_eq!(as_f32(&r), &[9., 2., 9., 3., 9., 9.]);
    let m = apply(
        Op::Pad {
            dims: vec![
                PadDim {
                    low: 1,
                    high: 0,
                    interior: 0,
                },
                PadDim {
                    low: 0,
                    high: -1,
                    interior: 0,
                },
            ],
        },
        Shape::array(ElementType::F32, &[3, 2]),
        &[iota_f32(&[2, 3]), f32s(&[], &[-1.])],
    )
    .unwrap();
    assert_eq!(as_f32(&m), &[-1., -1., 0., 1., 3., 4.]);
}

#[test]
fn concatenate_along_a_middle_dimension() {
    let r = apply(
        Op::Concatenate { dimension: 1 },
        Shape::array(ElementType::F32, &[2, 3]),
        &[iota_f32(&[2, 1]), f32s(&[2, 2], &[10., 11., 12., 13.])],
    )
    .unwrap();
    assert_eq!(as_f32(&r), &[0., 10., 11., 1., 12., 13.]);
}

#[test]
fn dynamic_slices_clamp_their_starts() {
    let x = iota_f32(&[4, 3]);
    let r = apply(
        Op::DynamicSlice { sizes: vec![2, 2] },
        Shape::array(ElementType::F32, &[2, 2]),
        &[x.clone(), s32s(&[], &[3]), s32s(&[], &[-5])],
    )
    .unwrap();
    assert_eq!(as_f32(&r), &[6., 7., 9., 10.]);
    let u = apply(
        Op::DynamicUpdateSlice,
        Shape::array(ElementType::F32, &[4, 3]),
        &[
            x,
            f32s(&[1, 2], &[-1., -2.]),
            s32s(&[], &[1]),
            s32s(&[], &[7]),
        ],
    )
    .unwrap();
    assert_eq!(
        as_f32(&u),
        &[0., 1., 2., 3., -1., -2., 6., 7., 8., 9., 10., 11.]
    );
}

#[test]
fn reshape_keeps_order_and_checks_sizes() {
    let r = apply(
        Op::Reshape,
        Shape::array(ElementType::F32, &[3, 2]),
        &[iota_f32(&[2, 3])],
    )
    .unwrap();
    assert_eq!(as_f32(&r), &[0., 1., 2., 3., 4., 5.]);
    assert!(apply(
        Op::Reshape,
        Shape::array(ElementType::F32, &[4]),
        &[iota_f32(&[2, 3])]
    )
    .is_err());
}
