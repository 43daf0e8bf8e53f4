//! The register-blocked inner kernel of the direct convolutions (`forward.rs`,
//! `weight_gradient.rs`), and the padded input rows they read.
//!
//! A [`Tile`] is an outer-product accumulation: `acc[r][j] += a_r(t) * b(t)[j]` over a
//! two-level step `t` (an outer and an inner count, each with its own pointer steps), where
//! `a_r(t)` is one scalar per row `r` (broadcast to all lanes) and `b(t)` a run of contiguous
//! floats (the output channels). The accumulators stay in registers for the whole tile; at
//! the end they are stored, or added, to `dst`, with a bias vector added last when the tile
//! has one (the bias add that follows a convolution, done in the same store).
//!
//! The instruction set is chosen at run time (`cpu::CpuFeatures`): AVX-512F
//! (`avx512.rs`, up to 14 rows x 32 channels), else AVX2+FMA
//! (`avx2.rs`, 6 rows x 16 channels), else a portable loop that computes the same
//! sums in the same order (separately rounded multiply and add instead of FMA).

use crate::cpu::Isa;

/// The most rows and channels of a tile on any instruction set.
const MOST_ROWS: usize = 14;
const MOST_LANES: usize = 32;

/// One tile's sources, steps and destination; pointer steps are in floats.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tile {
    /// Row 0's scalar source at step 0; row `r` reads `a + r * a_row`.
    pub a: *const f32,
    pub a_row: isize,
    /// The vector source (`lanes` contiguous floats) at step 0.
    pub b: *const f32,
    pub outer: usize,
    pub a_outer: isize,
    pub b_outer: isize,
    pub inner: usize,
    pub a_inner: isize,
    pub b_inner: isize,
    /// Row `r`'s result goes to `dst + r * dst_row` (`lanes` floats).
    pub dst: *mut f32,
    pub dst_row: isize,
    /// Rows, 1..=[`Isa::max_rows`].
    pub rows: usize,
    /// Channels, 1..=[`Isa::max_lanes`]; lanes past it are neither read from `b` nor written.
    pub lanes: usize,
    /// Add the sums to `dst` instead of storing them.
    pub accumulate: bool,
    /// `lanes` floats added to every row's result before it is written: `(sums) + bias`, or
    /// `(dst + sums) + bias` when accumulating, the roundings of a separate add afterwards.
    pub bias: Option<*const f32>,
    /// The tile is repeated `blocks` times (at least once), with `a` and `dst` moved by
    /// `a_block` and `dst_block` each time (one call for a whole run of output pixels).
    pub blocks: usize,
    pub a_block: isize,
    pub dst_block: isize,
}

/// What a tile may hold on each instruction set.
impl Isa {
    /// The most rows a tile may have: accumulators, `b` vectors and a broadcast fill the
    /// vector registers.
    pub(crate) fn max_rows(self) -> usize {
        match self {
            Isa::Avx512 => 14,
            Isa::Avx2Fma | Isa::Portable => 6,
        }
    }

    /// The most channels a tile may cover (two vectors).
    pub(crate) fn max_lanes(self) -> usize {
        match self {
            Isa::Avx512 => 32,
            Isa::Avx2Fma | Isa::Portable => 16,
        }
    }
}

/// Computes one tile.
///
/// # Safety
/// Every address the tile's steps reach must be readable (`a`, and `lanes` floats at `b`) or
/// writable (`lanes` floats per destination row); `isa` must be one this machine runs.
pub(crate) unsafe fn run_tile(isa: Isa, t: &Tile) {
    debug_assert!((1..=isa.max_rows()).contains(&t.rows));
    debug_assert!((1..=isa.max_lanes()).contains(&t.lanes));
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => super::avx512::dispatch(t),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => super::avx2::dispatch(t),
        _ => portable(t),
    }
}

/// The reference form of a tile: the same sums in the same order, one lane at a time.
///
/// # Safety
/// As [`run_tile`], with at most 14 rows and 32 channels.
pub(crate) unsafe fn portable(t: &Tile) {
    for block in 0..t.blocks as isize {
        portable_block(
            t,
            t.a.offset(block * t.a_block),
            t.dst.offset(block * t.dst_block),
        );
    }
}

unsafe fn portable_block(t: &Tile, a: *const f32, dst: *mut f32) {
    let mut acc = [[0f32; MOST_LANES]; MOST_ROWS];
    let (mut a_o, mut b_o) = (a, t.b);
    for _ in 0..t.outer {
        let (mut a, mut b) = (a_o, b_o);
        for _ in 0..t.inner {
            for (r, row) in acc.iter_mut().enumerate().take(t.rows) {
                let s = *a.offset(r as isize * t.a_row);
                for (j, x) in row.iter_mut().enumerate().take(t.lanes) {
                    *x += s * *b.add(j);
                }
            }
            a = a.offset(t.a_inner);
            b = b.offset(t.b_inner);
        }
        a_o = a_o.offset(t.a_outer);
        b_o = b_o.offset(t.b_outer);
    }
    for (r, row) in acc.iter().enumerate().take(t.rows) {
        let d = dst.offset(r as isize * t.dst_row);
        for (j, &x) in row.iter().enumerate().take(t.lanes) {
            let x = if t.accumulate { *d.add(j) + x } else { x };
            *d.add(j) = match t.bias {
                Some(bias) => x + *bias.add(j),
                None => x,
            };
        }
    }
}

