//! The weight gradient of a Winograd-shaped convolution, by the transposed Winograd
//! algorithm: `dW[ky,kx,c,k] = sum_{n,y,x} X[n, y+ky-pad, x+kx-pad, c] * dY[n,y,x,k]`.
//!
//! The forward convolution computes each 2x2 output tile as `A^T [U . V] A` with
//! `U = G w G^T` and `V = B^T d B`, so the gradient of `sum <dY, Y>` with respect to `w` is
//! `G^T dU G` with `dU[xi][c][k] = sum over tiles V[xi][tile][c] * Yhat[xi][tile][k]` and
//! `Yhat = A dY A^T` (the 2x2 gradient tile, zeros past the edge). Per block of tiles:
//! transform the input tiles into `V[t][xi][c]` and the gradient tiles into `Yhat[t][xi][k]`,
//! then `dU[xi] += V[xi]^T * Yhat[xi]` (36 small products, `gemm/small/`).
//!
//! It is planned from the geometry of the forward convolution (`X` as `[N, H, W, C]`, an
//! `r x r` window, `K` output channels, so `dY` is `[N, OH, OW, K]`); the output `dW` may be
//! in any layout (its strides). The JIT recognizes it from the labels JAX emits for this
//! gradient, `f01b_i01o->01bf`. The blocks are cut into [`SHARES`] fixed ranges, each summed
//! into its own `dU` by whichever worker takes it, and the partial sums are added in range
//! order, so the result is bitwise the same for any thread count. During a block's products
//! the next block's images of `X` and `dY` are prefetched into L2 (`prefetch.rs`): in the
//! step `dY` arrives from DRAM, written by the pool gradient with streaming stores.
//!
//! Its transforms run factored by the points' ± pairs (`factored.rs`): the same error as
//! row by row with fewer operations. Unlike the forward's rounding, a weight gradient's
//! decides no max-pool tie downstream.

use super::factored::FactoredMatrices;
use super::tiles::{filter_tile, gradient_tile, input_tile, Portable, Vector, LANES};
#[cfg(target_arch = "x86_64")]
use super::tiles::{Avx, Avx512};
use super::{
    supported_kernel, supported_tile, tile_pixels, tiles_per_block, with_sizes, DEFAULT_TILE,
    MIN_CHANNELS,
};
use crate::cpu::Isa;
use crate::gemm::small::{small_gemm, COLUMN_GROUP};
use crate::geometry::Conv2dGeometry;
use crate::parallel::{chunk_len, for_each_range, for_each_share, Shared};
use crate::prefetch::prefetch_part_l2;
use crate::scratch::{floats, Scratch};
use crate::KernelError;

/// Scratch bytes a share's block may use for `V` and `Yhat` (its `dU` comes on top).
const BLOCK_BYTES: usize = 768 << 10;

/// Partial sums of `dU`, whatever the thread count: the result depends on how the sum is
/// cut, so the cut is fixed. Up to this many threads work at once; each share costs its
/// scratch (`V`, `Yhat`, `dU`: 1.3 MB at the MNIST conv-2 shapes) and one addition of its
/// `dU` (128K floats there) to the total.
const SHARES: usize = 4;

/// A planned weight gradient.
#[derive(Clone, Debug)]
pub struct WinogradFilterGradient {
    simd: Isa,
    /// Output tile size `m` of F(m x m, r x r).
    m: usize,
    r: usize,
    batch: usize,
    h: usize,
    w: usize,
    c: usize,
    k: usize,
    k_pad: usize,
    oh: usize,
    ow: usize,
    pad_y: i64,
    pad_x: i64,
    /// Output strides (elements) of ky, kx, c, k.
    ostride: [usize; 4],
    /// Per share `V[t][xi][c]`, `Yhat[t][xi][k_pad]`, `dU[xi][c][k_pad]` (scratch offset).
    shares_at: usize,
    scratch: Scratch,
    share_floats: usize,
    tiles_per_block: usize,
    /// Threads that work at once (at most `shares`).
    workers: usize,
    /// Fixed ranges of blocks, each with its own partial `dU` ([`SHARES`], fewer when there
    /// are fewer blocks).
    shares: usize,
    zeros: Vec<f32>,
}

