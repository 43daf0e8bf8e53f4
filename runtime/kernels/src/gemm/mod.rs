//! Matrix products: the choice between the `gemm` and `matrixmultiply` crates and the
//! threading ([`sgemm`], [`dgemm`]), tessel's own packed product where the `gemm` crate's
//! AVX2 kernel falls short (`packed`: wide, shallow products on AVX2 machines without
//! AVX-512), the integer product ([`igemm_wrapping`]), and the
//! register-blocked small GEMM of the Winograd routines ([`small`]), and products whose right
//! operand is stored transposed ([`transposed_rhs`]).
//!
//! Matrices are given by a pointer and two strides in elements (row, column), so a transposed
//! or strided operand costs nothing.

#[cfg(target_arch = "x86_64")]
mod packed;
pub mod small;
mod transpose;
pub mod transposed_rhs;

use crate::parallel::Shared;

/// The GEMM library behind dot and convolution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GemmBackend {
    /// The `gemm` crate (runtime-dispatched AVX2/FMA/AVX-512 kernels), or tessel's packed
    /// product for the products it serves on AVX2 machines without AVX-512.
    #[default]
    Gemm,
    /// The `matrixmultiply` crate.
    MatrixMultiply,
}

impl GemmBackend {
    pub fn parse(s: &str) -> Option<GemmBackend> {
        match s {
            "gemm" => Some(GemmBackend::Gemm),
            "matrixmultiply" => Some(GemmBackend::MatrixMultiply),
            _ => None,
        }
    }
}

/// Whether `sgemm` computes an `m x n x k` product with tessel's packed product (`packed`)
/// rather than the `gemm` crate.
pub(crate) fn packs_itself(m: usize, n: usize, k: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return packed::serves(m, n, k);
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// Products at least this large (`m * n * k`) use `threads` threads; smaller ones one.
pub(crate) const PARALLEL_PRODUCT: usize = 1 << 18;

/// `c = a * b` (or `c += a * b`) for f32 matrices given by pointers and strides in elements.
///
/// # Safety
/// The pointers must address `m x k`, `k x n` and `m x n` matrices with these strides.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm(
    backend: GemmBackend,
    threads: usize,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    c: *mut f32,
    rsc: isize,
    csc: isize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    *c.offset(i as isize * rsc + j as isize * csc) = 0.0;
                }
            }
        }
        return;
    }
    match backend {
        #[cfg(target_arch = "x86_64")]
        GemmBackend::Gemm if packs_itself(m, n, k) => packed::sgemm(
            threads, m, n, k, a, rsa, csa, b, rsb, csb, c, rsc, csc, accumulate,
        ),
        GemmBackend::Gemm => {
            let (a, b, c) = (Shared(a as *mut f32), Shared(b as *mut f32), Shared(c));
            let one = |m0: usize, m1: usize, n0: usize, n1: usize| {
                let (mi, ni) = (m0 as isize, n0 as isize);
                let (a, b, c) = (a.get() as *const f32, b.get() as *const f32, c.get());
                gemm::gemm(
                    m1 - m0,
                    n1 - n0,
                    k,
                    c.offset(mi * rsc + ni * csc),
                    csc,
                    rsc,
                    accumulate,
                    a.offset(mi * rsa),
                    csa,
                    rsa,
                    b.offset(ni * csb),
                    csb,
                    rsb,
                    1.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                )
            };
            if threads > 1 && (m * n * k) >= PARALLEL_PRODUCT {
                split_product(threads, m, n, k, &one);
            } else {
                one(0, m, 0, n);
            }
        }
        GemmBackend::MatrixMultiply => {
            let beta = if accumulate { 1.0 } else { 0.0 };
            matrixmultiply::sgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
        }
    }
}

/// Columns (or rows) of `c` a part of a split product starts on a multiple of: a 512-bit
/// register's f32 lanes, so no part cuts a register tile of the `gemm` crate's kernels.
const SPLIT_ALIGN: usize = 16;

/// Runs `part(m0, m1, n0, n1)`, the product of rows `m0..m1` and columns `n0..n1` of `c`, for
/// parts of the larger of `c`'s dimensions, several per thread and claimed as threads become
/// free ([`crate::parallel::for_each_range`]: on a shared CPU a descheduled thread's parts go
/// to the other), on the crate's workers (whose callers work too: the `gemm` crate's own
/// Rayon threading would wake two pool threads per product and leave the caller waiting).
/// Every element of `c` is still summed over the whole of `k` by one single-threaded product.
fn split_product(
    threads: usize,
    m: usize,
    n: usize,
    k: usize,
    part: &(dyn Fn(usize, usize, usize, usize) + Sync),
) {
    let long = m.max(n);
    // Parts of at least half the product worth splitting, so that a small product is not cut
    // into parts that cost more to claim and pack than to compute.
    let most_parts = (m * n * k / (PARALLEL_PRODUCT / 2)).max(1);
    let step = crate::parallel::chunk_len(long, threads, SPLIT_ALIGN)
        .max(long.div_ceil(most_parts).next_multiple_of(SPLIT_ALIGN));
    crate::parallel::for_each_range(long, step, threads, |lo, hi| {
        if n >= m {
            part(0, m, lo, hi)
        } else {
            part(lo, hi, 0, n)
        }
    });
}

