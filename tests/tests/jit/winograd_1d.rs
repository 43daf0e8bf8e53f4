//! The 1-D Winograd convolution (`winograd_1d.rs`, F(4, 5) along one dimension) against the
//! interpreter: TensorFlow's `Conv1D` as a `1 x 5` window over `[batch, 1, length, channels]`
//! and as a convolution with one spatial dimension; valid, same, asymmetric and the data
//! gradient's padding; the data gradient's transposed and reversed kernel; the weight
//! gradient (`winograd-1d-filter`); odd lengths and
//! channel counts; the same bits on 1 and 2 threads; and the shapes it must decline.
//!
//! Tolerance: as in `winograd.rs`, each output against `TOL * sum |terms|` (the interpreter's
//! convolution of |input| and |kernel|). One F(4, 5) tile transforms along one dimension
//! only, so its error is below the 2-D F(4x4, 5x5)'s that `winograd.rs` bounds by the same 1e-5.

use super::conv_check::{check_routine, chosen};
use tessel_compiler::ir::*;
use tessel_runtime::jit::routines::conv_select::ConvPrecision;

const TOL: f64 = 1e-5;

/// Runs the convolution with the JIT on 1 and 2 threads and the interpreter; asserts the
/// 1-D Winograd forward routine was chosen, the error bound, and the same bits on both thread
/// counts. Returns the largest error / sum |terms|.
fn check(conv: &Convolution, dims: [&[i64]; 3], seed: u32) -> f64 {
    check_as(conv, dims, seed, "winograd-1d")
}

/// [`check`], with the algorithm `expect` asserted.
fn check_as(conv: &Convolution, dims: [&[i64]; 3], seed: u32, expect: &str) -> f64 {
    check_routine(conv, dims, seed, (expect, ConvPrecision::Fast), TOL)
}

/// A `1 x 5` window (TensorFlow's `Conv1D`) padded `pad` along the length.
fn conv_1x5(pad: (i64, i64), reversal: bool, dims: ConvDimensionNumbers) -> Convolution {
    let h = WindowDim::new(1);
    let mut w = WindowDim::new(5);
    (w.pad_low, w.pad_high, w.reversal) = (pad.0, pad.1, reversal);
    Convolution {
        window: Window { dims: vec![h, w] },
        dims,
        feature_group_count: 1,
        batch_group_count: 1,
    }
}

/// `b01f_io01->b01f`, the data gradient's labels in the text CNN's step.
fn io01() -> ConvDimensionNumbers {
    let mut d = ConvDimensionNumbers::nhwc_hwio();
    (d.kernel_input_feature, d.kernel_output_feature) = (0, 1);
    d.kernel_spatial = vec![2, 3];
    d
}

#[test]
fn conv1d_matches_the_interpreter() {
    let mut worst = 0.0f64;
    // (batch, length, channels, outputs, padding)
    type Case = (i64, i64, i64, i64, (i64, i64));
    let cases: &[Case] = &[
        (2, 40, 128, 128, (0, 0)),
        (3, 23, 8, 5, (2, 2)),
        (1, 9, 17, 33, (0, 3)),
        (5, 6, 13, 1, (1, 0)),
    ];
    for &(n, len, c, o, pad) in cases {
        let out = len + pad.0 + pad.1 - 4;
        let cv = conv_1x5(pad, false, ConvDimensionNumbers::nhwc_hwio());
        let seed = (n * 7 + len * 3 + c) as u32;
        worst = worst.max(check(
            &cv,
            [&[n, 1, len, c], &[1, 5, c, o], &[n, 1, out, o]],
            seed,
        ));
    }
    println!("conv1d forward: max error / sum |terms| = {worst:.2e}");
}

#[test]
fn data_gradient_form_matches_the_interpreter() {
    // The step's data gradient: dY [n, 1, len, o] by the kernel as io01, padded 4 on both
    // sides, with and without the window reversed by the convolution itself.
    for &(n, len, c, o, rev) in &[(2, 36, 24, 16, false), (1, 17, 9, 40, true)] {
        let cv = conv_1x5((4, 4), rev, io01());
        let seed = (n * 5 + len + o) as u32;
        check(
            &cv,
            [&[n, 1, len, o], &[o, c, 1, 5], &[n, 1, len + 4, c]],
            seed,
        );
    }
}

