//! A register-blocked f32 matrix product for the many small products of a Winograd
//! convolution (tens of rows, columns and depth), where a general GEMM library's per-call
//! packing and dispatch cost as much as the arithmetic (see `docs/jit.md`, "Winograd").
//!
//! `c (m x n) = a (m x k) * b (k x n)` (or `+=`), with `a` read through any two strides (so a
//! transposed operand costs nothing), `b` and `c` row-major with a row stride, and `n` a
//! multiple of 8 (the callers pad their columns). With AVX2 and FMA the kernel keeps a 6 x 16
//! block of `c` in twelve registers and, per step of `k`, loads two vectors of `b` and
//! broadcasts six values of `a`; elsewhere a portable loop does the same arithmetic.

/// Which code the Winograd routines run, detected once when a plan is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simd {
    /// x86-64 with AVX2 and FMA: 8-lane vectors, fused multiply-add.
    Avx2Fma,
    /// Anything else: plain loops the compiler vectorizes for the baseline target.
    Portable,
}

impl Simd {
    pub fn detect() -> Simd {
        if cfg!(target_arch = "x86_64") && crate::cpu::CpuFeatures::detect().avx2_fma() {
            Simd::Avx2Fma
        } else {
            Simd::Portable
        }
    }
}

/// Columns are processed in groups of this many; `n` must be a multiple of it.
pub const COLUMN_GROUP: usize = 8;

/// `c[i*ldc + j] (+)= sum_p a[i*rsa + p*csa] * b[p*ldb + j]` for `i < m`, `j < n`, `p < k`.
///
/// # Safety
/// The pointers must address the matrices with these strides; `n % COLUMN_GROUP == 0`;
/// `simd` must be what [`Simd::detect`] returned on this machine.
#[allow(clippy::too_many_arguments)]
pub unsafe fn small_gemm(
    simd: Simd,
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
    accumulate: bool,
) {
    debug_assert!(n.is_multiple_of(COLUMN_GROUP));
    match simd {
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2Fma => avx2::gemm(m, n, k, a, rsa, csa, b, ldb, c, ldc, accumulate),
        _ => portable(m, n, k, a, rsa, csa, b, ldb, c, ldc, accumulate),
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn portable(
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
    accumulate: bool,
) {
    for i in 0..m {
        let row = std::slice::from_raw_parts_mut(c.add(i * ldc), n);
        if !accumulate {
            row.fill(0.0);
        }
        for p in 0..k {
            let x = *a.offset(i as isize * rsa + p as isize * csa);
            let brow = std::slice::from_raw_parts(b.add(p * ldb), n);
            for (cj, &bj) in row.iter_mut().zip(brow) {
                *cj += x * bj;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Rows of `c` one kernel call keeps in registers.
    const MR: usize = 6;

    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm(
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).max(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 1000) as f32 / 500.0 - 1.0
            })
            .collect()
    }

    fn reference(
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        rsa: usize,
        csa: usize,
        b: &[f32],
    ) -> Vec<f64> {
        let mut c = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| a[i * rsa + p * csa] as f64 * b[p * n + j] as f64)
                    .sum();
            }
        }
        c
    }

    #[test]
    fn both_paths_match_a_reference_for_odd_shapes_and_strides() {
        for simd in [Simd::detect(), Simd::Portable] {
            for (m, n, k) in [
                (1, 8, 1),
                (7, 24, 5),
                (13, 40, 33),
                (6, 16, 64),
                (32, 64, 30),
            ] {
                for transposed in [false, true] {
                    let a = data(m * k, 1);
                    let b = data(k * n, 2);
                    let (rsa, csa) = if transposed { (1, m) } else { (k, 1) };
                    let want = reference(m, n, k, &a, rsa, csa, &b);
                    let mut c = data(m * n, 3);
                    let before = c.clone();
                    unsafe {
                        small_gemm(
                            simd,
                            m,
                            n,
                            k,
                            a.as_ptr(),
                            rsa as isize,
                            csa as isize,
                            b.as_ptr(),
                            n,
                            c.as_mut_ptr(),
                            n,
                            false,
                        )
                    };
                    for (x, w) in c.iter().zip(&want) {
                        assert!((*x as f64 - w).abs() < 1e-4, "{simd:?} {m}x{n}x{k}");
                    }
                    let mut c2 = before.clone();
                    unsafe {
                        small_gemm(
                            simd,
                            m,
                            n,
                            k,
                            a.as_ptr(),
                            rsa as isize,
                            csa as isize,
                            b.as_ptr(),
                            n,
                            c2.as_mut_ptr(),
                            n,
                            true,
                        )
                    };
                    for ((x, w), b0) in c2.iter().zip(&want).zip(&before) {
                        assert!((*x as f64 - w - *b0 as f64).abs() < 1e-4);
                    }
                }
            }
        }
    }
}
