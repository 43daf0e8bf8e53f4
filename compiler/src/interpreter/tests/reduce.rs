//! `reduce`: single operand with a recognised reducer, and multi-operand with a general one.

use super::*;
use crate::ir::ComparisonDirection;

fn reduce_f32(x: Array, dims: Vec<i64>, op: BinaryOp, init: f32, out: &[i64]) -> Array {
    let mut b = ModuleBuilder::new();
    let comp = b.binary_computation(op, ElementType::F32);
    let p = b.param(0, Shape::Array(x.shape.clone()));
    let i = b.constant(Array::scalar_f32(init));
    let r = b.op(
        Op::Reduce {
            dimensions: dims,
            to_apply: comp,
        },
        Shape::array(ElementType::F32, out),
        &[p, i],
    );
    run_array(&b.finish(r), &[x])
}

#[test]
fn sums_over_any_dimensions() {
    let x = Array::f32(&[2, 3], vec![1., 2., 3., 4., 5., 6.]);
    assert_eq!(
        as_f32(&reduce_f32(x.clone(), vec![1], BinaryOp::Add, 0.0, &[2])),
        &[6., 15.]
    );
    assert_eq!(
        as_f32(&reduce_f32(x.clone(), vec![0], BinaryOp::Add, 0.0, &[3])),
        &[5., 7., 9.]
    );
    assert_eq!(
        as_f32(&reduce_f32(x, vec![0, 1], BinaryOp::Add, 10.0, &[])),
        &[31.]
    );
}

#[test]
fn max_reduction_propagates_nan() {
    let x = f32s(&[2, 2], &[1., f32::NAN, 3., 2.]);
    let r = reduce_f32(x, vec![1], BinaryOp::Maximum, f32::NEG_INFINITY, &[2]);
    assert!(as_f32(&r)[0].is_nan());
    assert_eq!(as_f32(&r)[1], 3.);
}

/// argmax over the last dimension: reduce of (values, indices) with a tuple-valued reducer.
#[test]
fn multi_operand_reduce_computes_argmax() {
    let mut b = ModuleBuilder::new();
    let f = ElementType::F32;
    let s = ElementType::S32;
    let comp = b.computation("argmax", |b| {
        let av = b.param(0, Shape::scalar(f));
        let ai = b.param(1, Shape::scalar(s));
        let bv = b.param(2, Shape::scalar(f));
        let bi = b.param(3, Shape::scalar(s));
        let ge = b.op(
            Op::Compare {
                direction: ComparisonDirection::Ge,
                comparison_type: None,
            },
            Shape::scalar(ElementType::Pred),
            &[av, bv],
        );
        let v = b.op(Op::Select, Shape::scalar(f), &[ge, av, bv]);
        let i = b.op(Op::Select, Shape::scalar(s), &[ge, ai, bi]);
        b.op(
            Op::Tuple,
            Shape::Tuple(vec![Shape::scalar(f), Shape::scalar(s)]),
            &[v, i],
        )
    });
    let x = b.param(0, Shape::array(f, &[2, 3]));
    let idx = b.op(Op::Iota { dimension: 1 }, Shape::array(s, &[2, 3]), &[]);
    let init_v = b.constant(Array::scalar_f32(f32::NEG_INFINITY));
    let init_i = b.constant(Array::scalar_s32(-1));
    let out = Shape::Tuple(vec![Shape::array(f, &[2]), Shape::array(s, &[2])]);
    let r = b.op(
        Op::Reduce {
            dimensions: vec![1],
            to_apply: comp,
        },
        out,
        &[x, idx, init_v, init_i],
    );
    let m = b.finish(r);
    let res = run(&m, &[f32s(&[2, 3], &[1., 5., 2., 7., 7., 0.])]);
    let leaves = res.leaves();
    assert_eq!(leaves[0].data, ArrayData::F32(vec![5., 7.]));
    // Ties keep the first (lower) index.
    assert_eq!(leaves[1].data, ArrayData::S32(vec![1, 0]));
}

#[test]
fn general_reducer_matches_recognised_one() {
    // (a, b) -> a + b*1: not a bare binary op, so it takes the per-element path.
    let mut b = ModuleBuilder::new();
    let comp = b.computation("add_scaled", |b| {
        let x = b.param(0, Shape::scalar(ElementType::F32));
        let y = b.param(1, Shape::scalar(ElementType::F32));
        let one = b.constant(Array::scalar_f32(1.0));
        let y1 = b.op(
            Op::Binary(BinaryOp::Multiply),
            Shape::scalar(ElementType::F32),
            &[y, one],
        );
        b.op(
            Op::Binary(BinaryOp::Add),
            Shape::scalar(ElementType::F32),
            &[x, y1],
        )
    });
    let x = pseudo_random(&[3, 4, 5], 7);
    let p = b.param(0, Shape::Array(x.shape.clone()));
    let i = b.constant(Array::scalar_f32(0.0));
    let r = b.op(
        Op::Reduce {
            dimensions: vec![0, 2],
            to_apply: comp,
        },
        Shape::array(ElementType::F32, &[4]),
        &[p, i],
    );
    let general = run_array(&b.finish(r), std::slice::from_ref(&x));
    let fast = reduce_f32(x, vec![0, 2], BinaryOp::Add, 0.0, &[4]);
    assert_eq!(general, fast);
}
