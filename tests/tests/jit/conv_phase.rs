//! The split by output phase (`tessel_kernels::phase_conv`, planned in
//! `jit/routines/conv_phase.rs`) against the interpreter: convolutions of a stride-dilated
//! input as XLA writes a strided convolution's data gradient (`lhs_dilate`), 3x3 and 1x1
//! windows, odd sizes, stride 2 and 3, 1 channel and many, the kernel in HWIO, `io01` (the
//! layout XLA's gradient reads) and reversed; bitwise the same on 1 and 2 threads; and what it
//! must leave to the patch GEMM.

use super::conv_check::{check_routine, chosen as chosen_at};
use tessel_compiler::ir::*;
use tessel_runtime::jit::routines::conv_select::ConvPrecision;

/// The algorithm picked at `HIGHEST` precision (a direct sum).
fn chosen(conv: &Convolution, dims: [&[i64]; 3]) -> &'static str {
    chosen_at(conv, dims, ConvPrecision::Exact)
}

/// A 2-D convolution with per-dimension (size, pad_low, pad_high, lhs dilation), reversed or
/// not, in `labels`.
fn conv(
    dims: [(i64, i64, i64, i64); 2],
    reversal: bool,
    labels: ConvDimensionNumbers,
) -> Convolution {
    Convolution {
        window: Window {
            dims: dims
                .iter()
                .map(|&(size, lo, hi, dilation)| {
                    let mut d = WindowDim::new(size);
                    (d.pad_low, d.pad_high, d.base_dilation) = (lo, hi, dilation);
                    d.reversal = reversal;
                    d
                })
                .collect(),
        },
        dims: labels,
        feature_group_count: 1,
        batch_group_count: 1,
    }
}

/// `b01f_io01->b01f`: the labels of XLA's data gradient of a strided convolution.
fn io01() -> ConvDimensionNumbers {
    ConvDimensionNumbers {
        kernel_input_feature: 0,
        kernel_output_feature: 1,
        kernel_spatial: vec![2, 3],
        ..ConvDimensionNumbers::nhwc_hwio()
    }
}

/// Runs `conv` with the JIT on 1 and 2 threads and with the interpreter: the phase split is
/// chosen, its result is within 1e-5 of the interpreter's sum of |terms|, and both thread
/// counts give the same bits.
fn check(conv: &Convolution, dims: [&[i64]; 3], seed: u32) {
    check_routine(conv, dims, seed, ("phase", ConvPrecision::Exact), 1e-5);
}

/// ResNet-20's stride-2 data gradients as XLA writes them (`same` padding of an even input:
/// pad 2_1 for 3x3, 0_1 for 1x1; the kernel `io01`), at a small batch.
#[test]
fn resnet_stride_two_data_gradients_match_the_interpreter() {
    check(
        &conv([(3, 2, 1, 2), (3, 2, 1, 2)], false, io01()),
        [&[2, 8, 8, 32], &[32, 16, 3, 3], &[2, 16, 16, 16]],
        1,
    );
    check(
        &conv([(1, 0, 1, 2), (1, 0, 1, 2)], false, io01()),
        [&[3, 4, 4, 64], &[64, 32, 1, 1], &[3, 8, 8, 32]],
        2,
    );
}

/// Odd sizes, one channel, many channels, stride 3, dilation in one dimension, a reversed
/// HWIO kernel, negative padding.
#[test]
fn odd_shapes_match_the_interpreter() {
    let hwio = ConvDimensionNumbers::nhwc_hwio();
    // `valid` stride-2 forward of 15x15 by 3x3: dY 7x7 padded 2_2, reversed HWIO kernel.
    check(
        &conv([(3, 2, 2, 2), (3, 2, 2, 2)], true, hwio.clone()),
        [&[2, 7, 7, 5], &[3, 3, 5, 3], &[2, 15, 15, 3]],
        3,
    );
    // One channel in and out, uneven padding.
    check(
        &conv([(3, 1, 2, 2), (3, 2, 1, 2)], false, hwio.clone()),
        [&[1, 5, 6, 1], &[3, 3, 1, 1], &[1, 10, 12, 1]],
        4,
    );
    // Stride 3, a 5x4 window, 67 channels.
    check(
        &conv([(5, 4, 4, 3), (4, 3, 3, 3)], true, hwio.clone()),
        [&[1, 4, 5, 67], &[5, 4, 67, 9], &[1, 14, 16, 9]],
        5,
    );
    // Dilated rows only; negative low padding of the columns.
    check(
        &conv([(3, 2, 1, 2), (3, -1, 1, 1)], false, hwio),
        [&[2, 6, 7, 4], &[3, 3, 4, 7], &[2, 12, 5, 7]],
        6,
    );
}

/// An undilated input, a strided window, and feature groups stay on the other routines.
#[test]
fn declines_what_it_does_not_compute() {
    let hwio = ConvDimensionNumbers::nhwc_hwio();
    let plain = conv([(3, 1, 1, 1), (3, 1, 1, 1)], false, hwio.clone());
    let dims: [&[i64]; 3] = [&[1, 6, 6, 1], &[3, 3, 1, 4], &[1, 6, 6, 4]];
    assert_ne!(chosen(&plain, dims), "phase");
    let mut strided = conv([(3, 2, 1, 2), (3, 2, 1, 2)], false, hwio.clone());
    strided.window.dims[0].stride = 2;
    let dims: [&[i64]; 3] = [&[1, 4, 4, 2], &[3, 3, 2, 3], &[1, 4, 8, 3]];
    assert_eq!(chosen(&strided, dims), "gemm");
    let mut grouped = conv([(3, 2, 1, 2), (3, 2, 1, 2)], false, hwio);
    grouped.feature_group_count = 2;
    let dims: [&[i64]; 3] = [&[1, 4, 4, 4], &[3, 3, 2, 4], &[1, 8, 8, 4]];
    assert_eq!(chosen(&grouped, dims), "gemm");
}
