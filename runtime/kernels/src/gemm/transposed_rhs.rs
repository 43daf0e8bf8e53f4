//! A product whose right operand is stored transposed: `b` is `[n, k]` row-major, as a dense
//! layer's data gradient reads its kernel (`dot(dy, w)` with `rhs_contracting_dims={1}`).
//!
//! The `gemm` crate turns a row-major `c = a * b` into `c^T = b^T * a^T` and packs `b^T` in
//! column panels; from a `[n, k]` operand each panel gathers 48 rows `k` floats apart, and with
//! `k = 1024` those rows share their L1 sets (4 KiB apart). The MLP's `[256, 1024] x [1024,
//! 1024]^T` product ran at 0.42 of the rate of its untransposed twin (one thread, on-CPU
//! time); copying the whole of `b` to `[k, n]` first brought it to 0.62, the copy being a
//! memory-bound pass of its own.
//!
//! Here the product runs in bands of [`band_width`] columns of `c`: a band's rows of `b`
//! (contiguous, `k` floats each) are transposed into the running thread's own `k x band`
//! buffer, which stays in its L2 cache, and the `gemm` crate packs its panels from there. `b`
//! is read from memory once, as the untransposed twin reads it, and the transposition costs an
//! L2 pass. Every element of `c` is the `gemm` crate's sum over the whole of `k`, as the
//! product reading `b` in place sums it, so the bits are those of that product on any number
//! of threads.

use super::transpose::{transpose_rows, TILE};
use super::{sgemm, GemmBackend, PARALLEL_PRODUCT};
use crate::parallel::{for_each_share_on_slots, Shared};

/// Whether [`sgemm_transposed_rhs`] transposes `b` band by band for an `m x n x k` product:
/// for products at least `PARALLEL_PRODUCT` (2^18) large (in smaller ones the transposition would
/// cost more than the gathers it saves), except those tessel's packed product computes, whose
/// packing reads a transposed `b` in order already (`super::packed`).
pub fn copies_transposed_rhs(m: usize, n: usize, k: usize) -> bool {
    m * n * k >= PARALLEL_PRODUCT && !super::packs_itself(m, n, k)
}

/// Columns of `c` in one band at most: two of the `gemm` crate's 64-row AVX-512 panels (a
/// band that is not a multiple of 64 ends in a half-width kernel), and a `1024 x 128` buffer
/// (512 KiB) that leaves room in a 1 MiB L2 for the panels of `a`.
const MAX_BAND: usize = 128;

/// The columns of `c` in one band for `n` columns: [`MAX_BAND`], or for a narrow `c` a quarter
/// of it (a multiple of 16) so that two threads still share several bands. It depends on `n`
/// only, so the bands, and the bits, are the same for any number of threads.
fn band_width(n: usize) -> usize {
    n.div_ceil(4).next_multiple_of(TILE).min(MAX_BAND)
}

/// Floats of scratch [`sgemm_transposed_rhs`] needs on `threads` threads: one `k x band`
/// buffer per thread.
pub fn transposed_rhs_scratch_len(threads: usize, n: usize, k: usize) -> usize {
    threads.max(1) * k * band_width(n)
}

