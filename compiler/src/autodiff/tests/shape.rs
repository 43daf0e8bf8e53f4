//! Finite-difference checks of broadcast, reduce and the data-movement rules.

use super::{check, check_with, random_inputs, Case};
use crate::ir::{
    Array, ArrayData, ArrayShape, BinaryOp, ElementType, Literal, Op, PadDim, SliceDim, UnaryOp,
};

/// Makes the gradient depend on the values: `out * out`.
fn square(c: &mut Case, x: crate::ir::InstrId) -> crate::ir::InstrId {
    c.em().mul(x, x).unwrap()
}

#[test]
fn broadcast_adding_dimensions() {
    let mut c = Case::new();
    let x = c.param(&[3, 4]);
    let y = c.em().broadcast(x, &[2, 3, 4], &[1, 2]).unwrap();
    let y = square(&mut c, y);
    check(&c.finish(y), 1, -1.0, 1.0);

    let mut c = Case::new();
    let x = c.param(&[]);
    let y = c.em().broadcast(x, &[2, 3], &[]).unwrap();
    let y = square(&mut c, y);
    check(&c.finish(y), 2, -1.0, 1.0);
}

#[test]
fn reshape_transpose_reverse() {
    let mut c = Case::new();
    let x = c.param(&[2, 3, 4]);
    let mut em = c.em();
    let t = em.transpose(x, &[2, 0, 1]).unwrap();
    let r = em.reshape(t, &[8, 3]).unwrap();
    let v = em.reverse(r, &[0, 1]).unwrap();
    let y = square(&mut c, v);
    check(&c.finish(y), 4, -1.0, 1.0);
}

#[test]
fn strided_slice() {
    let mut c = Case::new();
    let x = c.param(&[5, 7]);
    let s = c
        .em()
        .slice(
            x,
            &[
                SliceDim {
                    start: 1,
                    limit: 5,
                    stride: 2,
                },
                SliceDim {
                    start: 0,
                    limit: 7,
                    stride: 3,
                },
            ],
        )
        .unwrap();
    let y = square(&mut c, s);
    check(&c.finish(y), 5, -1.0, 1.0);
}

#[test]
fn pad_with_negative_and_interior_padding_and_a_differentiated_value() {
    let mut c = Case::new();
    let x = c.param(&[3, 4]);
    let v = c.param(&[]);
    let dims = [
        PadDim {
            low: 2,
            high: -1,
            interior: 1,
        },
        PadDim {
            low: -2,
            high: 3,
            interior: 2,
        },
    ];
    // out dims: 2 - 1 + 3 + 2*1 = 6; -2 + 3 + 4 + 3*2 = 11
    let p = c.op(
        Op::Pad {
            dims: dims.to_vec(),
        },
        &[6, 11],
        &[x, v],
    );
    let y = square(&mut c, p);
    check(&c.finish(y), 6, -1.0, 1.0);
}

#[test]
fn zero_padding_of_nhwc_images_as_keras_builds_it() {
    // Keras's ZeroPadding2D(((1, 2), (0, 3))): a constant zero, asymmetric padding of the
    // spatial dimensions only, no interior padding.
    let mut c = Case::new();
    let x = c.param(&[2, 3, 2, 2]);
    let zero = c.em().scalar(ElementType::F32, 0.0);
    let pad = |low, high| PadDim {
        low,
        high,
        interior: 0,
    };
    let p = c.op(
        Op::Pad {
            dims: vec![pad(0, 0), pad(1, 2), pad(0, 3), pad(0, 0)],
        },
        &[2, 6, 5, 2],
        &[x, zero],
    );
    let y = square(&mut c, p);
    check(&c.finish(y), 7, -1.0, 1.0);
}

#[test]
fn concatenate_parts() {
    let mut c = Case::new();
    let a = c.param(&[2, 3]);
    let b = c.param(&[2, 1]);
    let d = c.param(&[2, 2]);
    let cat = c.op(Op::Concatenate { dimension: 1 }, &[2, 6], &[a, b, d]);
    let y = square(&mut c, cat);
    check(&c.finish(y), 7, -1.0, 1.0);
}

fn s32(v: i32) -> Literal {
    Literal::Array(Array::new(
        ArrayShape::scalar(ElementType::S32),
        ArrayData::S32(vec![v]),
    ))
}

#[test]
fn dynamic_slice_and_update_with_clamped_starts() {
    for (i, j) in [(1, 2), (5, -3)] {
        let mut c = Case::new();
        let x = c.param(&[4, 5]);
        let u = c.param(&[2, 3]);
        let si = c.param_of(ElementType::S32, &[]);
        let sj = c.param_of(ElementType::S32, &[]);
        let mut em = c.em();
        let ds = em.dynamic_slice(x, &[si, sj], &[2, 3]).unwrap();
        let prod = em.mul(ds, u).unwrap();
        let dus = em.dynamic_update_slice(x, prod, &[sj, si]).unwrap();
        let y = square(&mut c, dus);
        let m = c.finish(y);
        let mut inputs = random_inputs(&m, 8, -1.0, 1.0);
        inputs[2] = s32(i);
        inputs[3] = s32(j);
        check_with(&m, &[0, 1], &inputs);
    }
}

#[test]
fn reduce_sum_over_some_dimensions_with_a_differentiated_init() {
    let mut c = Case::new();
    let x = c.param(&[2, 3, 4]);
    let init = c.param(&[]);
    let add = c.binary_computation(BinaryOp::Add);
    let r = c.op(
        Op::Reduce {
            dimensions: vec![0, 2],
            to_apply: add,
        },
        &[3],
        &[x, init],
    );
    let y = square(&mut c, r);
    check(&c.finish(y), 9, -1.0, 1.0);
}

#[test]
fn reduce_max_and_min() {
    for op in [BinaryOp::Maximum, BinaryOp::Minimum] {
        let mut c = Case::new();
        let x = c.param(&[3, 5]);
        let init = c.em().scalar(
            ElementType::F32,
            if op == BinaryOp::Maximum {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            },
        );
        let region = c.binary_computation(op);
        let r = c.op(
            Op::Reduce {
                dimensions: vec![1],
                to_apply: region,
            },
            &[3],
            &[x, init],
        );
        let y = c.em().unary(UnaryOp::Exp, r).unwrap();
        check(&c.finish(y), 10, -1.0, 1.0);
    }
}

#[test]
fn reduce_max_shares_the_gradient_between_equal_maxima() {
    let mut c = Case::new();
    let x = c.param(&[4]);
    let init = c.em().scalar(ElementType::F32, f64::NEG_INFINITY);
    let region = c.binary_computation(BinaryOp::Maximum);
    let r = c.op(
        Op::Reduce {
            dimensions: vec![0],
            to_apply: region,
        },
        &[],
        &[x, init],
    );
    c.module.entry_mut().set_root(r);
    let m = c.module;
    let x_v = Literal::Array(Array::f32(&[4], vec![1.0, 3.0, 3.0, -2.0]));
    let grad = super::super::grad_module(&m, &[0]).unwrap();
    let out = crate::interpreter::evaluate(&grad, &[x_v]).unwrap();
    let g = out.as_tuple().unwrap()[1].as_array().unwrap().clone();
    assert_eq!(g.data, ArrayData::F32(vec![0.0, 0.5, 0.5, 0.0]));
}
