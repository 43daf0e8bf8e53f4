//! Winograd F(m x m, r x r) convolution (r = 3 or 5, output tiles m = 2..6): the transform
//! matrices ([`matrices`]) and their factoring by point pairs ([`factored`]),
//! the per-tile transforms vectorized over channels ([`tiles`]), the forward convolution
//! ([`forward`]) and its weight gradient by the transposed algorithm ([`filter_gradient`]).

pub mod factored;
pub mod filter_gradient;
pub mod forward;
pub(crate) mod matrices;
pub mod tiles;

use factored::FactoredMatrices;
use matrices::Matrices;
use tiles::Transform;

pub use filter_gradient::WinogradFilterGradient;
pub use forward::{KernelLayout, WinogradConv};

/// How the per-tile input and output transforms of [`WinogradConv`] sum. Both have the same
/// error against the direct sum; they round differently.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TransformOrder {
    /// Each row of the matrix summed from zero in column order. The forward convolution's
    /// rounding, kept because it decides exact max-pool ties downstream, and the conformance
    /// corpus's ties were matched against JAX with it (`tiles.rs`, `mat_vec`).
    #[default]
    RowByRow,
    /// Factored by the points' ± pairs ([`factored`]): for F(4x4, 5x5) about 40% fewer
    /// operations in the transforms. For outputs no comparison reads, such as a data gradient.
    Factored,
}

/// The input (`B^T`) and output (`A^T`) transforms of a forward block, as the compile-time
/// constant `STANDARD` of the implementing type, so the unrolled code folds their entries.
pub(crate) trait BlockTransforms<const N: usize, const M: usize, const R: usize>:
    Sized + 'static
{
    const STANDARD: &'static Self;
    fn bt(&self) -> &impl Transform<N, N>;
    fn at(&self) -> &impl Transform<M, N>;
}

impl<const N: usize, const M: usize, const R: usize> BlockTransforms<N, M, R>
    for Matrices<N, M, R>
{
    const STANDARD: &'static Self = &Matrices::standard();
    #[inline(always)]
    fn bt(&self) -> &impl Transform<N, N> {
        &self.bt
    }
    #[inline(always)]
    fn at(&self) -> &impl Transform<M, N> {
        &self.at
    }
}

impl<const N: usize, const M: usize, const R: usize> BlockTransforms<N, M, R>
    for FactoredMatrices<N, M, R>
{
    const STANDARD: &'static Self = &FactoredMatrices::standard();
    #[inline(always)]
    fn bt(&self) -> &impl Transform<N, N> {
        &self.bt
    }
    #[inline(always)]
    fn at(&self) -> &impl Transform<M, N> {
        &self.at
    }
}

/// The output tile used when none is asked for (F(2x2, r x r), the smallest error).
pub const DEFAULT_TILE: usize = 2;

/// Input channels below this are declined: the transforms work on 8 channels at a time, and
/// with one channel the Winograd products are too thin to pay for them. (The JIT's
/// convolution choice gives up to `conv_direct::MAX_CHANNELS` channels to the direct loops
/// first.)
pub(crate) const MIN_CHANNELS: usize = 2;

/// The kernel sizes with a transform.
pub(crate) fn supported_kernel(r: usize) -> bool {
    matches!(r, 3 | 5)
}

/// Whether F(m x m, r x r) has a routine: r = 3 and r = 5, each with m = 2 or 4.
/// (`matrices.rs` also derives F(3, 5) and F(6, 3); they are not compiled into routines,
/// since every fully unrolled size adds minutes to the crate's optimized build. F(3x3, 5x5)
/// was measured slower than both F(2x2) and F(4x4) in the b128 step, docs/jit.md.)
pub(crate) fn supported_tile(m: usize, r: usize) -> bool {
    matches!((m, r), (2 | 4, 3) | (2 | 4, 5))
}

