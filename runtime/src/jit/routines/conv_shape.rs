//! Shape facts the specialized convolution routines (`conv_direct.rs`, `winograd.rs`, ...)
//! check before they hand a convolution to the kernels crate, and the operands every one of
//! them is planned from.

use crate::jit::buffer::Addr;
use tessel_compiler::ir::{ArrayShape, Convolution, ElementType};
use tessel_kernels::geometry::window_output;
use tessel_kernels::Conv2dGeometry;

/// A convolution instruction to plan: its name (for errors), its attributes, and the arena
/// address and shape of its two operands and its result.
#[derive(Clone, Copy)]
pub(crate) struct ConvOperands<'a> {
    pub name: &'a str,
    pub conv: &'a Convolution,
    pub input: (Addr, &'a ArrayShape),
    pub kernel: (Addr, &'a ArrayShape),
    pub output: (Addr, &'a ArrayShape),
}

impl ConvOperands<'_> {
    /// The arena addresses of the input, the kernel and the output.
    pub(crate) fn addrs(&self) -> [Addr; 3] {
        [self.input.0, self.kernel.0, self.output.0]
    }
}

/// Row-major strides of `dims`, in elements.
pub(crate) fn row_major_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// The spatial sizes and padding of a 2-D stride-1 window with no dilation or reversal, one
/// group: `Some([(pad_low, pad_high); 2])`, else `None`.
pub(crate) fn plain_window(conv: &Convolution) -> Option<[(isize, isize); 2]> {
    let w = &conv.window.dims;
    let plain = w.len() == 2
        && conv.feature_group_count <= 1
        && conv.batch_group_count <= 1
        && w.iter().all(|d| {
            d.stride == 1 && d.window_dilation == 1 && d.base_dilation == 1 && !d.reversal
        });
    plain.then(|| [0, 1].map(|i| (w[i].pad_low as isize, w[i].pad_high as isize)))
}

/// The dims of an f32 array with no zero-sized dimension.
pub(crate) fn f32_dims(s: &ArrayShape) -> Option<Vec<usize>> {
    let ok = s.element_type == ElementType::F32 && s.dims.iter().all(|&d| d > 0);
    ok.then(|| s.dims.iter().map(|&d| d as usize).collect())
}

/// The geometry of a forward convolution of NHWC `input` (`[n, h, w, c]`) by a `window`
/// with `out_channels`, padded by `pads`, if its output is `out` (`[out_h, out_w]`) and the
/// window sizes match `conv`'s.
pub(crate) fn nhwc_geometry(
    conv: &Convolution,
    input: &[usize],
    window: [usize; 2],
    out_channels: usize,
    pads: [(isize, isize); 2],
    out: [usize; 2],
) -> Option<Conv2dGeometry> {
    let [n, h, w, c] = input[..] else { return None };
    let sizes_match = (0..2).all(|i| conv.window.dims[i].size as usize == window[i])
        && window_output(h, pads[0], window[0]) == Some(out[0])
        && window_output(w, pads[1], window[1]) == Some(out[1]);
    sizes_match.then_some(Conv2dGeometry {
        batch: n,
        height: h,
        width: w,
        channels: c,
        window,
        out_channels,
        padding: pads,
    })
}
