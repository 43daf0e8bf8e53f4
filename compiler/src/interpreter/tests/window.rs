//! `reduce-window` and `select-and-scatter`.

use super::*;
use crate::ir::{ComparisonDirection, Window, WindowDim};

fn window(dims: &[(i64, i64, i64, i64)]) -> Window {
    Window {
        dims: dims
            .iter()
            .map(|&(size, stride, lo, hi)| WindowDim {
                stride,
                pad_low: lo,
                pad_high: hi,
                ..WindowDim::new(size)
            })
            .collect(),
    }
}

fn reduce_window(x: Array, w: Window, op: BinaryOp, init: f32, out: &[i64]) -> Array {
    let mut b = ModuleBuilder::new();
    let comp = b.binary_computation(op, ElementType::F32);
    let p = b.param(0, Shape::Array(x.shape.clone()));
    let i = b.constant(Array::scalar_f32(init));
    let r = b.op(
        Op::ReduceWindow {
            window: w,
            to_apply: comp,
        },
        Shape::array(ElementType::F32, out),
        &[p, i],
    );
    run_array(&b.finish(r), &[x])
}

#[test]
fn max_pool_2x2_stride_2() {
    let x = f32s(
        &[4, 4],
        &[
            1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12., 13., 14., 16., 15.,
        ],
    );
    let r = reduce_window(
        x,
        window(&[(2, 2, 0, 0), (2, 2, 0, 0)]),
        BinaryOp::Maximum,
        f32::NEG_INFINITY,
        &[2, 2],
    );
    assert_eq!(as_f32(&r), &[6., 8., 14., 16.]);
}

#[test]
fn padding_and_dilations() {
    let x = f32s(&[4], &[1., 2., 3., 4.]);
    // Sum of 3 with padding 1 on both sides: [0+1+2, 1+2+3, 2+3+4, 3+4+0].
    let r = reduce_window(x.clone(), window(&[(3, 1, 1, 1)]), BinaryOp::Add, 0.0, &[4]);
    assert_eq!(as_f32(&r), &[3., 6., 9., 7.]);
    // Window dilation 2: pairs (x0,x2), (x1,x3).
    let mut w = window(&[(2, 1, 0, 0)]);
    w.dims[0].window_dilation = 2;
    assert_eq!(
        as_f32(&reduce_window(x.clone(), w, BinaryOp::Add, 0.0, &[2])),
        &[4., 6.]
    );
    // Base dilation 2: the base is 1 _ 2 _ 3 _ 4; windows of 2 see one element each.
    let mut w = window(&[(2, 1, 0, 0)]);
    w.dims[0].base_dilation = 2;
    assert_eq!(
        as_f32(&reduce_window(x, w, BinaryOp::Add, 0.0, &[6])),
        &[1., 2., 2., 3., 3., 4.]
    );
}

#[test]
fn padding_holds_the_init_value() {
    // A non-identity init shows up once per padded position, as HLO defines padding.
    let x = f32s(&[2], &[1., 2.]);
    let r = reduce_window(x, window(&[(2, 1, 1, 0)]), BinaryOp::Add, 10.0, &[2]);
    assert_eq!(as_f32(&r), &[21., 13.]);
}

fn select_and_scatter(x: Array, src: Array, w: Window, dir: ComparisonDirection) -> Array {
    let mut b = ModuleBuilder::new();
    let f = ElementType::F32;
    let select = b.computation("select", |b| {
        let p = b.param(0, Shape::scalar(f));
        let q = b.param(1, Shape::scalar(f));
        b.op(
            Op::Compare {
                direction: dir,
                comparison_type: None,
            },
            Shape::scalar(ElementType::Pred),
            &[p, q],
        )
    });
    let scatter = b.binary_computation(BinaryOp::Add, f);
    let px = b.param(0, Shape::Array(x.shape.clone()));
    let ps = b.param(1, Shape::Array(src.shape.clone()));
    let init = b.constant(Array::scalar_f32(0.0));
    let r = b.op(
        Op::SelectAndScatter {
            window: w,
            select,
            scatter,
        },
        Shape::Array(x.shape.clone()),
        &[px, ps, init],
    );
    run_array(&b.finish(r), &[x, src])
}

#[test]
fn select_and_scatter_routes_gradients_to_maxima() {
    let x = f32s(
        &[4, 4],
        &[
            1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12., 13., 14., 16., 15.,
        ],
    );
    let g = f32s(&[2, 2], &[0.1, 0.2, 0.3, 0.4]);
    let r = select_and_scatter(
        x,
        g,
        window(&[(2, 2, 0, 0), (2, 2, 0, 0)]),
        ComparisonDirection::Ge,
    );
    let mut want = [0f32; 16];
    want[5] = 0.1;
    want[7] = 0.2;
    want[13] = 0.3;
    want[14] = 0.4;
    assert_eq!(as_f32(&r), &want);
}

