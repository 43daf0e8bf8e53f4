//! `dot` against a direct formula.

use super::*;
use crate::ir::DotDimensionNumbers;

fn dot(a: Array, b: Array, dims: DotDimensionNumbers, out: &[i64]) -> Array {
    apply(Op::Dot(dims), Shape::array(ElementType::F32, out), &[a, b]).unwrap()
}

#[test]
fn matrix_product() {
    let a = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let b = f32s(&[3, 2], &[7., 8., 9., 10., 11., 12.]);
    let dims = DotDimensionNumbers {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        ..Default::default()
    };
    assert_eq!(as_f32(&dot(a, b, dims, &[2, 2])), &[58., 64., 139., 154.]);
}

#[test]
fn batch_and_transposed_contractions_match_direct_sums() {
    // lhs [k=3, b=2, m=4], rhs [n=5, b=2, k=3] -> out [b, m, n].
    let a = pseudo_random(&[3, 2, 4], 1);
    let b = pseudo_random(&[5, 2, 3], 2);
    let dims = DotDimensionNumbers {
        lhs_batch: vec![1],
        rhs_batch: vec![1],
        lhs_contracting: vec![0],
        rhs_contracting: vec![2],
    };
    let r = dot(a.clone(), b.clone(), dims, &[2, 4, 5]);
    let (av, bv) = (as_f32(&a), as_f32(&b));
    let mut want = Vec::new();
    for bi in 0..2 {
        for m in 0..4 {
            for n in 0..5 {
                let mut s = 0f32;
                for k in 0..3 {
                    s += av[k * 8 + bi * 4 + m] * bv[n * 6 + bi * 3 + k];
                }
                want.push(s);
            }
        }
    }
    assert_close(as_f32(&r), &want);
}

#[test]
fn integer_dot_wraps() {
    let a = s32s(&[1, 2], &[i32::MAX, 2]);
    let b = s32s(&[2, 1], &[2, 3]);
    let dims = DotDimensionNumbers {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        ..Default::default()
    };
    let r = apply(
        Op::Dot(dims),
        Shape::array(ElementType::S32, &[1, 1]),
        &[a, b],
    )
    .unwrap();
    assert_eq!(
        r.data,
        ArrayData::S32(vec![i32::MAX.wrapping_mul(2).wrapping_add(6)])
    );
}

#[test]
fn wrong_result_shape_is_an_error() {
    let dims = DotDimensionNumbers {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        ..Default::default()
    };
    let e = apply(
        Op::Dot(dims),
        Shape::array(ElementType::F32, &[3, 3]),
        &[pseudo_random(&[2, 3], 1), pseudo_random(&[3, 2], 2)],
    )
    .unwrap_err();
    assert!(e.message.contains("dot"), "{e}");
}