/// Runs `$body` with `N`, `M`, `R` bound to the sizes of F(m, r) (one of [`supported_tile`];
/// anything else runs F(2, 5), so callers check first).
macro_rules! with_sizes {
    ($m:expr, $r:expr, |$n:ident, $mm:ident, $rr:ident| $body:expr) => {
        match ($m, $r) {
            (2, 3) => {
                const $n: usize = 4;
                const $mm: usize = 2;
                const $rr: usize = 3;
                $body
            }
            (4, 3) => {
                const $n: usize = 6;
                const $mm: usize = 4;
                const $rr: usize = 3;
                $body
            }
            (4, 5) => {
                const $n: usize = 8;
                const $mm: usize = 4;
                const $rr: usize = 5;
                $body
            }
            _ => {
                const $n: usize = 6;
                const $mm: usize = 2;
                const $rr: usize = 5;
                $body
            }
        }
    };
}
pub(crate) use with_sizes;

/// Tiles per block so that `n * n * tiles * floats_per_tile * 4` bytes fit the budget: a
/// multiple of 6 (the kernel's row block), at least 6 and at most 96.
pub(crate) fn tiles_per_block(n: usize, floats_per_tile: usize, budget: usize) -> usize {
    let t = budget / (n * n * floats_per_tile.max(1) * 4);
    (t / 6 * 6).clamp(6, 96)
}

/// Pointers to the `S x S` pixels (`ch` floats each) of image `img` of an NHWC array with
/// spatial size `hw`, starting at (`at[0]`, `at[1]`); pixels outside the image point to `zero`.
///
/// Plain loops with a branch-free path for tiles inside the image (most of them): with 16
/// channels a pixel is one AVX-512 vector, and 36 pointers per tile built through closures
/// (`std::array::from_fn`, not inlined there) cost 7% of a 32x32x16 forward convolution.
///
/// # Safety
/// `base` must address the whole array (only in-image pixels are computed from it).
#[inline(always)]
pub(crate) unsafe fn tile_pixels<const S: usize>(
    base: *const f32,
    img: usize,
    hw: [usize; 2],
    ch: usize,
    at: [i64; 2],
    zero: *const f32,
) -> [[*const f32; S]; S] {
    let mut px = [[zero; S]; S];
    let (h, w) = (hw[0] as i64, hw[1] as i64);
    let image = img * hw[0] * hw[1];
    if at[0] >= 0 && at[0] + S as i64 <= h && at[1] >= 0 && at[1] + S as i64 <= w {
        let first = base.add((image + at[0] as usize * hw[1] + at[1] as usize) * ch);
        for (j, row) in px.iter_mut().enumerate() {
            for (i, p) in row.iter_mut().enumerate() {
                *p = first.add((j * hw[1] + i) * ch);
            }
        }
        return px;
    }
    for (j, row) in px.iter_mut().enumerate() {
        let y = at[0] + j as i64;
        if y < 0 || y >= h {
            continue;
        }
        for (i, p) in row.iter_mut().enumerate() {
            let x = at[1] + i as i64;
            if x >= 0 && x < w {
                *p = base.add((image + y as usize * hw[1] + x as usize) * ch);
            }
        }
    }
    px
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pointer of a tile is the pixel's or `zero`, for tiles inside the image, across
    /// each edge and corner, and larger than the image.
    #[test]
    fn tile_pixels_point_at_the_pixels_or_at_zero() {
        let (n, h, w, ch) = (2usize, 5usize, 7usize, 3usize);
        let data = vec![0f32; n * h * w * ch];
        let zero = [0f32; 3];
        let (base, z) = (data.as_ptr(), zero.as_ptr());
        for img in 0..n {
            for y0 in -7i64..=6 {
                for x0 in -7i64..=8 {
                    let px = unsafe { tile_pixels::<6>(base, img, [h, w], ch, [y0, x0], z) };
                    for (j, row) in px.iter().enumerate() {
                        for (i, &p) in row.iter().enumerate() {
                            let (y, x) = (y0 + j as i64, x0 + i as i64);
                            let want = if y >= 0 && y < h as i64 && x >= 0 && x < w as i64 {
                                let at = ((img * h + y as usize) * w + x as usize) * ch;
                                base.wrapping_add(at)
                            } else {
                                z
                            };
                            assert_eq!(p, want, "image {img} tile at ({y0}, {x0}) [{j}][{i}]");
                        }
                    }
                }
            }
        }
    }
}
