//! Plans for the kernels crate's 1-D Winograd convolution (`tessel_kernels::winograd_1d`):
//! a width-5 window sliding along one spatial dimension, every other spatial dimension of
//! size 1 (TensorFlow's `Conv1D`, written as a 2-D convolution with a `1 x 5` window, or a
//! convolution with one spatial dimension). Input and output in `[batch, spatial.., feature]`
//! order, the kernel in any layout (also reversed: the data gradient); stride 1, undilated,
//! one group. And its weight gradient in the labels TensorFlow and JAX emit for it,
//! `f01b_i01o->01bf` (the batch contracted as the feature), the output in any layout.
//! Anything else is declined (`None`), and `conv_select` tries the next routine.

use super::conv_shape::{f32_dims, row_major_strides, ConvOperands};
use super::operand_plan::OperandPlan;
use crate::jit::buffer::Addr;
use tessel_kernels::gemm::GemmBackend;
use tessel_kernels::winograd_1d::forward::WIDTH;
use tessel_kernels::winograd_1d::{KernelStrides, Winograd1d, Winograd1dFilterGradient};

/// Input channels below this are declined: with few channels the products per point are too
/// thin to pay for the transforms, and the patch GEMM (5 taps per row) does better.
const MIN_CHANNELS: usize = 8;

/// The output tile: F(4, 5), 8 products per 4 outputs instead of 20; its f32 error is
/// measured in the kernels crate's tests and in docs/jit.md.
const TILE: usize = 4;

/// True when `labels` are `[batch, spatial.., feature]` in that order.
fn rows_layout(batch: i64, spatial: &[i64], feature: i64) -> bool {
    let rank = spatial.len() as i64 + 2;
    batch == 0 && feature == rank - 1 && spatial.iter().enumerate().all(|(i, &s)| s == i as i64 + 1)
}

/// Plans `output = conv(input, kernel)` if it has the shape the 1-D Winograd forward
/// handles; `None` otherwise (nothing is allocated then).
pub(crate) fn plan_winograd_1d(
    ops: &ConvOperands,
    backend: GemmBackend,
    threads: usize,
    alloc: &mut dyn FnMut(usize) -> Addr,
) -> Option<OperandPlan<Winograd1d>> {
    let conv = ops.conv;
    let (input, kernel, output) = (ops.input, ops.kernel, ops.output);
    let (idims, kdims, odims) = (f32_dims(input.1)?, f32_dims(kernel.1)?, f32_dims(output.1)?);
    let d = &conv.dims;
    let win = &conv.window.dims;
    let rank = idims.len();
    if rank < 3
        || kdims.len() != rank
        || odims.len() != rank
        || win.len() != rank - 2
        || conv.feature_group_count > 1
        || conv.batch_group_count > 1
        || !rows_layout(d.input_batch, &d.input_spatial, d.input_feature)
        || !rows_layout(d.output_batch, &d.output_spatial, d.output_feature)
        || d.kernel_spatial.len() != rank - 2
    {
        return None;
    }
    // The one spatial dimension the window slides along; the others are size 1 throughout.
    let long: Vec<usize> = (0..win.len()).filter(|&i| win[i].size != 1).collect();
    let [s] = long[..] else { return None };
    let plain = win
        .iter()
        .all(|w| w.stride == 1 && w.window_dilation == 1 && w.base_dilation == 1);
    let others_unit = (0..win.len()).filter(|&i| i != s).all(|i| {
        idims[i + 1] == 1
            && odims[i + 1] == 1
            && kdims[d.kernel_spatial[i] as usize] == 1
            && win[i].pad_low == 0
            && win[i].pad_high == 0
    });
    let (batch, len, c) = (idims[0], idims[s + 1], idims[rank - 1]);
    let (out_len, o) = (odims[s + 1], odims[rank - 1]);
    let (ki, ko, kt) = (
        d.kernel_input_feature as usize,
        d.kernel_output_feature as usize,
        d.kernel_spatial[s] as usize,
    );
    if !plain
        || !others_unit
        || win[s].size as usize != WIDTH
        || kdims[kt] != WIDTH
        || kdims[ki] != c
        || kdims[ko] != o
        || odims[0] != batch
        || c < MIN_CHANNELS
    {
        return None;
    }
    let strides: Vec<isize> = row_major_strides(&kdims)
        .iter()
        .map(|&s| s as isize)
        .collect();
    let layout = KernelStrides {
        tap: strides[kt],
        input: strides[ki],
        output: strides[ko],
        reversed: win[s].reversal,
    };
    let pads = (win[s].pad_low as isize, win[s].pad_high as isize);
    let routine = Winograd1d::new(
        batch, len, c, o, pads, out_len, layout, TILE, backend, threads,
    )
    .ok()?;
    Some(OperandPlan::new(ops.name, routine, ops.addrs(), alloc))
}