/// `c = a * b` for f64 matrices, `c` row-major with `n` columns (the `gemm` crate, one thread).
///
/// # Safety
/// The pointers must address `m x k`, `k x n` and `m x n` matrices with these strides.
#[allow(clippy::too_many_arguments)]
pub unsafe fn dgemm(
    m: usize,
    n: usize,
    k: usize,
    a: *const f64,
    rsa: isize,
    csa: isize,
    b: *const f64,
    rsb: isize,
    csb: isize,
    c: *mut f64,
) {
    if m > 0 && n > 0 && k > 0 {
        gemm::gemm(
            m,
            n,
            k,
            c,
            1,
            n as isize,
            false,
            a,
            csa,
            rsa,
            b,
            csb,
            rsb,
            1.0f64,
            1.0f64,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    } else {
        for i in 0..m * n {
            *c.add(i) = 0.0;
        }
    }
}

/// `c = a * b` for 32-bit integer matrices with wrapping arithmetic (as XLA does), `c`
/// row-major with `n` columns. The same bits serve signed and unsigned operands.
///
/// # Safety
/// The pointers must address `m x k`, `k x n` and `m x n` matrices with these strides.
#[allow(clippy::too_many_arguments)]
pub unsafe fn igemm_wrapping(
    m: usize,
    n: usize,
    k: usize,
    a: *const i32,
    rsa: isize,
    csa: isize,
    b: *const i32,
    rsb: isize,
    csb: isize,
    c: *mut i32,
) {
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0i32;
            for p in 0..k {
                let x = *a.offset(i as isize * rsa + p as isize * csa);
                let y = *b.offset(p as isize * rsb + j as isize * csb);
                acc = acc.wrapping_add(x.wrapping_mul(y));
            }
            *c.add(i * n + j) = acc;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A split product (the MNIST step's dense-layer shapes, long in either dimension, with
    /// transposed and strided operands, storing and accumulating) gives bitwise the result
    /// of one thread, which matches a direct sum.
    #[test]
    fn split_products_equal_one_thread_bitwise() {
        for (m, n, k) in [
            (128, 128, 3136),
            (3136, 128, 128),
            (128, 3136, 128),
            (40, 700, 33),
        ] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 29) as f32 / 7.0 - 2.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 104729) % 31) as f32 / 9.0 - 1.5)
                .collect();
            for accumulate in [false, true] {
                let run = |threads: usize| {
                    // c has a row stride wider than n: a strided output.
                    let mut c = vec![0.25f32; m * (n + 3)];
                    unsafe {
                        // a transposed: element (i, p) at p * m + i.
                        sgemm(
                            GemmBackend::Gemm,
                            threads,
                            m,
                            n,
                            k,
                            a.as_ptr(),
                            1,
                            m as isize,
                            b.as_ptr(),
                            n as isize,
                            1,
                            c.as_mut_ptr(),
                            (n + 3) as isize,
                            1,
                            accumulate,
                        )
                    };
                    c
                };
                let one = run(1);
                for threads in [2, 3] {
                    let got = run(threads);
                    assert!(
                        one.iter()
                            .zip(&got)
                            .all(|(x, y)| x.to_bits() == y.to_bits()),
                        "{m}x{n}x{k} on {threads} threads differs from one thread"
                    );
                }
                for (i, j) in [(0, 0), (m - 1, n - 1), (m / 2, n / 3)] {
                    let sum: f64 = (0..k)
                        .map(|p| a[p * m + i] as f64 * b[p * n + j] as f64)
                        .sum();
                    let want = sum + if accumulate { 0.25 } else { 0.0 };
                    let got = one[i * (n + 3) + j] as f64;
                    assert!(
                        (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                        "{got} vs {want}"
                    );
                }
                // Padding between rows stays untouched.
                assert_eq!(one[n], 0.25);
            }
        }
    }

    /// Both libraries, storing and accumulating, with a transposed `a`, against a direct sum;
    /// and the integer product wraps.
    #[test]
    fn products_match_a_direct_sum() {
        let (m, n, k) = (7usize, 9usize, 11usize);
        let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 - 6.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.5).collect();
        // a stored transposed: element (i, p) at p * m + i.
        let want =
            |i: usize, j: usize| -> f32 { (0..k).map(|p| a[p * m + i] * b[p * n + j]).sum() };
        for backend in [GemmBackend::Gemm, GemmBackend::MatrixMultiply] {
            for accumulate in [false, true] {
                let mut c = vec![1.0f32; m * n];
                unsafe {
                    sgemm(
                        backend,
                        2,
                        m,
                        n,
                        k,
                        a.as_ptr(),
                        1,
                        m as isize,
                        b.as_ptr(),
                        n as isize,
                        1,
                        c.as_mut_ptr(),
                        n as isize,
                        1,
                        accumulate,
                    )
                };
                for i in 0..m {
                    for j in 0..n {
                        let w = want(i, j) + if accumulate { 1.0 } else { 0.0 };
                        assert_eq!(c[i * n + j], w, "{backend:?} acc {accumulate} [{i},{j}]");
                    }
                }
            }
        }
        let (x, y) = ([i32::MAX, 2], [2, 3]);
        let mut z = [0i32];
        unsafe { igemm_wrapping(1, 1, 2, x.as_ptr(), 2, 1, y.as_ptr(), 1, 1, z.as_mut_ptr()) };
        assert_eq!(z[0], i32::MAX.wrapping_mul(2).wrapping_add(6));
    }
}