impl WinogradFilterGradient {
    /// Plans the weight gradient of the forward convolution `geometry` on `threads` workers,
    /// `dW` stored with strides `output_strides` (floats) of its rows, columns, input and
    /// output channels; declines windows other than 3x3 and 5x5, and fewer than
    /// [`MIN_CHANNELS`] input channels.
    pub fn new(
        geometry: &Conv2dGeometry,
        output_strides: [usize; 4],
        threads: usize,
    ) -> Result<WinogradFilterGradient, KernelError> {
        Self::with_tile(geometry, output_strides, threads, DEFAULT_TILE)
    }

    /// As [`Self::new`] with `m x m` tiles of dY (see [`super::supported_tile`]).
    pub fn with_tile(
        geometry: &Conv2dGeometry,
        output_strides: [usize; 4],
        threads: usize,
        m: usize,
    ) -> Result<WinogradFilterGradient, KernelError> {
        let g = geometry;
        let r = g.window[0];
        if !supported_kernel(r) || g.window[1] != r {
            return Err(KernelError::declined(
                "winograd filter gradient",
                "window is not 3x3 or 5x5",
            ));
        }
        if !supported_tile(m, r) {
            return Err(KernelError::declined(
                "winograd filter gradient",
                "no transform for this tile",
            ));
        }
        if g.channels < MIN_CHANNELS {
            return Err(KernelError::declined(
                "winograd filter gradient",
                "fewer than MIN_CHANNELS channels",
            ));
        }
        let Some([oh, ow]) = g.output_size().filter(|_| g.is_nonempty()) else {
            return Err(KernelError::declined("winograd filter gradient", "empty"));
        };
        let (batch, c, k) = (g.batch, g.channels, g.out_channels);
        let n = m + r - 1;
        let k_pad = k.next_multiple_of(COLUMN_GROUP);
        let tiles_per_block = tiles_per_block(n, c + k_pad, BLOCK_BYTES);
        let tiles = batch * oh.div_ceil(m) * ow.div_ceil(m);
        let shares = SHARES.min(tiles.div_ceil(tiles_per_block));
        let workers = threads.clamp(1, shares);
        let share_floats =
            (n * n * (tiles_per_block * (c + k_pad) + c * k_pad)).next_multiple_of(16);
        let mut scratch = Scratch::default();
        Ok(WinogradFilterGradient {
            simd: Isa::detect(),
            m,
            r,
            batch,
            h: g.height,
            w: g.width,
            c,
            k,
            k_pad,
            oh,
            ow,
            pad_y: g.padding[0].0 as i64,
            pad_x: g.padding[1].0 as i64,
            ostride: output_strides,
            shares_at: scratch.region(share_floats * shares * 4),
            scratch,
            share_floats,
            tiles_per_block,
            workers,
            shares,
            zeros: vec![0.0; c.max(k)],
        })
    }

    #[cfg(test)]
    /// Runs `simd` instead of the detected code (tests and benches; the machine must have it).
    pub(crate) fn with_simd(mut self, simd: Isa) -> WinogradFilterGradient {
        self.simd = simd;
        self
    }

    /// The tile `m` of dY (F(m x m, r x r)) this plan runs.
    pub fn tile(&self) -> usize {
        self.m
    }

