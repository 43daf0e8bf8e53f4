//! A product whose right operand is stored transposed: `b` is `[n, k]` row-major, as a dense
//! layer's data gradient reads its kernel (`dot(dy, w)` with `rhs_contracting_dims={1}`).
//!
//! The `gemm` crate turns a row-major `c = a * b` into `c^T = b^T * a^T` and packs `b^T` in
//! column panels; from a `[n, k]` operand each panel gathers 48 rows `k` floats apart, and with
//! `k = 1024` those rows share their L1 sets (4 KiB apart). The MLP's `[256, 1024] x [1024,
//! 1024]^T` product ran at 0.64 of the rate of its untransposed twin (one thread, on-CPU
//! time). Here `b` is first copied to `[k, n]` in cache-sized tiles (a 4 MiB pass, shared by
//! the threads), and the product runs on the copy, at 0.85 of the twin's rate: the same sums
//! in the same order, so the same bits.

use super::{sgemm, GemmBackend, PARALLEL_PRODUCT};
use crate::parallel::{chunk_len, for_each_range, Shared};

/// Products at least this large (`m * n * k`) copy a transposed `b` first; smaller ones read
/// it in place (the copy would cost more than the gathers it saves).
pub const COPY_TRANSPOSED_RHS: usize = PARALLEL_PRODUCT;

/// Rows and columns of one tile of the copy: 16 x 16 floats, one cache line per row read
/// and per row written.
const TILE: usize = 16;

/// `c = a * b` (or `c += a * b`) where `b` is stored `[n, k]` with row stride `ldb`
/// (`b[p][j]` at `j * ldb + p`); `scratch` holds `k * n` floats for the copy of `b`.
///
/// # Safety
/// The pointers must address `m x k` (strides `rsa`, `csa`), `n x ldb`, `m x n` (strides
/// `rsc`, `csc`) and `k * n` floats, the last not overlapping the others.
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
    if m == 0 || n == 0 || k == 0 {
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
    transpose_rows(threads, n, k, b, ldb, scratch);
    sgemm(
        GemmBackend::Gemm,
        threads,
        m,
        n,
        k,
        a,
        rsa,
        csa,
        scratch,
        n as isize,
        1,
        c,
        rsc,
        csc,
        accumulate,
    )
}

/// Copies the `rows x cols` matrix `src` (row stride `lds`) to `dst`, `cols x rows`
/// row-major, in [`TILE`]-square tiles, bands of `TILE` source rows shared by the threads.
///
/// # Safety
/// `src` must address `rows` rows of `lds >= cols` floats and `dst` `rows * cols` floats.
pub(crate) unsafe fn transpose_rows(
    threads: usize,
    rows: usize,
    cols: usize,
    src: *const f32,
    lds: usize,
    dst: *mut f32,
) {
    let (src, dst) = (Shared(src as *mut f32), Shared(dst));
    let threads = if rows * cols >= 1 << 16 { threads } else { 1 };
    let band = chunk_len(rows, threads, TILE);
    for_each_range(rows, band, threads, |r0, r1| {
        let (src, dst) = (src.get() as *const f32, dst.get());
        for i0 in (r0..r1).step_by(TILE) {
            let i1 = (i0 + TILE).min(r1);
            for j0 in (0..cols).step_by(TILE) {
                let j1 = (j0 + TILE).min(cols);
                for j in j0..j1 {
                    let out = dst.add(j * rows);
                    for i in i0..i1 {
                        *out.add(i) = *src.add(i * lds + j);
                    }
                }
            }
        }
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

    /// The copy puts every element where the transpose has it, for sizes that are and are not
    /// multiples of the tile, with a row stride wider than the row.
    #[test]
    fn transpose_rows_moves_every_element() {
        for (rows, cols, lds) in [(1, 1, 1), (16, 16, 16), (37, 53, 60), (300, 250, 250)] {
            let src = values(rows * lds, 1);
            for threads in [1, 2, 3] {
                let mut dst = vec![f32::NAN; rows * cols];
                unsafe { transpose_rows(threads, rows, cols, src.as_ptr(), lds, dst.as_mut_ptr()) };
                for i in 0..rows {
                    for j in 0..cols {
                        assert_eq!(
                            dst[j * rows + i],
                            src[i * lds + j],
                            "{rows}x{cols} [{i},{j}]"
                        );
                    }
                }
            }
        }
    }

    /// The product with the copied `b` gives bitwise the product reading `b` in place, on 1 and
    /// 2 threads, storing and accumulating, including odd sizes and the MLP's data gradient.
    #[test]
    fn equals_the_product_reading_b_in_place() {
        for (m, n, k) in [
            (256, 1024, 1024),
            (33, 70, 19),
            (5, 300, 257),
            (300, 17, 64),
        ] {
            let a = values(m * k, 2);
            let b = values(n * (k + 3), 3);
            let ldb = k + 3;
            for accumulate in [false, true] {
                for threads in [1, 2] {
                    let mut want = vec![0.5f32; m * n];
                    let mut got = want.clone();
                    let mut scratch = vec![0f32; k * n];
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
