//! Packing an operand into the micro-kernel's panels: panel `q`, step `p`, lane `i` at
//! `dst[(q * kc + p) * W + i]`, from a matrix whose element `(r, p)` is at `src[r * rs + p *
//! ds]`. Lanes past the last row are zero.
//!
//! Done one float at a time, or step-major over all panels, packing took a fifth of the time
//! of the MLP's `256 x 1024 x 1024` products on one thread (docs/performance.md, "Packing the
//! packed product's operands"). So:
//! - **Adjacent rows** (`rs == 1`, a row-major `b` or a transposed `a`): each step's `W` floats
//!   are contiguous. Step-major over *all* panels wrote 16 streams `kc * W` floats apart, which
//!   share their L1 sets; here a few panels ([`GROUP_BYTES`] of a step) are packed step by step
//!   before the next few.
//! - **Contiguous steps** (`ds == 1`, a row-major `a` or a transposed `b`): each row is
//!   contiguous along `k`, so a panel is a transposition, done eight rows by eight steps in
//!   AVX2 registers instead of one float at a time.
//! - Any other strides, and the edges of the above: one float at a time.

use std::arch::x86_64::*;

use crate::prefetch::prefetch;

/// Bytes of one step that the adjacent-rows path reads before moving to the next step: four
/// 16-lane panels, so four write streams, well within an L1 set's eight ways.
const GROUP_BYTES: usize = 256;

/// Steps ahead whose group the adjacent-rows path asks for while it packs one.
const AHEAD: usize = 8;

/// Packs `rows` rows over `kc` steps into panels of `W` rows (see the module's comment).
///
/// # Safety
/// `src` must address the rows and steps with these strides; `dst` must hold
/// `rows.next_multiple_of(W) * kc` floats; the CPU must have AVX2 (as `super::serves` checks).
pub(super) unsafe fn pack<const W: usize>(
    rows: usize,
    kc: usize,
    src: *const f32,
    rs: isize,
    ds: isize,
    dst: *mut f32,
) {
    // Adjacent rows: the whole panels in groups; the last, cut one below.
    let done = if rs == 1 {
        pack_adjacent_rows::<W>(rows / W, kc, src, ds, dst);
        rows / W
    } else {
        0
    };
    for q in done..rows.div_ceil(W) {
        let live = (rows - q * W).min(W);
        let (base, out) = (src.offset((q * W) as isize * rs), dst.add(q * kc * W));
        if ds == 1 {
            pack_contiguous_steps::<W>(live, kc, base, rs, out);
        } else {
            pack_one_by_one::<W>(live, kc, base, rs, ds, out);
        }
    }
}

/// The `full` whole panels of rows that are adjacent (`rs == 1`): a group of panels step by
/// step, then the next group.
unsafe fn pack_adjacent_rows<const W: usize>(
    full: usize,
    kc: usize,
    src: *const f32,
    ds: isize,
    dst: *mut f32,
) {
    let group = (GROUP_BYTES / 4 / W).max(1);
    for q0 in (0..full).step_by(group) {
        let q1 = (q0 + group).min(full);
        for p in 0..kc {
            let from = src.offset(p as isize * ds);
            if p + AHEAD < kc {
                // Each step is on a page of its own in a wide matrix, where the hardware
                // prefetchers do not follow.
                let next = from.offset(AHEAD as isize * ds).add(q0 * W) as *const u8;
                prefetch(next, (q1 - q0) * W * 4);
            }
            for q in q0..q1 {
                std::ptr::copy_nonoverlapping(from.add(q * W), dst.add((q * kc + p) * W), W);
            }
        }
    }
}

/// One panel of `live <= W` rows whose steps are contiguous (`ds == 1`): blocks of eight rows
/// by eight steps transposed in registers, the last `kc % 8` steps one at a time.
#[target_feature(enable = "avx2")]
unsafe fn pack_contiguous_steps<const W: usize>(
    live: usize,
    kc: usize,
    src: *const f32,
    rs: isize,
    out: *mut f32,
) {
    let whole_steps = kc - kc % 8;
    for i0 in (0..W).step_by(8) {
        let lanes = (W - i0).min(8);
        let rows_here = live.saturating_sub(i0).min(lanes);
        let base = src.offset(i0 as isize * rs);
        for p0 in (0..whole_steps).step_by(8) {
            transpose_block(rows_here, lanes, base.add(p0), rs, out.add(p0 * W + i0), W);
        }
    }
    for p in whole_steps..kc {
        for i in 0..W {
            *out.add(p * W + i) = if i < live {
                *src.offset(i as isize * rs + p as isize)
            } else {
                0.0
            };
        }
    }
}