#[test]
fn overlapping_windows_accumulate_and_ties_pick_the_first() {
    // Windows of 2, stride 1 over [3, 3, 1]: the window [3, 3] keeps its first pick on the tie
    // (GE is true), the window [3, 1] picks index 1.
    let r = select_and_scatter(
        f32s(&[3], &[3., 3., 1.]),
        f32s(&[2], &[1., 10.]),
        window(&[(2, 1, 0, 0)]),
        ComparisonDirection::Ge,
    );
    assert_eq!(as_f32(&r), &[1., 10., 0.]);
    // With padding, padded positions are never picked.
    let r = select_and_scatter(
        f32s(&[2], &[-5., -7.]),
        f32s(&[2], &[1., 2.]),
        window(&[(2, 1, 1, 0)]),
        ComparisonDirection::Ge,
    );
    assert_eq!(as_f32(&r), &[3., 0.]);
}

#[test]
fn general_select_and_scatter_matches_the_recognised_form() {
    // select = not(a < b) is GE for numbers, but not a bare compare: it takes the general path.
    let f = ElementType::F32;
    let x = pseudo_random(&[2, 6, 5], 3);
    let src = pseudo_random(&[2, 3, 3], 4);
    let w = window(&[(1, 1, 0, 0), (2, 2, 0, 0), (3, 2, 1, 1)]);
    let fast = select_and_scatter(x.clone(), src.clone(), w.clone(), ComparisonDirection::Ge);
    let mut b = ModuleBuilder::new();
    let select = b.computation("not_lt", |b| {
        let p = b.param(0, Shape::scalar(f));
        let q = b.param(1, Shape::scalar(f));
        let lt = b.op(
            Op::Compare {
                direction: ComparisonDirection::Lt,
                comparison_type: None,
            },
            Shape::scalar(ElementType::Pred),
            &[p, q],
        );
        b.op(
            Op::Unary(crate::ir::UnaryOp::Not),
            Shape::scalar(ElementType::Pred),
            &[lt],
        )
    });
    let scatter = b.binary_computation(BinaryOp::Add, f);
    let px = b.param(0, Shape::Array(x.shape.clone()));
    let ps = b.param(1, Shape::Array(src.shape.clone()));
    let init = b.constant(Array::scalar_f32(0.0));
    let r = b.op(
        Op::SelectAndScatter {
            window: w,
            select,
            scatter,
        },
        Shape::Array(x.shape.clone()),
        &[px, ps, init],
    );
    let general = run_array(&b.finish(r), &[x, src]);
    assert_eq!(general, fast);
}

#[test]
fn multi_operand_reduce_window_takes_the_general_path() {
    // (sum, max) over windows of 2 with stride 1, as one reduce-window of two operands.
    let f = ElementType::F32;
    let mut b = ModuleBuilder::new();
    let comp = b.computation("sum_and_max", |b| {
        let s = b.param(0, Shape::scalar(f));
        let m = b.param(1, Shape::scalar(f));
        let x = b.param(2, Shape::scalar(f));
        let y = b.param(3, Shape::scalar(f));
        let s2 = b.op(Op::Binary(BinaryOp::Add), Shape::scalar(f), &[s, x]);
        let m2 = b.op(Op::Binary(BinaryOp::Maximum), Shape::scalar(f), &[m, y]);
        b.op(
            Op::Tuple,
            Shape::Tuple(vec![Shape::scalar(f), Shape::scalar(f)]),
            &[s2, m2],
        )
    });
    let a = b.param(0, Shape::array(f, &[4]));
    let c = b.param(1, Shape::array(f, &[4]));
    let zero = b.constant(Array::scalar_f32(0.0));
    let low = b.constant(Array::scalar_f32(f32::NEG_INFINITY));
    let out = Shape::Tuple(vec![Shape::array(f, &[3]), Shape::array(f, &[3])]);
    let r = b.op(
        Op::ReduceWindow {
            window: window(&[(2, 1, 0, 0)]),
            to_apply: comp,
        },
        out,
        &[a, c, zero, low],
    );
    let res = run(
        &b.finish(r),
        &[
            f32s(&[4], &[1., 2., 3., 4.]),
            f32s(&[4], &[5., -1., 7., 0.]),
        ],
    );
    let l = res.leaves();
    assert_eq!(as_f32(l[0]), &[3., 5., 7.]);
    assert_eq!(as_f32(l[1]), &[5., 7., 7.]);
}
