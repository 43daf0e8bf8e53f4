//! Shape facts the specialized convolution routines (`conv_direct*.rs`, `conv_winograd*.rs`)
//! check before they accept a convolution.

use tessel_compiler::ir::{ArrayShape, Convolution, ElementType};

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

/// The output size of a stride-1 window of `k` over `n` padded by `pad`, if positive.
pub(crate) fn window_output(n: usize, pad: (isize, isize), k: usize) -> Option<usize> {
    let out = n as isize + pad.0 + pad.1 - k as isize + 1;
    (out > 0).then_some(out as usize)
}
