//! The pooling loops one channel at a time: the portable path, the channel tail of the AVX2
//! path and the reference the vector paths are tested against (the interpreter's semantics,
//! see the module above).

use super::{window_offsets, Flags, Picks, PoolGeometry, Region, CHOICE_OPEN, CHOICE_POSITION};

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

/// `r` of the forward pass, channels `c0..`, with each output's window choice into `choices`
/// unless it is null (laid out as `dst`, one byte per output).
///
/// # Safety
/// As [`super::MaxPool::run_with_choices`], for the region's images from the pointers.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn forward(
    g: &PoolGeometry,
    relu: bool,
    offsets: &[usize],
    src: *const f32,
    dst: *mut f32,
    choices: *mut u8,
    r: Region,
    c0: usize,
) {
    let [_, ow] = g.output_hw();
    let c = g.channels;
    let mut zs = [0f32; super::MAX_WINDOW_POSITIONS];
    for n in 0..r.images {
        for i in r.rows[0]..r.rows[1] {
            for j in r.cols[0]..r.cols[1] {
                let base =
                    src.add(n * g.in_image() + (i * g.stride[0] * g.width + j * g.stride[1]) * c);
                let at = n * g.out_image() + (i * ow + j) * c;
                for ch in c0..c {
                    let mut acc = f32::NEG_INFINITY;
                    for (k, &off) in offsets.iter().enumerate() {
                        let z = *base.add(off + ch);
                        // Kept only for the choice: windows of any size pool, but only those
                        // of at most 16 positions choose (`MaxPool::can_choose`).
                        if !choices.is_null() {
                            zs[k] = z;
                        }
                        acc = fmax(acc, if relu { fmax(z, 0.0) } else { z });
                    }
                    *dst.add(at + ch) = acc;
                    if !choices.is_null() {
                        *choices.add(at + ch) = choice(&zs[..offsets.len()], relu);
                    }
                }
            }
        }
    }
}

/// The select `m[sel] >= m[k]` over window values `zs` (ReLU'd first when `relu`) as HLO
/// states it: false on NaN, then `k` wins. Returns the chosen position.
fn choose(zs: &[f32], relu: bool) -> usize {
    let m = |k: usize| if relu { fmax(zs[k], 0.0) } else { zs[k] };
    let mut sel = 0;
    for k in 1..zs.len() {
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(m(sel) >= m(k)) {
            sel = k;
        }
    }
    sel
}

/// The window choice byte of values `zs` (see [`super::CHOICE_POSITION`]).
pub(super) fn choice(zs: &[f32], relu: bool) -> u8 {
    let sel = choose(zs, relu);
    sel as u8 | if zs[sel] > 0.0 { CHOICE_OPEN } else { 0 }
}

/// Backward pass of `images` images, channels `c0..`, summing into `acc` unless it is null.
///
/// # Safety
/// As [`super::MaxPoolGrad::run`], for `images` images from the pointers.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn backward(
    geo: &PoolGeometry,
    f: Flags,
    picks: Picks,
    g: *const f32,
    dz: *mut f32,
    acc: *mut f32,
    images: usize,
    c0: usize,
) {
    let [oh, ow] = geo.output_hw();
    let c = geo.channels;
    let offsets = window_offsets(geo);
    let mut zs = [0f32; super::MAX_WINDOW_POSITIONS];
    for n in 0..images {
        for i in 0..oh {
            for j in 0..ow {
                let at =
                    n * geo.in_image() + (i * geo.window[0] * geo.width + j * geo.window[1]) * c;
                let out = n * geo.out_image() + (i * ow + j) * c;
                let gp = g.add(out);
                for ch in c0..c {
                    let picked = match picks {
                        Picks::Values(z) => {
                            for (k, &off) in offsets.iter().enumerate() {
                                zs[k] = *z.add(at + off + ch);
                            }
                            choice(&zs[..offsets.len()], f.relu)
                        }
                        Picks::Choices(choices) => *choices.add(out + ch),
                    };
                    let sel = (picked & CHOICE_POSITION) as usize;
                    let open = !f.gate || picked & CHOICE_OPEN != 0;
                    let gv = 0.0 + *gp.add(ch);
                    for (k, &off) in offsets.iter().enumerate() {
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