/// Writes `rows` zero-padded input rows of one image into `dst` (`width` pixels of `channels`
/// floats each): band row `j` is input row `first_row + j` and band column `x` input column
/// `x - pad_left`; rows and columns outside the image are zeros.
///
/// # Safety
/// `image` must hold `height * image_width * channels` floats and `dst` `rows * width *
/// channels`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn fill_band(
    image: *const f32,
    height: usize,
    image_width: usize,
    channels: usize,
    first_row: isize,
    rows: usize,
    pad_left: isize,
    width: usize,
    dst: *mut f32,
) {
    let line = width * channels;
    // Band columns [lo, hi) come from the image; the rest are padding.
    let lo = pad_left.clamp(0, width as isize) as usize;
    let hi = (pad_left + image_width as isize).clamp(lo as isize, width as isize) as usize;
    let src_col = (lo as isize - pad_left) as usize;
    for j in 0..rows {
        let d = dst.add(j * line);
        let y = first_row + j as isize;
        if y < 0 || y >= height as isize || hi == lo {
            std::ptr::write_bytes(d, 0, line);
            continue;
        }
        std::ptr::write_bytes(d, 0, lo * channels);
        std::ptr::copy_nonoverlapping(
            image.add((y as usize * image_width + src_col) * channels),
            d.add(lo * channels),
            (hi - lo) * channels,
        );
        std::ptr::write_bytes(d.add(hi * channels), 0, (width - hi) * channels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::values;

    /// Every instance against the portable loop, storing and accumulating, with a guard band
    /// after each destination row that must stay untouched.
    #[test]
    fn simd_tiles_match_the_portable_loop() {
        let a = values(400, 1);
        let b = values(600, 2);
        for (isa, rows, lanes) in Isa::available().into_iter().flat_map(|isa| {
            (1..=isa.max_rows())
                .flat_map(move |rows| (1..=isa.max_lanes()).map(move |lanes| (isa, rows, lanes)))
        }) {
            {
                for (accumulate, bias) in [(false, None), (true, None), (false, Some(&b[500..]))] {
                    let dst_row = 36isize;
                    let mut got = values(MOST_ROWS * 36, 3);
                    let mut want = got.clone();
                    let mut t = Tile {
                        a: a.as_ptr(),
                        a_row: 3,
                        b: b.as_ptr(),
                        outer: 3,
                        a_outer: 40,
                        b_outer: 100,
                        inner: 5,
                        a_inner: 2,
                        b_inner: 17,
                        dst: got.as_mut_ptr(),
                        dst_row,
                        rows,
                        lanes,
                        accumulate,
                        bias: bias.map(|b| b.as_ptr()),
                        blocks: 2,
                        a_block: 11,
                        dst_block: 0,
                    };
                    unsafe { run_tile(isa, &t) };
                    t.dst = want.as_mut_ptr();
                    unsafe { portable(&t) };
                    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        // 15 products of values below 2 in magnitude: sums below 60.
                        assert!(
                            (g - w).abs() <= 60.0 * 16.0 * f32::EPSILON,
                            "{isa:?} rows {rows} lanes {lanes} acc {accumulate} bias {} [{i}]: {g} vs {w}",
                            bias.is_some()
                        );
                        if (i as isize % dst_row) as usize >= lanes {
                            assert_eq!(g.to_bits(), w.to_bits(), "guard lane {i} written");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn band_rows_are_padded_with_zeros() {
        // A 2 x 3 image of 2 channels; band of 4 rows from row -1, 6 columns, 2 on the left.
        let image: Vec<f32> = (1..=12).map(|v| v as f32).collect();
        let mut band = vec![f32::NAN; 4 * 6 * 2];
        unsafe { fill_band(image.as_ptr(), 2, 3, 2, -1, 4, 2, 6, band.as_mut_ptr()) };
        let row = |j: usize| band[j * 12..(j + 1) * 12].to_vec();
        assert_eq!(row(0), vec![0.0; 12]);
        let z = [0.0f32; 4];
        assert_eq!(row(1), [&z[..], &image[0..6], &[0.0, 0.0]].concat());
        assert_eq!(row(2), [&z[..], &image[6..12], &[0.0, 0.0]].concat());
        assert_eq!(row(3), vec![0.0; 12]);
        // Negative padding crops: column 0 of the band is input column 1.
        let mut band = vec![f32::NAN; 2 * 2];
        unsafe { fill_band(image.as_ptr(), 2, 3, 2, 0, 1, -1, 2, band.as_mut_ptr()) };
        assert_eq!(band, vec![3.0, 4.0, 5.0, 6.0]);
    }
}