/// `c = a * b` (or `c += a * b`) where `b` is stored `[n, k]` with row stride `ldb`
/// (`b[p][j]` at `j * ldb + p`); `scratch` holds [`transposed_rhs_scratch_len`]`(threads, n,
/// k)` floats.
///
/// # Safety
/// The pointers must address `m x k` (strides `rsa`, `csa`), `n x ldb`, `m x n` (strides
/// `rsc`, `csc`) and the scratch's floats, the last not overlapping the others.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_transposed_rhs(
    threads: usize,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    csc: isize,
    accumulate: bool,
    scratch: *mut f32,
) {
    if m == 0 || n == 0 || k == 0 || super::packs_itself(m, n, k) {
        return sgemm(
            GemmBackend::Gemm,
            threads,
            m,
            n,
            k,
            a,
            rsa,
            csa,
            b,
            1,
            ldb as isize,
            c,
            rsc,
            csc,
            accumulate,
        );
    }
    let band = band_width(n);
    let bands = n.div_ceil(band);
    let threads = if m * n * k >= PARALLEL_PRODUCT {
        threads.max(1)
    } else {
        1
    };
    // With fewer bands than two per thread, the rows of `c` are cut too; each part
    // transposes its band itself (`k x band` floats against `2 x rows x band x k` flops).
    let row_parts = if bands >= 2 * threads {
        1
    } else {
        (2 * threads).div_ceil(bands).min(m.div_ceil(TILE))
    };
    let rows = m.div_ceil(row_parts);
    let row_parts = m.div_ceil(rows);
    let (a, b, c, scratch) = (
        Shared(a as *mut f32),
        Shared(b as *mut f32),
        Shared(c),
        Shared(scratch),
    );
    for_each_share_on_slots(bands * row_parts, threads, |slot, share| {
        let (j0, i0) = ((share / row_parts) * band, (share % row_parts) * rows);
        let (width, height) = (band.min(n - j0), rows.min(m - i0));
        let buffer = scratch.get().add(slot * k * band);
        let b = b.get() as *const f32;
        transpose_rows(width, k, b.add(j0 * ldb), ldb, buffer);
        sgemm(
            GemmBackend::Gemm,
            1,
            height,
            width,
            k,
            (a.get() as *const f32).offset(i0 as isize * rsa),
            rsa,
            csa,
            buffer,
            width as isize,
            1,
            c.get().offset(i0 as isize * rsc + j0 as isize * csc),
            rsc,
            csc,
            accumulate,
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 7919 + seed * 104729) % 61) as f32 / 8.0 - 3.5)
            .collect()
    }

    /// Bands depend on `n` only: the widest is two 64-column panels, a narrow `c` still has
    /// four bands, and the scratch is one band's buffer per thread.
    #[test]
    fn bands_depend_on_the_columns_only() {
        assert_eq!(band_width(1024), 128);
        assert_eq!(band_width(70), 32);
        assert_eq!(band_width(1), 16);
        assert_eq!(transposed_rhs_scratch_len(2, 1024, 1024), 2 * 128 * 1024);
        assert_eq!(transposed_rhs_scratch_len(0, 70, 19), 32 * 19);
    }

    /// The banded product gives bitwise the product reading `b` in place, on 1, 2 and 3
    /// threads, storing and accumulating, for sizes that are and are not multiples of the
    /// bands and tiles (one band cut by rows, single rows and columns, a `k` of 1) and the
    /// MLP's data gradient.
    #[test]
    fn equals_the_product_reading_b_in_place() {
        for (m, n, k) in [
            (256, 1024, 1024),
            (33, 70, 19),
            (5, 300, 257),
            (300, 17, 64),
            (1, 1000, 300),
            (700, 1, 400),
            (129, 200, 1),
            (2000, 40, 160),
        ] {
            let a = values(m * k, 2);
            let b = values(n * (k + 3), 3);
            let ldb = k + 3;
            for accumulate in [false, true] {
                for threads in [1, 2, 3] {
                    let mut want = vec![0.5f32; m * n];
                    let mut got = want.clone();
                    let mut scratch = vec![f32::NAN; transposed_rhs_scratch_len(threads, n, k)];
                    unsafe {
                        sgemm(
                            GemmBackend::Gemm,
                            threads,
                            m,
                            n,
                            k,
                            a.as_ptr(),
                            k as isize,
                            1,
                            b.as_ptr(),
                            1,
                            ldb as isize,
                            want.as_mut_ptr(),
                            n as isize,
                            1,
                            accumulate,
                        );
                        sgemm_transposed_rhs(
                            threads,
                            m,
                            n,
                            k,
                            a.as_ptr(),
                            k as isize,
                            1,
                            b.as_ptr(),
                            ldb,
                            got.as_mut_ptr(),
                            n as isize,
                            1,
                            accumulate,
                            scratch.as_mut_ptr(),
                        );
                    }
                    assert!(
                        want.iter()
                            .zip(&got)
                            .all(|(x, y)| x.to_bits() == y.to_bits()),
                        "{m}x{n}x{k} acc {accumulate} on {threads} threads"
                    );
                }
            }
        }
    }
}