/// Plans `output = conv(input, grad)` if it is the weight gradient of a convolution the
/// forward plan above takes, in `f01b_i01o->01bf` labels (`X` as `[N, 1.., L, C]`, `dY`
/// as `[N, 1.., OL, K]`, the window spanning all of `dY` and sliding over 5 positions);
/// `None` otherwise (nothing is allocated then).
pub(crate) fn plan_winograd_1d_filter(
    ops: &ConvOperands,
    backend: GemmBackend,
    threads: usize,
    alloc: &mut dyn FnMut(usize) -> Addr,
) -> Option<OperandPlan<Winograd1dFilterGradient>> {
    let conv = ops.conv;
    let (input, grad, output) = (ops.input, ops.kernel, ops.output);
    let (idims, gdims, odims) = (f32_dims(input.1)?, f32_dims(grad.1)?, f32_dims(output.1)?);
    let d = &conv.dims;
    let win = &conv.window.dims;
    let rank = idims.len();
    let last = rank as i64 - 1;
    if rank < 3
        || gdims.len() != rank
        || odims.len() != rank
        || win.len() != rank - 2
        || conv.feature_group_count > 1
        || conv.batch_group_count > 1
        || (d.input_feature, d.input_batch) != (0, last)
        || (d.kernel_input_feature, d.kernel_output_feature) != (0, last)
        || !rows_layout(0, &d.input_spatial, last)
        || !rows_layout(0, &d.kernel_spatial, last)
        || d.output_spatial.len() != rank - 2
    {
        return None;
    }
    let long: Vec<usize> = (0..win.len())
        .filter(|&i| gdims[i + 1] != 1 || idims[i + 1] != 1)
        .collect();
    let [s] = long[..] else { return None };
    let plain = win
        .iter()
        .all(|w| w.stride == 1 && w.window_dilation == 1 && w.base_dilation == 1 && !w.reversal);
    let others_unit = (0..win.len()).filter(|&i| i != s).all(|i| {
        win[i].size == 1
            && odims[d.output_spatial[i] as usize] == 1
            && win[i].pad_low == 0
            && win[i].pad_high == 0
    });
    let (batch, len, c) = (idims[0], idims[s + 1], idims[rank - 1]);
    let (out_len, k) = (gdims[s + 1], gdims[rank - 1]);
    let (ot, oc, ok) = (
        d.output_spatial[s] as usize,
        d.output_batch as usize,
        d.output_feature as usize,
    );
    if !plain
        || !others_unit
        || win[s].size as usize != out_len
        || gdims[0] != batch
        || odims[ot] != WIDTH
        || odims[oc] != c
        || odims[ok] != k
        || c < MIN_CHANNELS
    {
        return None;
    }
    let strides: Vec<isize> = row_major_strides(&odims)
        .iter()
        .map(|&s| s as isize)
        .collect();
    let pads = (win[s].pad_low as isize, win[s].pad_high as isize);
    let routine = Winograd1dFilterGradient::new(
        batch,
        len,
        c,
        k,
        pads,
        out_len,
        [strides[ot], strides[oc], strides[ok]],
        TILE,
        backend,
        threads,
    )
    .ok()?;
    Some(OperandPlan::new(ops.name, routine, ops.addrs(), alloc))
}
