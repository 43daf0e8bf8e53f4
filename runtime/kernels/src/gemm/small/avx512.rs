//! The AVX-512 kernel: a 6 x 64 block of `c` in twenty-four 16-lane registers (of 32), so
//! per step of `k` it loads four vectors of `b` and broadcasts six values of `a` for 24
//! fused multiply-adds, against two loads and six broadcasts per 12 in the AVX2 kernel.
//! Narrower column remainders take 6 x 32 and 6 x 16 blocks, and a last group of 8 the AVX2
//! kernel.

use std::arch::x86_64::*;

/// Rows of `c` one kernel call keeps in registers.
const MR: usize = 6;

#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    acc: bool,
) {
    let mut j = 0;
    while j < n {
        let vectors = ((n - j) / 16).min(4);
        if vectors == 0 {
            // The last 8 columns (n is a multiple of 8).
            super::avx2::gemm(m, n - j, k, a, rsa, csa, b.add(j), ldb, c.add(j), ldc, acc);
            return;
        }
        let vectors = if vectors == 3 { 2 } else { vectors };
        let mut i = 0;
        while i < m {
            let rows = (m - i).min(MR);
            let ap = a.offset(i as isize * rsa);
            let (bp, cp) = (b.add(j), c.add(i * ldc + j));
            macro_rules! tile {
                ($mr:literal) => {
                    match vectors {
                        4 => tile::<$mr, 4>(k, ap, rsa, csa, bp, ldb, cp, ldc, acc),
                        2 => tile::<$mr, 2>(k, ap, rsa, csa, bp, ldb, cp, ldc, acc),
                        _ => tile::<$mr, 1>(k, ap, rsa, csa, bp, ldb, cp, ldc, acc),
                    }
                };
            }
            match rows {
                6 => tile!(6),
                5 => tile!(5),
                4 => tile!(4),
                3 => tile!(3),
                2 => tile!(2),
                _ => tile!(1),
            }
            i += rows;
        }
        j += 16 * vectors;
    }
}

/// One `R x (16 * V)` block of `c`, accumulated over all of `k` in registers.
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const R: usize, const V: usize>(
    k: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    acc: bool,
) {
    let mut r = [[_mm512_setzero_ps(); V]; R];
    if acc {
        for (i, ri) in r.iter_mut().enumerate() {
            for (v, rv) in ri.iter_mut().enumerate() {
                *rv = _mm512_loadu_ps(c.add(i * ldc + 16 * v));
            }
        }
    }
    let (mut ap, mut bp) = (a, b);
    for _ in 0..k {
        let mut bv = [_mm512_setzero_ps(); V];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = _mm512_loadu_ps(bp.add(16 * v));
        }
        for (i, ri) in r.iter_mut().enumerate() {
            let x = _mm512_set1_ps(*ap.offset(i as isize * rsa));
            for (rv, &bx) in ri.iter_mut().zip(&bv) {
                *rv = _mm512_fmadd_ps(x, bx, *rv);
            }
        }
        ap = ap.offset(csa);
        bp = bp.add(ldb);
    }
    for (i, ri) in r.iter().enumerate() {
        for (v, &rv) in ri.iter().enumerate() {
            _mm512_storeu_ps(c.add(i * ldc + 16 * v), rv);
        }
    }
}
