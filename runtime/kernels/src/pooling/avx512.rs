//! The pooling loops in AVX-512F: 16 channels per vector, the channel tail under a lane mask;
//! the select's running choice is one lane mask per window position.

use super::{window_offsets, Flags, PoolGeometry, Region};
use std::arch::x86_64::*;

/// Lane mask of the 16-channel block at `c` (the tail block covers what is left).
fn lanes(c: usize, channels: usize) -> __mmask16 {
    let n = (channels - c).min(16);
    if n == 16 {
        0xffff
    } else {
        (1u16 << n) - 1
    }
}

/// Loads 16 lanes under `mask` (a plain load when all are on: masked memory operations cost
/// more on AMD cores).
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn load(mask: __mmask16, p: *const f32) -> __m512 {
    if mask == 0xffff {
        _mm512_loadu_ps(p)
    } else {
        _mm512_maskz_loadu_ps(mask, p)
    }
}

/// Stores 16 lanes under `mask` (see [`load`]).
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store(mask: __mmask16, p: *mut f32, v: __m512) {
    if mask == 0xffff {
        _mm512_storeu_ps(p, v)
    } else {
        _mm512_mask_storeu_ps(p, mask, v)
    }
}

/// `r` of the forward pass (see [`super::MaxPool`]).
///
/// # Safety
/// As [`super::MaxPool::run`]; the machine must have AVX-512F.
pub(super) unsafe fn forward(
    g: &PoolGeometry,
    relu: bool,
    offsets: &[usize],
    src: *const f32,
    dst: *mut f32,
    r: Region,
) {
    if relu {
        forward_impl::<true>(g, offsets, src, dst, r)
    } else {
        forward_impl::<false>(g, offsets, src, dst, r)
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn forward_impl<const RELU: bool>(
    g: &PoolGeometry,
    offsets: &[usize],
    src: *const f32,
    dst: *mut f32,
    r: Region,
) {
    let [_, ow] = g.output_hw();
    let c = g.channels;
    let zero = _mm512_setzero_ps();
    let neg_inf = _mm512_set1_ps(f32::NEG_INFINITY);
    for n in 0..r.images {
        for i in r.rows[0]..r.rows[1] {
            let row = src.add(n * g.in_image() + i * g.stride[0] * g.width * c);
            let out_row = dst.add(n * g.out_image() + i * ow * c);
            for j in r.cols[0]..r.cols[1] {
                let base = row.add(j * g.stride[1] * c);
                let out = out_row.add(j * c);
                for ch in (0..c).step_by(16) {
                    let mask = lanes(ch, c);
                    let mut acc = neg_inf;
                    for &off in offsets {
                        let mut x = load(mask, base.add(off + ch));
                        if RELU {
                            // max(x, 0): `0 > x ? 0 : x` keeps -0 and NaN as the interpreter does.
                            x = _mm512_max_ps(zero, x);
                        }
                        // `x > acc ? x : acc` keeps the first of equal values; a NaN `x` wins.
                        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
                        acc = _mm512_mask_mov_ps(_mm512_max_ps(x, acc), nan, x);
                    }
                    store(mask, out.add(ch), acc);
                }
            }
        }
    }
}

/// Backward pass of `images` images (see [`super::MaxPoolGrad`]), summing into `acc` unless
/// it is null.
///
/// # Safety
/// As [`super::MaxPoolGrad::run`]; the machine must have AVX-512F.
pub(super) unsafe fn backward(
    geo: &PoolGeometry,
    f: Flags,
    z: *const f32,
    g: *const f32,
    dz: *mut f32,
    acc: *mut f32,
    images: usize,
) {
    // Streaming stores need whole aligned vectors.
    let stream = f.stream && (dz as usize).is_multiple_of(64) && geo.channels.is_multiple_of(16);
    macro_rules! pick {
        ($($p:literal)*) => {
            match geo.window[0] * geo.window[1] {
                $($p if stream => backward_impl::<$p, true>(geo, f, z, g, dz, acc, images),)*
                $($p => backward_impl::<$p, false>(geo, f, z, g, dz, acc, images),)*
                _ => unreachable!("window positions checked by MaxPoolGrad::new"),
            }
        };
    }
    pick!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
}

#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn backward_impl<const P: usize, const STREAM: bool>(
    geo: &PoolGeometry,
    f: Flags,
    z: *const f32,
    g: *const f32,
    dz: *mut f32,
    acc: *mut f32,
    images: usize,
) {
    let [oh, ow] = geo.output_hw();
    let c = geo.channels;
    let mut offsets = [0usize; P];
    offsets.copy_from_slice(&window_offsets(geo));
    let zero = _mm512_setzero_ps();
    for n in 0..images {
        for i in 0..oh {
            let row = n * geo.in_image() + i * geo.window[0] * geo.width * c;
            let g_row = g.add(n * geo.out_image() + i * ow * c);
            for j in 0..ow {
                let at = row + j * geo.window[1] * c;
                for ch in (0..c).step_by(16) {
                    let mask = lanes(ch, c);
                    let mut zs = [zero; P];
                    for k in 0..P {
                        zs[k] = load(mask, z.add(at + offsets[k] + ch));
                    }
                    let m = |k: usize| {
                        if f.relu {
                            _mm512_max_ps(zero, zs[k])
                        } else {
                            zs[k]
                        }
                    };
                    // The select `cur >= e`: where it fails (also on NaN) `e` becomes the choice.
                    let mut sel = [0u16; P];
                    sel[0] = 0xffff;
                    let mut cur = m(0);
                    for k in 1..P {
                        let mk = m(k);
                        let switch = _mm512_cmp_ps_mask::<_CMP_NGE_UQ>(cur, mk);
                        cur = _mm512_mask_mov_ps(cur, switch, mk);
                        for s in sel.iter_mut().take(k) {
                            *s &= !switch;
                        }
                        sel[k] = switch;
                    }
                    let gv = _mm512_add_ps(zero, load(mask, g_row.add(j * c + ch)));
                    let mut sum = if acc.is_null() {
                        zero
                    } else {
                        load(mask, acc.add(ch))
                    };
                    for k in 0..P {
                        let open = if f.gate {
                            _mm512_cmp_ps_mask::<_CMP_GT_OQ>(zs[k], zero)
                        } else {
                            0xffff
                        };
                        let d = _mm512_maskz_mov_ps(sel[k] & open, gv);
                        if STREAM {
                            _mm512_stream_ps(dz.add(at + offsets[k] + ch), d);
                        } else {
                            store(mask, dz.add(at + offsets[k] + ch), d);
                        }
                        sum = _mm512_add_ps(sum, d);
                    }
                    if !acc.is_null() {
                        store(mask, acc.add(ch), sum);
                    }
                }
            }
        }
    }
    if STREAM {
        _mm_sfence();
    }
}
