//! The pooling loops one channel at a time: the portable path, the channel tail of the AVX2
//! path and the reference the vector paths are tested against (the interpreter's semantics,
//! see the module above).

use super::{window_offsets, Flags, PoolGeometry, Region};

/// The interpreter's `maximum`: NaN when either side is NaN, else `x >= y ? x : y`.
pub(super) fn fmax(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else if x >= y {
        x
    } else {
        y
    }
}

/// `r` of the forward pass, channels `c0..`.
///
/// # Safety
/// As [`super::MaxPool::run`], for the region's images from the pointers.
pub(super) unsafe fn forward(
    g: &PoolGeometry,
    relu: bool,
    offsets: &[usize],
    src: *const f32,
    dst: *mut f32,
    r: Region,
    c0: usize,
) {
    let [_, ow] = g.output_hw();
    let c = g.channels;
    for n in 0..r.images {
        for i in r.rows[0]..r.rows[1] {
            for j in r.cols[0]..r.cols[1] {
                let base =
                    src.add(n * g.in_image() + (i * g.stride[0] * g.width + j * g.stride[1]) * c);
                let out = dst.add(n * g.out_image() + (i * ow + j) * c);
                for ch in c0..c {
                    let mut acc = f32::NEG_INFINITY;
                    for &off in offsets {
                        let mut x = *base.add(off + ch);
                        if relu {
                            x = fmax(x, 0.0);
                        }
                        acc = fmax(acc, x);
                    }
                    *out.add(ch) = acc;
                }
            }
        }
    }
}

/// Backward pass of `images` images, channels `c0..`, summing into `acc` unless it is null.
///
/// # Safety
/// As [`super::MaxPoolGrad::run`], for `images` images from the pointers.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn backward(
    geo: &PoolGeometry,
    f: Flags,
    z: *const f32,
    g: *const f32,
    dz: *mut f32,
    acc: *mut f32,
    images: usize,
    c0: usize,
) {
    let [oh, ow] = geo.output_hw();
    let c = geo.channels;
    let offsets = window_offsets(geo);
    let mut m = [0f32; super::MAX_WINDOW_POSITIONS];
    let mut zs = [0f32; super::MAX_WINDOW_POSITIONS];
    for n in 0..images {
        for i in 0..oh {
            for j in 0..ow {
                let at =
                    n * geo.in_image() + (i * geo.window[0] * geo.width + j * geo.window[1]) * c;
                let gp = g.add(n * geo.out_image() + (i * ow + j) * c);
                for ch in c0..c {
                    for (k, &off) in offsets.iter().enumerate() {
                        zs[k] = *z.add(at + off + ch);
                        m[k] = if f.relu { fmax(zs[k], 0.0) } else { zs[k] };
                    }
                    // The select `m[sel] >= m[k]` as HLO states it: false on NaN, then `k` wins.
                    let mut sel = 0;
                    for k in 1..offsets.len() {
                        #[allow(clippy::neg_cmp_op_on_partial_ord)]
                        if !(m[sel] >= m[k]) {
                            sel = k;
                        }
                    }
                    let gv = 0.0 + *gp.add(ch);
                    for (k, &off) in offsets.iter().enumerate() {
                        let open = !f.gate || zs[k] > 0.0;
                        let d = if k == sel && open { gv } else { 0.0 };
                        *dz.add(at + off + ch) = d;
                        if !acc.is_null() {
                            *acc.add(ch) += d;
                        }
                    }
                }
            }
        }
    }
}
