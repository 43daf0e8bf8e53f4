//! The pooling loops in AVX2: 8 channels per vector; the channels past the last whole vector
//! go through the portable loops. The select's running choice is one lane mask per window
//! position.

use super::{portable, window_offsets, Flags, Picks, PoolGeometry, Region};
use std::arch::x86_64::*;

/// `r` of the forward pass (see [`super::MaxPool`]).
///
/// # Safety
/// As [`super::MaxPool::run`]; the machine must have AVX2.
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
    let whole = g.channels / 8 * 8;
    if whole < g.channels {
        portable::forward(g, relu, offsets, src, dst, std::ptr::null_mut(), r, whole);
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn forward_impl<const RELU: bool>(
    g: &PoolGeometry,
    offsets: &[usize],
    src: *const f32,
    dst: *mut f32,
    r: Region,
) {
    let [_, ow] = g.output_hw();
    let c = g.channels;
    let whole = c / 8 * 8;
    let zero = _mm256_setzero_ps();
    let neg_inf = _mm256_set1_ps(f32::NEG_INFINITY);
    for n in 0..r.images {
        for i in r.rows[0]..r.rows[1] {
            let row = src.add(n * g.in_image() + i * g.stride[0] * g.width * c);
            let out_row = dst.add(n * g.out_image() + i * ow * c);
            for j in r.cols[0]..r.cols[1] {
                let base = row.add(j * g.stride[1] * c);
                let out = out_row.add(j * c);
                for ch in (0..whole).step_by(8) {
                    let mut acc = neg_inf;
                    for &off in offsets {
                        let mut x = _mm256_loadu_ps(base.add(off + ch));
                        if RELU {
                            x = _mm256_max_ps(zero, x);
                        }
                        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x);
                        acc = _mm256_blendv_ps(_mm256_max_ps(x, acc), x, nan);
                    }
                    _mm256_storeu_ps(out.add(ch), acc);
                }
            }
        }
    }
}

/// Backward pass of `images` images (see [`super::MaxPoolGrad`]), summing into `acc` unless
/// it is null.
///
/// # Safety
/// As [`super::MaxPoolGrad::run`]; the machine must have AVX2.
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
    let stream = f.stream && (dz as usize).is_multiple_of(32) && geo.channels.is_multiple_of(8);
    macro_rules! pick {
        ($($p:literal)*) => {
            match geo.window[0] * geo.window[1] {
                $($p if stream => backward_impl::<$p, true>(geo, f, z, g, dz, acc, images),)*
                $($p => backward_impl::<$p, false>(geo, f, z, g, dz, acc, images),)*
                _ => unreachable!("window positions checked by MaxPoolGrad::new"),
            }
        };
    }
    pick!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    let whole = geo.channels / 8 * 8;
    if whole < geo.channels {
        portable::backward(geo, f, Picks::Values(z), g, dz, acc, images, whole);
    }
}

#[target_feature(enable = "avx2,fma")]
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
    let whole = c / 8 * 8;
    let mut offsets = [0usize; P];
    offsets.copy_from_slice(&window_offsets(geo));
    let zero = _mm256_setzero_ps();
    let all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for n in 0..images {
        for i in 0..oh {
            let row = n * geo.in_image() + i * geo.window[0] * geo.width * c;
            let g_row = g.add(n * geo.out_image() + i * ow * c);
            for j in 0..ow {
                let at = row + j * geo.window[1] * c;
                for ch in (0..whole).step_by(8) {
                    let mut zs = [zero; P];
                    for k in 0..P {
                        zs[k] = _mm256_loadu_ps(z.add(at + offsets[k] + ch));
                    }
                    let m = |k: usize| {
                        if f.relu {
                            _mm256_max_ps(zero, zs[k])
                        } else {
                            zs[k]
                        }
                    };
                    let mut sel = [zero; P];
                    sel[0] = all;
                    let mut cur = m(0);
                    for k in 1..P {
                        let mk = m(k);
                        let switch = _mm256_cmp_ps::<_CMP_NGE_UQ>(cur, mk);
                        cur = _mm256_blendv_ps(cur, mk, switch);
                        for s in sel.iter_mut().take(k) {
                            *s = _mm256_andnot_ps(switch, *s);
                        }
                        sel[k] = switch;
                    }
                    let gv = _mm256_add_ps(zero, _mm256_loadu_ps(g_row.add(j * c + ch)));
                    let mut sum = if acc.is_null() {
                        zero
                    } else {
                        _mm256_loadu_ps(acc.add(ch))
                    };
                    for k in 0..P {
                        let open = if f.gate {
                            _mm256_cmp_ps::<_CMP_GT_OQ>(zs[k], zero)
                        } else {
                            all
                        };
                        let d = _mm256_and_ps(_mm256_and_ps(sel[k], open), gv);
                        if STREAM {
                            _mm256_stream_ps(dz.add(at + offsets[k] + ch), d);
                        } else {
                            _mm256_storeu_ps(dz.add(at + offsets[k] + ch), d);
                        }
                        sum = _mm256_add_ps(sum, d);
                    }
                    if !acc.is_null() {
                        _mm256_storeu_ps(acc.add(ch), sum);
                    }
                }
            }
        }
    }
    if STREAM {
        _mm_sfence();
    }
}