#[test]
fn one_spatial_dimension_matches_the_interpreter() {
    let mut w = WindowDim::new(5);
    (w.pad_low, w.pad_high) = (2, 2);
    let cv = Convolution {
        window: Window { dims: vec![w] },
        dims: ConvDimensionNumbers {
            input_batch: 0,
            input_feature: 2,
            input_spatial: vec![1],
            kernel_input_feature: 1,
            kernel_output_feature: 2,
            kernel_spatial: vec![0],
            output_batch: 0,
            output_feature: 2,
            output_spatial: vec![1],
        },
        feature_group_count: 1,
        batch_group_count: 1,
    };
    check(&cv, [&[3, 31, 12], &[5, 12, 7], &[3, 31, 7]], 11);
}

#[test]
fn declines_what_it_does_not_handle() {
    let hwio = ConvDimensionNumbers::nhwc_hwio();
    let plain = conv_1x5((0, 0), false, hwio.clone());
    let dims: [&[i64]; 3] = [&[2, 1, 20, 16], &[1, 5, 16, 4], &[2, 1, 16, 4]];
    assert_eq!(chosen(&plain, dims, ConvPrecision::Fast), "winograd-1d");
    // HIGHEST precision asks for the direct sum.
    assert_ne!(chosen(&plain, dims, ConvPrecision::Exact), "winograd-1d");
    // Stride 2.
    let mut strided = plain.clone();
    strided.window.dims[1].stride = 2;
    let sd: [&[i64]; 3] = [&[2, 1, 20, 16], &[1, 5, 16, 4], &[2, 1, 8, 4]];
    assert_ne!(chosen(&strided, sd, ConvPrecision::Fast), "winograd-1d");
    // Few channels.
    let few: [&[i64]; 3] = [&[2, 1, 20, 3], &[1, 5, 3, 4], &[2, 1, 16, 4]];
    assert_ne!(chosen(&plain, few, ConvPrecision::Fast), "winograd-1d");
    // Width 3.
    let mut three = plain.clone();
    three.window.dims[1].size = 3;
    let td: [&[i64]; 3] = [&[2, 1, 20, 16], &[1, 3, 16, 4], &[2, 1, 18, 4]];
    assert_ne!(chosen(&three, td, ConvPrecision::Fast), "winograd-1d");
}

/// `f01b_i01o->01bf`: the weight gradient of a `1 x 5` convolution padded `pad`, as the text
/// CNN's step writes it (the window spans all of dY).
fn weight_gradient(n: i64, len: i64, c: i64, o: i64, pad: (i64, i64)) -> f64 {
    let out = len + pad.0 + pad.1 - 4;
    let h = WindowDim::new(1);
    let mut w = WindowDim::new(out);
    (w.pad_low, w.pad_high) = pad;
    let cv = Convolution {
        window: Window { dims: vec![h, w] },
        dims: ConvDimensionNumbers {
            input_batch: 3,
            input_feature: 0,
            input_spatial: vec![1, 2],
            kernel_input_feature: 0,
            kernel_output_feature: 3,
            kernel_spatial: vec![1, 2],
            output_batch: 2,
            output_feature: 3,
            output_spatial: vec![0, 1],
        },
        feature_group_count: 1,
        batch_group_count: 1,
    };
    let seed = (n * 13 + len + c) as u32;
    check_as(
        &cv,
        [&[n, 1, len, c], &[n, 1, out, o], &[1, 5, c, o]],
        seed,
        "winograd-1d-filter",
    )
}

#[test]
fn weight_gradient_matches_the_interpreter() {
    let mut worst = 0.0f64;
    for &(n, len, c, o, pad) in &[
        (2, 40, 128, 64, (0, 0)),
        (3, 23, 8, 5, (2, 2)),
        (1, 9, 17, 33, (0, 3)),
    ] {
        worst = worst.max(weight_gradient(n, len, c, o, pad));
    }
    println!("conv1d weight gradient: max error / sum |terms| = {worst:.2e}");
}