/// Eight steps of `rows <= 8` rows (`src`, row stride `rs`, rows past `rows` read as zero)
/// written as eight steps of `lanes` (6 or 8) floats `ldd` apart at `dst`.
#[target_feature(enable = "avx2")]
unsafe fn transpose_block(
    rows: usize,
    lanes: usize,
    src: *const f32,
    rs: isize,
    dst: *mut f32,
    ldd: usize,
) {
    let r: [__m256; 8] = std::array::from_fn(|i| {
        if i < rows {
            _mm256_loadu_ps(src.offset(i as isize * rs))
        } else {
            _mm256_setzero_ps()
        }
    });
    // Pairs of rows interleaved by 32 bits, then by 64 bits: each 128-bit lane then holds
    // four rows of one step; the halves of two registers make a whole step.
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    let steps = [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ];
    for (j, step) in steps.into_iter().enumerate() {
        let at = dst.add(j * ldd);
        if lanes == 8 {
            _mm256_storeu_ps(at, step);
        } else {
            // Six lanes: four, then two, so nothing past the step is written.
            _mm_storeu_ps(at, _mm256_castps256_ps128(step));
            _mm_storel_pd(
                at.add(4) as *mut f64,
                _mm_castps_pd(_mm256_extractf128_ps::<1>(step)),
            );
        }
    }
}

/// One panel of `live <= W` rows, any strides, one float at a time.
unsafe fn pack_one_by_one<const W: usize>(
    live: usize,
    kc: usize,
    base: *const f32,
    rs: isize,
    ds: isize,
    out: *mut f32,
) {
    for i in 0..W {
        if i < live {
            let row = base.offset(i as isize * rs);
            for p in 0..kc {
                *out.add(p * W + i) = *row.offset(p as isize * ds);
            }
        } else {
            for p in 0..kc {
                *out.add(p * W + i) = 0.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path (adjacent rows, contiguous steps, any strides) for 6- and 16-lane panels,
    /// whole and cut panels, step counts below, at and past a multiple of eight: each lane
    /// holds its element, lanes past the rows zero, nothing past the panels written.
    fn check<const W: usize>() {
        for (rows, kc) in [
            (1usize, 1usize),
            (5, 7),
            (6, 8),
            (16, 16),
            (17, 9),
            (40, 29),
            (70, 64),
        ] {
            let (r, k) = (rows as isize, kc as isize);
            // (rs, ds): adjacent rows, contiguous steps (with a wider row stride), neither.
            for (rs, ds) in [(1, r + 3), (k + 5, 1), (2, 2 * r + 1)] {
                let len = ((rows - 1) as isize * rs + (kc - 1) as isize * ds + 1) as usize;
                let src: Vec<f32> = (0..len).map(|i| i as f32 + 0.5).collect();
                let padded = rows.next_multiple_of(W) * kc;
                let mut dst = vec![f32::NAN; padded + 3];
                unsafe { pack::<W>(rows, kc, src.as_ptr(), rs, ds, dst.as_mut_ptr()) };
                for q in 0..rows.div_ceil(W) {
                    for p in 0..kc {
                        for i in 0..W {
                            let row = q * W + i;
                            let want = if row < rows {
                                src[(row as isize * rs + p as isize * ds) as usize]
                            } else {
                                0.0
                            };
                            let got = dst[(q * kc + p) * W + i];
                            assert_eq!(
                                got, want,
                                "W {W} {rows}x{kc} rs {rs} ds {ds} [{q},{p},{i}]"
                            );
                        }
                    }
                }
                assert!(
                    dst[padded..].iter().all(|x| x.is_nan()),
                    "written past the panels"
                );
            }
        }
    }

    #[test]
    fn packs_every_layout_into_panels() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        check::<6>();
        check::<16>();
    }
}
