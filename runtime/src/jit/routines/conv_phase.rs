//! Plans for the kernels crate's convolution of a stride-dilated input
//! (`tessel_kernels::phase_conv`): XLA's data gradient of a strided convolution, dY dilated by
//! the stride (`lhs_dilate`) and convolved at stride 1, NHWC input and output, the kernel in
//! any layout (also reversed). 2-D, undilated window, one group; anything else is declined
//! (`None`), and `conv_select` tries the next routine.

use super::conv_shape::{f32_dims, row_major_strides, ConvOperands};
use super::operand_plan::OperandPlan;
use crate::jit::buffer::Addr;
use tessel_kernels::phase_conv::{DilatedInputGeometry, PhaseConv};
use tessel_kernels::winograd::KernelLayout;

/// Plans `output = conv(input, kernel)` if it is a 2-D NHWC convolution of an input dilated in
/// some dimension, at stride 1; `None` otherwise (nothing is allocated then).
pub(crate) fn plan_phase_conv(
    ops: &ConvOperands,
    threads: usize,
    alloc: &mut dyn FnMut(usize) -> Addr,
) -> Option<OperandPlan<PhaseConv>> {
    let conv = ops.conv;
    let (idims, kdims, odims) = (
        f32_dims(ops.input.1)?,
        f32_dims(ops.kernel.1)?,
        f32_dims(ops.output.1)?,
    );
    let d = &conv.dims;
    let nhwc = |b: i64, sp: &[i64], f: i64| b == 0 && sp == [1, 2] && f == 3;
    let win = &conv.window.dims;
    if [&idims, &kdims, &odims].iter().any(|dims| dims.len() != 4)
        || conv.feature_group_count > 1
        || conv.batch_group_count > 1
        || !nhwc(d.input_batch, &d.input_spatial, d.input_feature)
        || !nhwc(d.output_batch, &d.output_spatial, d.output_feature)
        || d.kernel_spatial.len() != 2
        || win.len() != 2
        || win
            .iter()
            .any(|w| w.stride != 1 || w.window_dilation != 1 || w.base_dilation < 1)
    {
        return None;
    }
    let ks = [
        d.kernel_spatial[0] as usize,
        d.kernel_spatial[1] as usize,
        d.kernel_input_feature as usize,
        d.kernel_output_feature as usize,
    ];
    let (batch, h, w, c) = (idims[0], idims[1], idims[2], idims[3]);
    let (oh, ow, o) = (odims[1], odims[2], odims[3]);
    let window = [kdims[ks[0]], kdims[ks[1]]];
    // The output of a stride-1 window over the dilated, padded input.
    let out_size = |n: usize, i: usize| {
        let wd = &win[i];
        let dilated = (n as i64 - 1) * wd.base_dilation + 1;
        dilated + wd.pad_low + wd.pad_high - window[i] as i64 + 1
    };
    if kdims[ks[2]] != c
        || kdims[ks[3]] != o
        || odims[0] != batch
        || (0..2).any(|i| win[i].size as usize != window[i])
        || out_size(h, 0) != oh as i64
        || out_size(w, 1) != ow as i64
    {
        return None;
    }
    let geometry = DilatedInputGeometry {
        batch,
        height: h,
        width: w,
        channels: c,
        window,
        out_channels: o,
        out_size: [oh, ow],
        dilation: [0, 1].map(|i| win[i].base_dilation as usize),
        pad_low: [0, 1].map(|i| win[i].pad_low as isize),
    };
    let kstrides = row_major_strides(&kdims);
    let layout = KernelLayout {
        strides: ks.map(|k| kstrides[k]),
        reversed: [win[0].reversal, win[1].reversal],
    };
    let routine = PhaseConv::new(geometry, layout, threads).ok()?;
    Some(OperandPlan::new(ops.name, routine, ops.addrs(), alloc))
}
