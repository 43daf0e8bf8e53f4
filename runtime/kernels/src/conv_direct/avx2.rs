//! The direct convolutions' tile (`tile.rs`) in AVX2+FMA: one instance per
//! `(rows, vectors, masked)`, so the loops over rows and vectors unroll and 6 x 2
//! accumulators + 2 `b` vectors + one broadcast use 15 of the 16 `ymm` registers. A tail of
//! fewer than 8 channels is read and written with `vmaskmovps`.

use super::tile::{portable, Tile};
use std::arch::x86_64::*;

/// `MASK_SOURCE[8 - k..16 - k]` is the mask of the first `k` lanes.
static MASK_SOURCE: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

/// Picks the instance for the tile's rows, vectors and tail.
///
/// # Safety
/// As `run_tile`; the machine must have AVX2 and FMA.
pub(crate) unsafe fn dispatch(t: &Tile) {
    let vectors = t.lanes.div_ceil(8);
    let masked = !t.lanes.is_multiple_of(8);
    macro_rules! pick {
        ($($r:literal)*) => {
            match (t.rows, vectors, masked) {
                $(
                    ($r, 1, false) => tile::<$r, 1, false>(t),
                    ($r, 1, true) => tile::<$r, 1, true>(t),
                    ($r, 2, false) => tile::<$r, 2, false>(t),
                    ($r, 2, true) => tile::<$r, 2, true>(t),
                )*
                _ => portable(t),
            }
        };
    }
    pick!(1 2 3 4 5 6)
}

/// `R` rows of `V` vectors; with `MASKED` the last vector covers `t.lanes % 8` lanes.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const R: usize, const V: usize, const MASKED: bool>(t: &Tile) {
    let tail = t.lanes - 8 * (V - 1);
    let mask = _mm256_loadu_si256(MASK_SOURCE.as_ptr().add(8 - tail.min(8)) as *const __m256i);
    let mut rows = [0isize; R];
    for (r, off) in rows.iter_mut().enumerate() {
        *off = r as isize * t.a_row;
    }
    for block in 0..t.blocks as isize {
        let a = t.a.offset(block * t.a_block);
        let dst = t.dst.offset(block * t.dst_block);
        block_sums::<R, V, MASKED>(t, a, &rows, mask, dst);
    }
}

/// One block of a tile: the sums from `a` on, stored or added at `dst`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn block_sums<const R: usize, const V: usize, const MASKED: bool>(
    t: &Tile,
    a: *const f32,
    rows: &[isize; R],
    mask: __m256i,
    dst: *mut f32,
) {
    let mut acc = [[_mm256_setzero_ps(); V]; R];
    let (mut a_o, mut b_o) = (a, t.b);
    for _ in 0..t.outer {
        let (mut a, mut b) = (a_o, b_o);
        for _ in 0..t.inner {
            let mut bv = [_mm256_setzero_ps(); V];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = if MASKED && v == V - 1 {
                    _mm256_maskload_ps(b.add(8 * v), mask)
                } else {
                    _mm256_loadu_ps(b.add(8 * v))
                };
            }
            for r in 0..R {
                let s = _mm256_broadcast_ss(&*a.offset(rows[r]));
                for v in 0..V {
                    acc[r][v] = _mm256_fmadd_ps(s, bv[v], acc[r][v]);
                }
            }
            a = a.offset(t.a_inner);
            b = b.offset(t.b_inner);
        }
        a_o = a_o.offset(t.a_outer);
        b_o = b_o.offset(t.b_outer);
    }
    for (r, row) in acc.iter().enumerate() {
        let d = dst.offset(r as isize * t.dst_row);
        for (v, &x) in row.iter().enumerate() {
            let p = d.add(8 * v);
            let last_masked = MASKED && v == V - 1;
            let x = if t.accumulate {
                let old = if last_masked {
                    _mm256_maskload_ps(p, mask)
                } else {
                    _mm256_loadu_ps(p)
                };
                _mm256_add_ps(old, x)
            } else {
                x
            };
            let x = match t.bias {
                Some(bias) if last_masked => {
                    _mm256_add_ps(x, _mm256_maskload_ps(bias.add(8 * v), mask))
                }
                Some(bias) => _mm256_add_ps(x, _mm256_loadu_ps(bias.add(8 * v))),
                None => x,
            };
            if last_masked {
                _mm256_maskstore_ps(p, mask, x);
            } else {
                _mm256_storeu_ps(p, x);
            }
        }
    }
}
