//! The weight gradient of a strided convolution (`tessel_kernels::strided_weight_grad`,
//! planned in `jit/routines/conv_strided_wgrad.rs`) against the interpreter: JAX's labels
//! (`f01b_i01o->01bf` and `->fb01`, the window dilated by the stride), ResNet-20's 3x3 and
//! 1x1 down-sampling gradients, odd sizes, stride 2 and 3, 1 channel and many; bitwise the
//! same on 1 and 2 threads; and what it must leave to the other routines.

use super::conv_check::{check_routine, chosen as chosen_at};
use tessel_compiler::ir::*;
use tessel_runtime::jit::routines::conv_select::ConvPrecision;

/// The algorithm picked at `HIGHEST` precision (a direct sum).
fn chosen(conv: &Convolution, dims: [&[i64]; 3]) -> &'static str {
    chosen_at(conv, dims, ConvPrecision::Exact)
}

/// `f01b_i01o->01bf`, or `->fb01` when `fb01`.
fn labels(fb01: bool) -> ConvDimensionNumbers {
    ConvDimensionNumbers {
        input_batch: 3,
        input_feature: 0,
        input_spatial: vec![1, 2],
        kernel_input_feature: 0,
        kernel_output_feature: 3,
        kernel_spatial: vec![1, 2],
        output_batch: if fb01 { 1 } else { 2 },
        output_feature: if fb01 { 0 } else { 3 },
        output_spatial: if fb01 { vec![2, 3] } else { vec![0, 1] },
    }
}

/// A weight-gradient convolution with per-dimension (window = gradient size, pad_low,
/// pad_high, window dilation = the forward's stride).
fn conv(dims: [(i64, i64, i64, i64); 2], fb01: bool) -> Convolution {
    Convolution {
        window: Window {
            dims: dims
                .iter()
                .map(|&(size, lo, hi, dilation)| {
                    let mut d = WindowDim::new(size);
                    (d.pad_low, d.pad_high, d.window_dilation) = (lo, hi, dilation);
                    d
                })
                .collect(),
        },
        dims: labels(fb01),
        feature_group_count: 1,
        batch_group_count: 1,
    }
}

/// Runs `conv` with the JIT on 1 and 2 threads and with the interpreter: the strided weight
/// gradient is chosen, its result is within 1e-5 of the interpreter's sum of |terms|, and
/// both thread counts give the same bits.
fn check(conv: &Convolution, dims: [&[i64]; 3], seed: u32) {
    check_routine(
        conv,
        dims,
        seed,
        ("strided-weight-grad", ConvPrecision::Exact),
        1e-5,
    );
}

/// ResNet-20's stride-2 weight gradients as JAX writes them, at a small batch: the 3x3
/// down-sampling (forward pad 0_1, `01bf`) and the 1x1 shortcut (a 2x2 window of which the
/// step slices one tap, `fb01`).
#[test]
fn resnet_stride_two_weight_gradients_match_the_interpreter() {
    check(
        &conv([(8, 0, 1, 2), (8, 0, 1, 2)], false),
        [&[3, 16, 16, 16], &[3, 8, 8, 32], &[3, 3, 16, 32]],
        1,
    );
    check(
        &conv([(4, 0, 0, 2), (4, 0, 0, 2)], true),
        [&[2, 8, 8, 32], &[2, 4, 4, 64], &[64, 32, 2, 2]],
        2,
    );
}

/// Odd sizes, one channel, many channels, stride 3, a stride in one dimension only, padding
/// on the high side only and cropping.
#[test]
fn odd_shapes_match_the_interpreter() {
    // 9x11 input, 3 channels to 13, stride 2, `same`-like padding.
    check(
        &conv([(5, 1, 1, 2), (6, 1, 1, 2)], false),
        [&[2, 9, 11, 3], &[2, 5, 6, 13], &[3, 3, 3, 13]],
        3,
    );
    // One channel in and out.
    check(
        &conv([(3, 0, 0, 2), (4, 1, -1, 2)], true),
        [&[1, 7, 8, 1], &[1, 3, 4, 1], &[1, 1, 3, 2]],
        4,
    );
    // Stride 3 by 1, 67 channels to 9, negative high padding.
    check(
        &conv([(3, 2, -1, 3), (5, 0, 0, 1)], false),
        [&[2, 8, 7, 67], &[2, 3, 5, 9], &[3, 3, 67, 9]],
        5,
    );
}

/// An undilated window (a stride-1 weight gradient), a dilated input, other labels and
/// feature groups stay on the other routines.
#[test]
fn declines_what_it_does_not_compute() {
    let plain = conv([(6, 1, 1, 1), (6, 1, 1, 1)], false);
    let dims: [&[i64]; 3] = [&[2, 6, 6, 3], &[2, 6, 6, 4], &[3, 3, 3, 4]];
    assert_ne!(chosen(&plain, dims), "strided-weight-grad");
    let mut dilated = conv([(8, 0, 1, 2), (8, 0, 1, 2)], false);
    dilated.window.dims[0].base_dilation = 2;
    let dims: [&[i64]; 3] = [&[3, 8, 16, 2], &[3, 8, 8, 4], &[2, 3, 2, 4]];
    assert_eq!(chosen(&dilated, dims), "gemm");
    let mut nhwc = conv([(3, 1, 1, 2), (3, 1, 1, 2)], false);
    nhwc.dims = ConvDimensionNumbers::nhwc_hwio();
    let dims: [&[i64]; 3] = [&[1, 6, 6, 2], &[3, 3, 2, 4], &[1, 4, 4, 4]];
    assert_eq!(chosen(&nhwc, dims), "gemm");
    let mut grouped = conv([(8, 0, 1, 2), (8, 0, 1, 2)], false);
    grouped.feature_group_count = 2;
    let dims: [&[i64]; 3] = [&[4, 16, 16, 2], &[2, 8, 8, 4], &[3, 3, 2, 4]];
    assert_eq!(chosen(&grouped, dims), "gemm");
}
