//! Transposition of a row-major `f32` matrix in 16 x 16 tiles: with AVX-512 a tile is sixteen
//! loads, a shuffle network and sixteen stores; elsewhere (and at the edges) one element at a
//! time. The transposed-operand product ([`super::transposed_rhs`]) runs it on every band of its
//! right operand, so a scalar loop would cost a third of the product.

use crate::cpu::CpuFeatures;

/// Rows and columns of one tile: 16 floats, one cache line per row read and per row written.
pub(crate) const TILE: usize = 16;

/// Copies the `rows x cols` matrix `src` (row stride `lds`) to `dst`, `cols x rows`
/// row-major.
///
/// # Safety
/// `src` must address `rows` rows of `lds >= cols` floats and `dst` `rows * cols` floats.
pub(crate) unsafe fn transpose_rows(
    rows: usize,
    cols: usize,
    src: *const f32,
    lds: usize,
    dst: *mut f32,
) {
    transpose_rows_with(CpuFeatures::detect().avx512f, rows, cols, src, lds, dst)
}

/// [`transpose_rows`], full tiles with AVX-512 when `avx512` (which the caller has checked).
unsafe fn transpose_rows_with(
    avx512: bool,
    rows: usize,
    cols: usize,
    src: *const f32,
    lds: usize,
    dst: *mut f32,
) {
    for i0 in (0..rows).step_by(TILE) {
        let i1 = (i0 + TILE).min(rows);
        for j0 in (0..cols).step_by(TILE) {
            let j1 = (j0 + TILE).min(cols);
            #[cfg(target_arch = "x86_64")]
            if avx512 && i1 - i0 == TILE && j1 - j0 == TILE {
                avx512::tile(src.add(i0 * lds + j0), lds, dst.add(j0 * rows + i0), rows);
                continue;
            }
            for j in j0..j1 {
                let out = dst.add(j * rows);
                for i in i0..i1 {
                    *out.add(i) = *src.add(i * lds + j);
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx512;
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Writes the transpose of the 16 x 16 tile at `src` (row stride `lds`) to `dst` (row
    /// stride `ldd`): pairs of rows interleaved by 32 bits, then by 64 bits, which leaves each
    /// 128-bit lane holding four rows of one column; two rounds of lane shuffles gather a
    /// column's four lanes.
    ///
    /// # Safety
    /// AVX-512F must be present; `src` and `dst` must address 16 rows of 16 floats.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile(src: *const f32, lds: usize, dst: *mut f32, ldd: usize) {
        let r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(src.add(i * lds)));
        // t[2i], t[2i+1]: rows 2i and 2i+1 interleaved, low and high halves of each lane.
        let mut t = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        // u[4i+c], lane l: column 4l+c of rows 4i..4i+4.
        let mut u = [_mm512_setzero_ps(); 16];
        let pd = _mm512_castps_pd;
        let ps = _mm512_castpd_ps;
        for i in 0..4 {
            let (a, b, c, d) = (t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]);
            u[4 * i] = ps(_mm512_unpacklo_pd(pd(a), pd(c)));
            u[4 * i + 1] = ps(_mm512_unpackhi_pd(pd(a), pd(c)));
            u[4 * i + 2] = ps(_mm512_unpacklo_pd(pd(b), pd(d)));
            u[4 * i + 3] = ps(_mm512_unpackhi_pd(pd(b), pd(d)));
        }
        for c in 0..4 {
            // Lanes 0 and 2 (columns c and 8+c), then 1 and 3 (4+c and 12+c), of the four
            // row groups.
            let v02 = _mm512_shuffle_f32x4::<0x88>(u[c], u[4 + c]);
            let w02 = _mm512_shuffle_f32x4::<0x88>(u[8 + c], u[12 + c]);
            let v13 = _mm512_shuffle_f32x4::<0xDD>(u[c], u[4 + c]);
            let w13 = _mm512_shuffle_f32x4::<0xDD>(u[8 + c], u[12 + c]);
            _mm512_storeu_ps(dst.add(c * ldd), _mm512_shuffle_f32x4::<0x88>(v02, w02));
            _mm512_storeu_ps(
                dst.add((8 + c) * ldd),
                _mm512_shuffle_f32x4::<0xDD>(v02, w02),
            );
            _mm512_storeu_ps(
                dst.add((4 + c) * ldd),
                _mm512_shuffle_f32x4::<0x88>(v13, w13),
            );
            _mm512_storeu_ps(
                dst.add((12 + c) * ldd),
                _mm512_shuffle_f32x4::<0xDD>(v13, w13),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both paths put every element where the transpose has it, for sizes that are and are
    /// not multiples of the tile, with a row stride wider than the row.
    #[test]
    fn transpose_rows_moves_every_element() {
        let wide = [false, CpuFeatures::detect().avx512f];
        for (rows, cols, lds) in [
            (1, 1, 1),
            (16, 16, 16),
            (32, 48, 53),
            (37, 53, 60),
            (300, 250, 250),
        ] {
            let src: Vec<f32> = (0..rows * lds).map(|i| i as f32).collect();
            for avx512 in wide {
                let mut dst = vec![f32::NAN; rows * cols];
                unsafe {
                    transpose_rows_with(avx512, rows, cols, src.as_ptr(), lds, dst.as_mut_ptr())
                };
                for i in 0..rows {
                    for j in 0..cols {
                        assert_eq!(
                            dst[j * rows + i],
                            src[i * lds + j],
                            "{rows}x{cols} avx512 {avx512} [{i},{j}]"
                        );
                    }
                }
            }
        }
    }
}