    /// Bytes of scratch memory [`Self::run`] needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// `output = dW` of the forward convolution of `input` whose output gradient is `grad`.
    ///
    /// # Safety
    /// `input` must hold `[batch, height, width, channels]` and `grad` `[batch, out_h, out_w,
    /// out_channels]` floats (row-major), `output` every element its strides reach, and
    /// `scratch` [`Self::scratch_bytes`] bytes, 64-byte aligned.
    pub unsafe fn run(
        &self,
        input: *const f32,
        grad: *const f32,
        output: *mut f32,
        scratch: *mut u8,
    ) {
        let x = Shared(input as *mut f32);
        let dy = Shared(grad as *mut f32);
        let out = output;
        let scratch = Shared(floats(scratch, self.shares_at));
        let tiles = self.batch * self.oh.div_ceil(self.m) * self.ow.div_ceil(self.m);
        let blocks = tiles.div_ceil(self.tiles_per_block);
        let (workers, shares) = (self.workers, self.shares);
        with_sizes!(self.m, self.r, |N, M, R| {
            let du_floats = N * N * self.c * self.k_pad;
            let du_of = |s: usize| scratch.get().add((s + 1) * self.share_floats - du_floats);
            for_each_share(shares, workers, |s| {
                let buf = scratch.get().add(s * self.share_floats);
                let du = du_of(s);
                let (b0, b1) = (blocks * s / shares, blocks * (s + 1) / shares);
                if b0 == b1 {
                    std::ptr::write_bytes(du, 0, du_floats);
                }
                for b in b0..b1 {
                    let t0 = b * self.tiles_per_block;
                    let count = self.tiles_per_block.min(tiles - t0);
                    self.dispatch_block::<N, M, R>(x.get(), dy.get(), buf, du, t0, count, b > b0);
                }
            });
            // The partial sums, in share order; the elements cut between the workers.
            let total = Shared(du_of(0));
            let elems = chunk_len(du_floats, workers, 16);
            for_each_range(du_floats, elems, workers, |i0, i1| {
                for s in 1..shares {
                    let part = du_of(s);
                    for i in i0..i1 {
                        *total.get().add(i) += *part.add(i);
                    }
                }
            });
            self.write_output::<N, M, R>(total.get(), out);
        });
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn dispatch_block<const N: usize, const M: usize, const R: usize>(
        &self,
        x: *const f32,
        dy: *const f32,
        buf: *mut f32,
        du: *mut f32,
        t0: usize,
        count: usize,
        accumulate: bool,
    ) {
        match self.simd {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => self.block_avx2::<N, M, R>(x, dy, buf, du, t0, count, accumulate),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => self.block_avx512::<N, M, R>(x, dy, buf, du, t0, count, accumulate),
            _ => self.block::<N, M, R, Portable>(x, dy, buf, du, t0, count, accumulate),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block_avx2<const N: usize, const M: usize, const R: usize>(
        &self,
        x: *const f32,
        dy: *const f32,
        buf: *mut f32,
        du: *mut f32,
        t0: usize,
        count: usize,
        accumulate: bool,
    ) {
        self.block::<N, M, R, Avx>(x, dy, buf, du, t0, count, accumulate)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block_avx512<const N: usize, const M: usize, const R: usize>(
        &self,
        x: *const f32,
        dy: *const f32,
        buf: *mut f32,
        du: *mut f32,
        t0: usize,
        count: usize,
        accumulate: bool,
    ) {
        self.block::<N, M, R, Avx512>(x, dy, buf, du, t0, count, accumulate)
    }

    /// Tiles `t0..t0 + count` into `du` (overwritten unless `accumulate`).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<const N: usize, const M: usize, const R: usize, V: Vector>(
        &self,
        x: *const f32,
        dy: *const f32,
        buf: *mut f32,
        du: *mut f32,
        t0: usize,
        count: usize,
        accumulate: bool,
    ) {
        // The factored matrices as compile-time constants, so that their entries and pairs fold.
        let mats: &'static FactoredMatrices<N, M, R> = const { &FactoredMatrices::standard() };
        let tpb = self.tiles_per_block;
        let (c, k_pad) = (self.c, self.k_pad);
        // Tile-major (`V[t][xi][c]`, `Yhat[t][xi][k]`): each tile's transform writes one
        // contiguous run; the products step over tiles with a stride.
        let v = buf;
        let yhat = buf.add(N * N * tpb * c);
        // Strides of a tile and of a point in V and Yhat.
        let (vt, vx) = (N * N * c, c);
        let (yt, yx) = (N * N * k_pad, k_pad);
        let (ty_n, tx_n) = (self.oh.div_ceil(M), self.ow.div_ceil(M));
        let zero = self.zeros.as_ptr();
        for tb in 0..count {
            let t = t0 + tb;
            let (img, ty, tx) = (t / (ty_n * tx_n), t / tx_n % ty_n, t % tx_n);
            let (oy, ox) = ((ty * M) as i64, (tx * M) as i64);
            let px = tile_pixels::<N>(
                x,
                img,
                [self.h, self.w],
                c,
                [oy - self.pad_y, ox - self.pad_x],
                zero,
            );
            input_tile::<N, V>(&mats.bt, &px, c, v.add(tb * vt), vx);
            let gp = tile_pixels::<M>(dy, img, [self.oh, self.ow], self.k, [oy, ox], zero);
            gradient_tile::<N, M, V>(&mats.a, &gp, self.k, yhat.add(tb * yt), yx);
        }
        // The next block's images, into L2 a part per product: the transforms above start on
        // them at once, and dY was just written with streaming stores (`prefetch.rs`).
        let next = (t0 + tpb) / (ty_n * tx_n)..(t0 + 2 * tpb).div_ceil(ty_n * tx_n);
        let x_image = self.h * self.w * c;
        let dy_image = self.oh * self.ow * self.k;
        let next_x = x.wrapping_add(next.start * x_image) as *const u8;
        let next_dy = dy.wrapping_add(next.start * dy_image) as *const u8;
        let (x_end, dy_end) = (
            x.wrapping_add(self.batch * x_image) as *const u8,
            dy.wrapping_add(self.batch * dy_image) as *const u8,
        );
        let images = next.len();
        for xi in 0..N * N {
            prefetch_part_l2(next_x, images * x_image * 4, x_end, xi, N * N);
            prefetch_part_l2(next_dy, images * dy_image * 4, dy_end, xi, N * N);
            small_gemm(
                self.simd,
                c,
                k_pad,
                count,
                v.add(xi * vx),
                1,
                vt as isize,
                yhat.add(xi * yx),
                yt,
                du.add(xi * c * k_pad),
                k_pad,
                accumulate,
            );
        }
    }

    /// `dW = G^T dU G`, 8 output features at a time, stored through the output's strides.
    unsafe fn write_output<const N: usize, const M: usize, const R: usize>(
        &self,
        du: *const f32,
        out: *mut f32,
    ) {
        // The factored matrices as compile-time constants, so that their entries and pairs fold.
        let mats: &'static FactoredMatrices<N, M, R> = const { &FactoredMatrices::standard() };
        let [sy, sx, sc, sk] = self.ostride;
        let plane = self.c * self.k_pad;
        for c in 0..self.c {
            for k0 in (0..self.k).step_by(LANES) {
                let w = (self.k - k0).min(LANES);
                let dw =
                    filter_tile::<N, R, Portable>(&mats.gt, du.add(c * self.k_pad + k0), plane);
                for (ky, row) in dw.iter().enumerate() {
                    for (kx, v) in row.iter().enumerate() {
                        let mut lanes = [0f32; LANES];
                        v.store(lanes.as_mut_ptr(), LANES);
                        let base = out.add(ky * sy + kx * sx + c * sc + k0 * sk);
                        for (l, &val) in lanes.iter().take(w).enumerate() {
                            *base.add(l * sk) = val;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{scratch_block, values};

    /// The partial sums are cut into fixed shares, so 1, 2 and 3 threads give the same bits
    /// (they did not before: each worker summed its own range). More blocks than shares, an
    /// uneven last block, and a padded output-channel count.
    #[test]
    fn every_thread_count_gives_the_same_bits() {
        let g = Conv2dGeometry {
            batch: 45,
            height: 14,
            width: 14,
            channels: 8,
            window: [5, 5],
            out_channels: 20,
            padding: [(2, 2), (2, 2)],
        };
        let (r, c, o) = (5, g.channels, g.out_channels);
        let x = values(g.batch * g.height * g.width * c, 21);
        let dy = values(g.batch * 14 * 14 * o, 22);
        let run = |threads: usize| {
            let plan = WinogradFilterGradient::new(&g, [r * c * o, c * o, o, 1], threads).unwrap();
            assert!(plan.shares == SHARES, "{} shares", plan.shares);
            let mut dw = vec![f32::NAN; r * r * c * o];
            let mut scratch = scratch_block(plan.scratch_bytes());
            unsafe {
                plan.run(
                    x.as_ptr(),
                    dy.as_ptr(),
                    dw.as_mut_ptr(),
                    scratch.as_mut_ptr() as *mut u8,
                )
            };
            dw
        };
        let one = run(1);
        assert!(one.iter().all(|v| v.is_finite()));
        for threads in [2, 3] {
            let got = run(threads);
            assert!(
                one.iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{threads} threads differ from one"
            );
        }
    }
}
