//! Plans for the kernels crate's weight gradient of a strided convolution
//! (`tessel_kernels::strided_weight_grad`): the labels JAX emits for it, input `f01b`,
//! output gradient `i01o`, the window dilated by the forward's stride (`rhs_dilate`, at
//! least 2), and the weight gradient in any layout (`01bf` for a 3x3 kernel, `fb01` for
//! ResNet's 1x1 shortcut). Anything else is declined (`None`), and `conv_select` tries the
//! next routine.

use super::conv_shape::{f32_dims, ConvOperands};
use super::operand_plan::OperandPlan;
use crate::jit::buffer::Addr;
use tessel_kernels::strided_weight_grad::{StridedWeightGradGeometry, StridedWeightGradient};

/// Plans convolution `ops` if it is the weight gradient of a strided 2-D convolution in JAX's
/// labels (the kernel operand is the output gradient), else `None` (nothing is allocated
/// then).
pub(crate) fn plan_strided_weight_grad(
    ops: &ConvOperands,
    threads: usize,
    alloc: &mut dyn FnMut(usize) -> Addr,
) -> Option<OperandPlan<StridedWeightGradient>> {
    let conv = ops.conv;
    let (input, grad, output) = (ops.input, ops.kernel, ops.output);
    let d = &conv.dims;
    let w = &conv.window.dims;
    let labels = d.input_feature == 0
        && d.input_spatial == [1, 2]
        && d.input_batch == 3
        && d.kernel_input_feature == 0
        && d.kernel_spatial == [1, 2]
        && d.kernel_output_feature == 3
        && d.output_spatial.len() == 2;
    let window = w.len() == 2
        && conv.feature_group_count <= 1
        && conv.batch_group_count <= 1
        && w.iter().any(|x| x.window_dilation >= 2)
        && w.iter().all(|x| {
            x.stride == 1 && x.base_dilation == 1 && x.window_dilation >= 1 && !x.reversal
        });
    if !labels || !window {
        return None;
    }
    let (i, g, o) = (f32_dims(input.1)?, f32_dims(grad.1)?, f32_dims(output.1)?);
    let [f, h, wd, b] = i[..] else { return None };
    let [gf, gh, gw, go] = g[..] else { return None };
    if o.len() != 4 {
        return None;
    }
    let at = |dim: i64| o[dim as usize];
    let (kh, kw) = (at(d.output_spatial[0]), at(d.output_spatial[1]));
    let sizes_match = gf == f
        && at(d.output_batch) == b
        && at(d.output_feature) == go
        && w[0].size as usize == gh
        && w[1].size as usize == gw;
    if !sizes_match {
        return None;
    }
    let geometry = StridedWeightGradGeometry {
        images: f,
        height: h,
        width: wd,
        channels: b,
        out_channels: go,
        window: [kh, kw],
        stride: [w[0].window_dilation as usize, w[1].window_dilation as usize],
        padding: [0, 1].map(|k| (w[k].pad_low as isize, w[k].pad_high as isize)),
        grad: [gh, gw],
    };
    // Row-major strides of the output, taken in the order [ky, kx, b, o].
    let strides = [o[1] * o[2] * o[3], o[2] * o[3], o[3], 1];
    let order = [
        d.output_spatial[0],
        d.output_spatial[1],
        d.output_batch,
        d.output_feature,
    ];
    let out_strides = order.map(|dim| strides[dim as usize]);
    let routine = StridedWeightGradient::new(&geometry, out_strides, threads).ok()?;
    Some(OperandPlan::new(ops.name, routine, ops.addrs(), alloc))
}
