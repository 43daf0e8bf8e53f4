//! A register-blocked f32 matrix product for the many small products of a Winograd
//! convolution (tens of rows, columns and depth), where a general GEMM library's per-call
//! packing and dispatch cost as much as the arithmetic (see `docs/jit.md`, "Winograd").
//!
//! `c (m x n) = a (m x k) * b (k x n)` (or `+=`), with `a` read through any two strides (so a
//! transposed operand costs nothing), `b` and `c` row-major with a row stride, and `n` a
//! multiple of 8 (the callers pad their columns). With AVX2 and FMA the kernel keeps a 6 x 16
//! block of `c` in twelve registers and, per step of `k`, loads two vectors of `b` and
//! broadcasts six values of `a` (`avx2.rs`); with AVX-512, a 6 x 64 block in 24 registers
//! (`avx512.rs`); elsewhere a portable loop does the same arithmetic. The path is the
//! crate's one instruction-set choice, [`Isa`] (`TESSEL_CONV_ISA` forces one). AVX-512 is
//! taken wherever it exists: also on Zen 4, which splits 512-bit work into two halves, the
//! 6 x 64 kernel beats the AVX2 one through fewer loads and instructions per multiply-add
//! (docs/performance.md).

use crate::cpu::Isa;

/// Columns are processed in groups of this many; `n` must be a multiple of it.
pub(crate) const COLUMN_GROUP: usize = 8;

/// `c[i*ldc + j] (+)= sum_p a[i*rsa + p*csa] * b[p*ldb + j]` for `i < m`, `j < n`, `p < k`.
///
/// # Safety
/// The pointers must address the matrices with these strides; `n % COLUMN_GROUP == 0`;
/// `simd` must be what [`Isa::detect`] returned on this machine.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn small_gemm(
    simd: Isa,
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
        Isa::Avx2Fma => avx2::gemm(m, n, k, a, rsa, csa, b, ldb, c, ldc, accumulate),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::gemm(m, n, k, a, rsa, csa, b, ldb, c, ldc, accumulate),
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
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

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
        for simd in Isa::available() {
            for (m, n, k) in [
                (1, 8, 1),
                (7, 24, 5),
                (13, 40, 33),
                (6, 16, 64),
                (32, 64, 30),
                (18, 64, 32),
                (32, 56, 18),
                (6, 48, 7),
                (11, 104, 9),
                // One or two vectors of columns (16- and 32-channel Winograd products): tall
                // blocks, remainders split in two, a last short block.
                (16, 16, 16),
                (96, 16, 16),
                (13, 16, 96),
                (23, 16, 5),
                (33, 16, 2),
                (29, 32, 7),
                (17, 48, 4),
                (25, 40, 3),
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

    /// The AVX kernels give every element of `c` the bits of one fused multiply-add chain
    /// over `k` in order, from zero or from `c`, whatever block of rows it falls in (so the
    /// row blocking may change without changing a result).
    #[test]
    fn fused_paths_give_the_bits_of_an_in_order_chain() {
        let fused: Vec<Isa> = Isa::available()
            .into_iter()
            .filter(|s| *s != Isa::Portable)
            .collect();
        for simd in fused {
            for (m, n, k) in [
                (16, 16, 16),
                (96, 16, 16),
                (23, 16, 5),
                (29, 32, 7),
                (7, 72, 9),
            ] {
                let (a, b) = (data(m * k, 4), data(k * n, 5));
                for accumulate in [false, true] {
                    let before = data(m * n, 6);
                    let mut c = before.clone();
                    unsafe {
                        small_gemm(
                            simd,
                            m,
                            n,
                            k,
                            a.as_ptr(),
                            k as isize,
                            1,
                            b.as_ptr(),
                            n,
                            c.as_mut_ptr(),
                            n,
                            accumulate,
                        )
                    };
                    for i in 0..m {
                        for j in 0..n {
                            let start = if accumulate { before[i * n + j] } else { 0.0 };
                            let want =
                                (0..k).fold(start, |s, p| a[i * k + p].mul_add(b[p * n + j], s));
                            assert_eq!(
                                c[i * n + j].to_bits(),
                                want.to_bits(),
                                "{simd:?} {m}x{n}x{k} [{i}][{j}] accumulate {accumulate}"
                            );
                        }
                    }
                }
            }
        }
    }
}
