//! The direct convolutions' tile (`tile.rs`) in AVX-512F: one instance per
//! `(rows, vectors)`; up to 14 rows x 2 vectors of 16 lanes = 28 accumulators + 2 `b`
//! vectors + one broadcast in the 32 `zmm` registers. The channel tail is a lane mask
//! (`k` register) on the last vector's loads and stores.
//!
//! On Zen 4 a 512-bit FMA runs as two 256-bit halves, so the peak is the AVX2 peak; the gain
//! is in what surrounds the FMAs: twice the accumulators per tile (a forward tile covers 14
//! pixels x 32 channels, so each weight vector is loaded once per 14 pixels instead of 6 and
//! each input value broadcast once instead of twice), half the loads and loop overhead.

use super::tile::{portable, Tile};
use std::arch::x86_64::*;

/// Picks the instance for the tile's rows and vectors.
///
/// # Safety
/// As `run_tile`; the machine must have AVX-512F.
pub(crate) unsafe fn dispatch(t: &Tile) {
    let vectors = t.lanes.div_ceil(16);
    macro_rules! pick {
        ($($r:literal)*) => {
            match (t.rows, vectors) {
                $(
                    ($r, 1) => tile::<$r, 1>(t),
                    ($r, 2) => tile::<$r, 2>(t),
                )*
                _ => portable(t),
            }
        };
    }
    pick!(1 2 3 4 5 6 7 8 9 10 11 12 13 14)
}

/// `R` rows of `V` vectors of 16 lanes; the last vector covers `t.lanes - 16 (V - 1)` lanes.
#[target_feature(enable = "avx512f")]
unsafe fn tile<const R: usize, const V: usize>(t: &Tile) {
    let tail = (t.lanes - 16 * (V - 1)).min(16);
    let mask: __mmask16 = if tail == 16 {
        0xffff
    } else {
        (1u16 << tail) - 1
    };
    let mut rows = [0isize; R];
    for (r, off) in rows.iter_mut().enumerate() {
        *off = r as isize * t.a_row;
    }
    for block in 0..t.blocks as isize {
        let a = t.a.offset(block * t.a_block);
        let dst = t.dst.offset(block * t.dst_block);
        block_sums::<R, V>(t, a, &rows, mask, dst);
    }
}

/// One block of a tile: the sums from `a` on, stored or added at `dst`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn block_sums<const R: usize, const V: usize>(
    t: &Tile,
    a: *const f32,
    rows: &[isize; R],
    mask: __mmask16,
    dst: *mut f32,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    let (mut a_o, mut b_o) = (a, t.b);
    for _ in 0..t.outer {
        let (mut a, mut b) = (a_o, b_o);
        for _ in 0..t.inner {
            let mut bv = [_mm512_setzero_ps(); V];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = if v == V - 1 {
                    _mm512_maskz_loadu_ps(mask, b.add(16 * v))
                } else {
                    _mm512_loadu_ps(b.add(16 * v))
                };
            }
            for r in 0..R {
                let s = _mm512_set1_ps(*a.offset(rows[r]));
                for v in 0..V {
                    acc[r][v] = _mm512_fmadd_ps(s, bv[v], acc[r][v]);
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
            let p = d.add(16 * v);
            let m = if v == V - 1 { mask } else { 0xffff };
            let x = if t.accumulate {
                _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), x)
            } else {
                x
            };
            let x = match t.bias {
                Some(bias) => _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias.add(16 * v))),
                None => x,
            };
            _mm512_mask_storeu_ps(p, m, x);
        }
    }
}
