//! The AVX-512 kernel: a 6 x 64 block of `c` in twenty-four 16-lane registers (of 32), so
//! per step of `k` it loads four vectors of `b` and broadcasts six values of `a` for 24
//! fused multiply-adds, against two loads and six broadcasts per 12 in the AVX2 kernel.
//! Narrower column remainders take taller blocks, up to 16 x 16 and 12 x 32 (see
//! [`rows_per_block`]), and a last group of 8 the AVX2 kernel.

use std::arch::x86_64::*;

/// Rows of `c` one kernel call keeps in registers with four vectors of columns.
const MR: usize = 6;

/// How `a` is strided, as a constant of [`tile`], so the compiler folds a unit stride into
/// the addresses: any strides, unit rows (`rsa == 1`: a transposed operand, the weight
/// gradient's `V^T`) or unit columns (`csa == 1`: the forward's `V`).
const ANY: u8 = 0;
const UNIT_ROWS: u8 = 1;
const UNIT_COLUMNS: u8 = 2;

/// The rows of the next block of `c`, with `left` rows left and `vectors` 16-column vectors
/// per row. Six rows of one or two vectors are only 6 or 12 accumulators, too few chains to
/// hide the fused multiply-add's latency on two pipes, and one load of `b` per 6 or 12
/// multiply-adds. With 16 or 32 columns (a Winograd product of 16 or 32 channels) blocks
/// are up to 16 rows of one vector or 12 of two (16 and 24 accumulators), 8 of either with
/// unit columns (each row's address then stays in a register, see [`tile`]); a remainder
/// between one and two blocks is split evenly (16 rows as 8 + 8, not 12 + 4). Every element
/// of `c` is the same sum in the same order whatever the block, so the bits do not change.
pub(super) fn rows_per_block(left: usize, vectors: usize, unit_columns: bool) -> usize {
    let most = match vectors {
        1 | 2 if unit_columns => 8,
        1 => 16,
        2 => 12,
        _ => MR,
    };
    if left <= most {
        left
    } else if left < 2 * most && vectors <= 2 {
        left.div_ceil(2)
    } else {
        most
    }
}

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
    let strides = if rsa == 1 {
        UNIT_ROWS
    } else if csa == 1 {
        UNIT_COLUMNS
    } else {
        ANY
    };
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
            let rows = rows_per_block(m - i, vectors, strides == UNIT_COLUMNS);
            let ap = a.offset(i as isize * rsa);
            let (bp, cp) = (b.add(j), c.add(i * ldc + j));
            macro_rules! tile {
                ($s:ident, $v:literal: $($mr:literal)*) => {
                    match rows {
                        $($mr => tile::<$mr, $v, $s>(k, ap, rsa, csa, bp, ldb, cp, ldc, acc),)*
                        _ => tile::<1, $v, $s>(k, ap, rsa, csa, bp, ldb, cp, ldc, acc),
                    }
                };
            }
            match (vectors, strides) {
                (4, UNIT_ROWS) => tile!(UNIT_ROWS, 4: 6 5 4 3 2),
                (4, _) => tile!(ANY, 4: 6 5 4 3 2),
                (2, UNIT_ROWS) => tile!(UNIT_ROWS, 2: 12 11 10 9 8 7 6 5 4 3 2),
                (2, UNIT_COLUMNS) => tile!(UNIT_COLUMNS, 2: 8 7 6 5 4 3 2),
                (2, _) => tile!(ANY, 2: 12 11 10 9 8 7 6 5 4 3 2),
                (_, UNIT_ROWS) => tile!(UNIT_ROWS, 1: 16 15 14 13 12 11 10 9 8 7 6 5 4 3 2),
                (_, UNIT_COLUMNS) => tile!(UNIT_COLUMNS, 1: 8 7 6 5 4 3 2),
                _ => tile!(ANY, 1: 16 15 14 13 12 11 10 9 8 7 6 5 4 3 2),
            }
            i += rows;
        }
        j += 16 * vectors;
    }
}

/// Steps of `k` per group in [`tile`] with unit columns and `vectors` vectors of columns.
const fn steps_per_group(vectors: usize) -> usize {
    match vectors {
        1 => 4,
        2 => 2,
        _ => 1,
    }
}

/// One `R x (16 * V)` block of `c`, accumulated over all of `k` in registers.
///
/// A step of `k` at a time, the compiler reaches the rows' values of `a` through a chain of
/// pointer adds, one per row and step (with runtime strides), which holds a 16-row block of
/// one vector to one multiply-add per cycle. With unit rows (`S == UNIT_ROWS`) the rows are
/// constant offsets from one pointer. With unit columns (`S == UNIT_COLUMNS`) the steps go
/// in groups of `P` (`steps_per_group`): the group's `P * V` vectors of `b` are loaded, then
/// each row takes its `P` consecutive values of `a`, constant offsets from the row's
/// address. Each element still sums its `k` products in order, so the bits are the same
/// for every `S`, `R` and grouping.
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const R: usize, const V: usize, const S: u8>(
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
    let rsa = if S == UNIT_ROWS { 1 } else { rsa };
    let csa = if S == UNIT_COLUMNS { 1 } else { csa };
    let mut r = [[_mm512_setzero_ps(); V]; R];
    if acc {
        for (i, ri) in r.iter_mut().enumerate() {
            for (v, rv) in ri.iter_mut().enumerate() {
                *rv = _mm512_loadu_ps(c.add(i * ldc + 16 * v));
            }
        }
    }
    let (mut ap, mut bp) = (a, b);
    macro_rules! steps {
        ($p:expr) => {{
            const P: usize = $p;
            let mut bv = [[_mm512_setzero_ps(); V]; P];
            for (q, bq) in bv.iter_mut().enumerate() {
                for (v, x) in bq.iter_mut().enumerate() {
                    *x = _mm512_loadu_ps(bp.add(q * ldb + 16 * v));
                }
            }
            for (i, ri) in r.iter_mut().enumerate() {
                let row = ap.offset(i as isize * rsa);
                for (q, bq) in bv.iter().enumerate() {
                    let x = _mm512_set1_ps(*row.offset(q as isize * csa));
                    for (rv, &bx) in ri.iter_mut().zip(bq) {
                        *rv = _mm512_fmadd_ps(x, bx, *rv);
                    }
                }
            }
            ap = ap.offset(P as isize * csa);
            bp = bp.add(P * ldb);
        }};
    }
    let group = if S == UNIT_COLUMNS {
        steps_per_group(V)
    } else {
        1
    };
    for _ in 0..k / group {
        match (S == UNIT_COLUMNS, V) {
            (true, 1) => steps!(4),
            (true, 2) => steps!(2),
            _ => steps!(1),
        }
    }
    for _ in 0..k % group {
        steps!(1);
    }
    for (i, ri) in r.iter().enumerate() {
        for (v, &rv) in ri.iter().enumerate() {
            _mm512_storeu_ps(c.add(i * ldc + 16 * v), rv);
        }
    }
}
