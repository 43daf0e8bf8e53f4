//! Finite-difference checks of reduce-window max/min (select-and-scatter) and sum.

use super::{check, Case};
use crate::ir::{BinaryOp, ElementType, Op, Window, WindowDim};

fn pool(op: BinaryOp, x_dims: &[i64], dims: Vec<WindowDim>, init: f64, seed: u64) {
    let mut c = Case::new();
    let x = c.param(x_dims);
    let region = c.binary_computation(op);
    let init = c.em().scalar(ElementType::F32, init);
    let out: Vec<i64> = x_dims
        .iter()
        .zip(&dims)
        .map(|(&n, w)| crate::autodiff::emit::window_output_size(n, w))
        .collect();
    let r = c.op(
        Op::ReduceWindow {
            window: Window { dims },
            to_apply: region,
        },
        &out,
        &[x, init],
    );
    let y = c.em().mul(r, r).unwrap();
    check(&c.finish(y), seed, -1.0, 1.0);
}

fn w(size: i64, stride: i64, low: i64, high: i64) -> WindowDim {
    WindowDim {
        size,
        stride,
        pad_low: low,
        pad_high: high,
        ..WindowDim::new(size)
    }
}

#[test]
fn max_pool_2x2_stride_2_like_the_cnn() {
    pool(
        BinaryOp::Maximum,
        &[2, 4, 4, 2],
        vec![w(1, 1, 0, 0), w(2, 2, 0, 0), w(2, 2, 0, 0), w(1, 1, 0, 0)],
        f64::NEG_INFINITY,
        1,
    );
}

#[test]
fn max_and_min_pool_overlapping_padded_windows() {
    pool(
        BinaryOp::Maximum,
        &[5, 4],
        vec![w(3, 2, 1, 1), w(2, 1, 0, 1)],
        f64::NEG_INFINITY,
        2,
    );
    pool(
        BinaryOp::Minimum,
        &[5, 4],
        vec![w(3, 1, 1, 2), w(3, 2, 2, 0)],
        f64::INFINITY,
        3,
    );
}

#[test]
fn sum_pool_with_padding_stride_and_dilations() {
    pool(
        BinaryOp::Add,
        &[6, 5],
        vec![w(3, 2, 1, 2), w(2, 1, 0, 0)],
        0.0,
        4,
    );
    let mut a = w(2, 2, 1, 0);
    a.base_dilation = 2;
    let mut b = w(2, 1, -1, 2);
    b.window_dilation = 2;
    pool(BinaryOp::Add, &[4, 6], vec![a, b], 0.0, 5);
}
