//! The AVX2 + FMA kernel: a 6 x 16 block of `c` in twelve 8-lane registers.

use std::arch::x86_64::*;

/// Rows of `c` one kernel call keeps in registers.
const MR: usize = 6;

#[target_feature(enable = "avx2,fma")]
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
        let wide = n - j >= 16;
        let mut i = 0;
        while i < m {
            let rows = (m - i).min(MR);
            let ap = a.offset(i as isize * rsa);
            let (bp, cp) = (b.add(j), c.add(i * ldc + j));
            macro_rules! tile {
                ($mr:literal) => {
                    if wide {
                        tile::<$mr, 2>(k, ap, rsa, csa, bp, ldb, cp, ldc, acc)
                    } else {
                        tile::<$mr, 1>(k, ap, rsa, csa, bp, ldb, cp, ldc, acc)
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
        j += if wide { 16 } else { 8 };
    }
}

/// One `R x (8 * V)` block of `c`, accumulated over all of `k` in registers.
#[target_feature(enable = "avx2,fma")]
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
    let mut r = [[_mm256_setzero_ps(); V]; R];
    if acc {
        for (i, ri) in r.iter_mut().enumerate() {
            for (v, rv) in ri.iter_mut().enumerate() {
                *rv = _mm256_loadu_ps(c.add(i * ldc + 8 * v));
            }
        }
    }
    let (mut ap, mut bp) = (a, b);
    for _ in 0..k {
        let mut bv = [_mm256_setzero_ps(); V];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = _mm256_loadu_ps(bp.add(8 * v));
        }
        for (i, ri) in r.iter_mut().enumerate() {
            let x = _mm256_set1_ps(*ap.offset(i as isize * rsa));
            for (rv, &bx) in ri.iter_mut().zip(&bv) {
                *rv = _mm256_fmadd_ps(x, bx, *rv);
            }
        }
        ap = ap.offset(csa);
        bp = bp.add(ldb);
    }
    for (i, ri) in r.iter().enumerate() {
        for (v, &rv) in ri.iter().enumerate() {
            _mm256_storeu_ps(c.add(i * ldc + 8 * v), rv);
        }
    }
}
