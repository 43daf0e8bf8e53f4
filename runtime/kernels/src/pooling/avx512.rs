//! The pooling loops in AVX-512F: 16 channels per vector, the channel tail under a lane mask;
//! the select's running choice is one lane mask per window position.

use super::{window_offsets, Flags, Picks, PoolGeometry, Region, CHOICE_OPEN, CHOICE_POSITION};
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

/// `r` of the forward pass (see [`super::MaxPool`]), with the window choices into `choices`
/// unless it is null.
///
/// # Safety
/// As [`super::MaxPool::run_with_choices`]; the machine must have AVX-512F.
pub(super) unsafe fn forward(
    g: &PoolGeometry,
    relu: bool,
    offsets: &[usize],
    src: *const f32,
    dst: *mut f32,
    choices: *mut u8,
    r: Region,
) {
    match (relu, choices.is_null()) {
        (true, true) => forward_impl::<true, false>(g, offsets, src, dst, choices, r),
        (false, true) => forward_impl::<false, false>(g, offsets, src, dst, choices, r),
        (true, false) => forward_impl::<true, true>(g, offsets, src, dst, choices, r),
        (false, false) => forward_impl::<false, true>(g, offsets, src, dst, choices, r),
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn forward_impl<const RELU: bool, const CHOOSE: bool>(
    g: &PoolGeometry,
    offsets: &[usize],
    src: *const f32,
    dst: *mut f32,
    choices: *mut u8,
    r: Region,
) {
    let [_, ow] = g.output_hw();
    let c = g.channels;
    let zero = _mm512_setzero_ps();
    let neg_inf = _mm512_set1_ps(f32::NEG_INFINITY);
    for n in 0..r.images {
        for i in r.rows[0]..r.rows[1] {
            let row = src.add(n * g.in_image() + i * g.stride[0] * g.width * c);
            let out_at = n * g.out_image() + i * ow * c;
            let out_row = dst.add(out_at);
            for j in r.cols[0]..r.cols[1] {
                let base = row.add(j * g.stride[1] * c);
                let out = out_row.add(j * c);
                for ch in (0..c).step_by(16) {
                    let mask = lanes(ch, c);
                    let mut acc = neg_inf;
                    // The backward pass's select (see `backward_impl`): the chosen position,
                    // its ReLU'd value and its value.
                    let (mut pos, mut cur, mut at_pos) = (_mm512_setzero_si512(), zero, zero);
                    for (k, &off) in offsets.iter().enumerate() {
                        let z = load(mask, base.add(off + ch));
                        let mut x = z;
                        if RELU {
                            // max(x, 0): `0 > x ? 0 : x` keeps -0 and NaN as the interpreter does.
                            x = _mm512_max_ps(zero, x);
                        }
                        // `x > acc ? x : acc` keeps the first of equal values; a NaN `x` wins.
                        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
                        acc = _mm512_mask_mov_ps(_mm512_max_ps(x, acc), nan, x);
                        if CHOOSE {
                            let switch = if k == 0 {
                                0xffff
                            } else {
                                _mm512_cmp_ps_mask::<_CMP_NGE_UQ>(cur, x)
                            };
                            cur = _mm512_mask_mov_ps(cur, switch, x);
                            at_pos = _mm512_mask_mov_ps(at_pos, switch, z);
                            pos = _mm512_mask_mov_epi32(pos, switch, _mm512_set1_epi32(k as i32));
                        }
                    }
                    store(mask, out.add(ch), acc);
                    if CHOOSE {
                        let open = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(at_pos, zero);
                        let byte = _mm512_mask_or_epi32(
                            pos,
                            open,
                            pos,
                            _mm512_set1_epi32(CHOICE_OPEN as i32),
                        );
                        let to = choices.add(out_at + j * c + ch) as *mut i8;
                        _mm512_mask_cvtepi32_storeu_epi8(to, mask, byte);
                    }
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
    picks: Picks,
    g: *const f32,
    dz: *mut f32,
    acc: *mut f32,
    images: usize,
) {
    // Streaming stores need whole aligned vectors.
    let stream = f.stream && (dz as usize).is_multiple_of(64) && geo.channels.is_multiple_of(16);
    let (z, choices) = match picks {
        Picks::Values(z) => (z, std::ptr::null()),
        Picks::Choices(c) => (std::ptr::null(), c),
    };
    macro_rules! pick {
        ($($p:literal)*) => {
            match (geo.window[0] * geo.window[1], choices.is_null()) {
                $(($p, true) if stream => backward_impl::<$p, true, false>(geo, f, z, choices, g, dz, acc, images),)*
                $(($p, true) => backward_impl::<$p, false, false>(geo, f, z, choices, g, dz, acc, images),)*
                $(($p, false) if stream => backward_impl::<$p, true, true>(geo, f, z, choices, g, dz, acc, images),)*
                $(($p, false) => backward_impl::<$p, false, true>(geo, f, z, choices, g, dz, acc, images),)*
                _ => unreachable!("window positions checked by MaxPoolGrad::new"),
            }
        };
    }
    pick!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
}

/// Loads the window choices of 16 channels (the tail under `mask`), one per 32-bit lane.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn load_choices(mask: __mmask16, p: *const u8) -> __m512i {
    let bytes = if mask == 0xffff {
        _mm_loadu_si128(p as *const __m128i)
    } else {
        let mut tail = [0u8; 16];
        std::ptr::copy_nonoverlapping(p, tail.as_mut_ptr(), mask.count_ones() as usize);
        _mm_loadu_si128(tail.as_ptr() as *const __m128i)
    };
    _mm512_cvtepu8_epi32(bytes)
}

#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn backward_impl<const P: usize, const STREAM: bool, const CHOSEN: bool>(
    geo: &PoolGeometry,
    f: Flags,
    z: *const f32,
    choices: *const u8,
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
            let g_at = n * geo.out_image() + i * ow * c;
            let g_row = g.add(g_at);
            for j in 0..ow {
                let at = row + j * geo.window[1] * c;
                for ch in (0..c).step_by(16) {
                    let mask = lanes(ch, c);
                    // `sel[k]`: the lanes whose choice is position `k`; `open[k]`: those
                    // whose gate is open there.
                    let mut sel = [0u16; P];
                    let mut open = [0xffffu16; P];
                    if CHOSEN {
                        let picked = load_choices(mask, choices.add(g_at + j * c + ch));
                        let position =
                            _mm512_and_si512(picked, _mm512_set1_epi32(CHOICE_POSITION as i32));
                        for (k, s) in sel.iter_mut().enumerate() {
                            *s = _mm512_cmpeq_epi32_mask(position, _mm512_set1_epi32(k as i32));
                        }
                        if f.gate {
                            let gate = _mm512_test_epi32_mask(
                                picked,
                                _mm512_set1_epi32(CHOICE_OPEN as i32),
                            );
                            open = [gate; P];
                        }
                    } else {
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
                        // The select `cur >= e`: where it fails (also on NaN) `e` becomes the
                        // choice.
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
                        if f.gate {
                            for k in 0..P {
                                open[k] = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(zs[k], zero);
                            }
                        }
                    }
                    let gv = _mm512_add_ps(zero, load(mask, g_row.add(j * c + ch)));
                    let mut sum = if acc.is_null() {
                        zero
                    } else {
                        load(mask, acc.add(ch))
                    };
                    for k in 0..P {
                        let d = _mm512_maskz_mov_ps(sel[k] & open[k], gv);
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
