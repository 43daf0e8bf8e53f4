//! The weight gradient of a Winograd-shaped convolution, by the transposed Winograd
//! algorithm: `dW[ky,kx,c,k] = sum_{n,y,x} X[n, y+ky-pad, x+kx-pad, c] * dY[n,y,x,k]`.
//!
//! The forward convolution computes each 2x2 output tile as `A^T [U . V] A` with
//! `U = G w G^T` and `V = B^T d B`, so the gradient of `sum <dY, Y>` with respect to `w` is
//! `G^T dU G` with `dU[xi][c][k] = sum over tiles V[xi][tile][c] * Yhat[xi][tile][k]` and
//! `Yhat = A dY A^T` (the 2x2 gradient tile, zeros past the edge). Per block of tiles:
//! transform the input tiles into `V[xi][t][c]` and the gradient tiles into `Yhat[xi][t][k]`,
//! then `dU[xi] += V[xi]^T * Yhat[xi]` (36 small products, `small_gemm.rs`).
//!
//! It is recognized from the labels JAX emits for this gradient, `f01b_i01o->01bf`: the lhs
//! is `X` as `[N, H, W, C]` (the images are its "feature" dimension, the channels its
//! "batch"), the rhs is `dY` as `[N, OH, OW, K]`, the window spans all of `dY` with stride
//! 1 and the forward padding, and the output's spatial size is the kernel `r x r`; the
//! output may be in any layout. Worker `w` takes a fixed range of blocks and accumulates its
//! own `dU`; the partial sums are added in worker order, so for a given thread count the
//! result is always the same.

use super::buffer::Addr;
use super::conv_shape::{f32_dims, plain_window, window_output};
use super::conv_winograd::{
    supported_kernel, tile_pixels, tiles_per_block, with_sizes, MIN_CHANNELS,
};
use super::host::{guarded, resolve, Status};
use super::parallel::{for_each_worker, Shared};
use super::small_gemm::{small_gemm, Simd, COLUMN_GROUP};
use super::winograd::Matrices;
#[cfg(target_arch = "x86_64")]
use super::winograd_tiles::Avx;
use super::winograd_tiles::{filter_tile, gradient_tile, input_tile, Portable, Vector, LANES};
use tessel_compiler::ir::{ArrayShape, Convolution};

/// Output tile size of the forward convolution (F(2x2, r x r)).
const TILE: usize = 2;

/// Scratch bytes a worker's block may use for `V` and `Yhat` (its `dU` comes on top).
const BLOCK_BYTES: usize = 512 << 10;

#[derive(Clone, Debug)]
pub struct WinogradFilterPlan {
    pub name: String,
    simd: Simd,
    r: usize,
    input: Addr,
    grad: Addr,
    output: Addr,
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
    /// Per worker `V[xi][t][c]`, `Yhat[xi][t][k_pad]`, `dU[xi][c][k_pad]`.
    scratch: Addr,
    worker_floats: usize,
    tiles_per_block: usize,
    workers: usize,
    zeros: Vec<f32>,
}

impl WinogradFilterPlan {
    /// Plans `output = conv(input, grad)` if it is the weight-gradient form described in the
    /// module comment; `None` otherwise (nothing is allocated then).
    pub fn new(
        name: &str,
        conv: &Convolution,
        input: (Addr, &ArrayShape),
        grad: (Addr, &ArrayShape),
        output: (Addr, &ArrayShape),
        threads: usize,
        alloc: &mut dyn FnMut(usize) -> Addr,
    ) -> Option<WinogradFilterPlan> {
        let (idims, gdims, odims) = (f32_dims(input.1)?, f32_dims(grad.1)?, f32_dims(output.1)?);
        let pads = plain_window(conv)?;
        let d = &conv.dims;
        if [&idims, &gdims, &odims].iter().any(|dims| dims.len() != 4)
            || (d.input_feature, d.input_batch) != (0, 3)
            || d.input_spatial != [1, 2]
            || (d.kernel_input_feature, d.kernel_output_feature) != (0, 3)
            || d.kernel_spatial != [1, 2]
            || d.output_spatial.len() != 2
        {
            return None;
        }
        let (batch, h, w, c) = (idims[0], idims[1], idims[2], idims[3]);
        let (oh, ow, k) = (gdims[1], gdims[2], gdims[3]);
        let od = [
            d.output_spatial[0] as usize,
            d.output_spatial[1] as usize,
            d.output_batch as usize,
            d.output_feature as usize,
        ];
        let r = odims[od[0]];
        // The window is as large as dY and slides over r x r positions of the padded X.
        let win = &conv.window.dims;
        let fits = |dim: usize, inp: usize, out: usize| {
            win[dim].size as usize == out && window_output(inp, pads[dim], out) == Some(r)
        };
        if !supported_kernel(r)
            || odims[od[1]] != r
            || c < MIN_CHANNELS
            || gdims[0] != batch
            || odims[od[2]] != c
            || odims[od[3]] != k
            || !fits(0, h, oh)
            || !fits(1, w, ow)
        {
            return None;
        }
        let n = TILE + r - 1;
        let k_pad = k.next_multiple_of(COLUMN_GROUP);
        let tiles_per_block = tiles_per_block(n, c + k_pad, BLOCK_BYTES);
        let tiles = batch * oh.div_ceil(TILE) * ow.div_ceil(TILE);
        let workers = threads.max(1).min(tiles.div_ceil(tiles_per_block));
        let worker_floats =
            (n * n * (tiles_per_block * (c + k_pad) + c * k_pad)).next_multiple_of(16);
        let scratch = alloc(worker_floats * workers * 4);
        let mut ostride = [0usize; 4];
        for (s, &dim) in ostride.iter_mut().zip(&od) {
            *s = odims[dim + 1..].iter().product();
        }
        Some(WinogradFilterPlan {
            name: name.to_string(),
            simd: Simd::detect(),
            r,
            input: input.0,
            grad: grad.0,
            output: output.0,
            batch,
            h,
            w,
            c,
            k,
            k_pad,
            oh,
            ow,
            pad_y: win[0].pad_low,
            pad_x: win[1].pad_low,
            ostride,
            scratch,
            worker_floats,
            tiles_per_block,
            workers,
            zeros: vec![0.0; c.max(k)],
        })
    }

    /// Runs the given code path instead of the detected one (tests of the portable path).
    #[cfg(test)]
    pub(crate) fn force_simd(&mut self, simd: Simd) {
        self.simd = simd;
    }

    /// # Safety
    /// `arena` must be the program's arena.
    pub unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        let x = Shared(resolve(self.input, arena) as *mut f32);
        let dy = Shared(resolve(self.grad, arena) as *mut f32);
        let out = resolve(self.output, arena) as *mut f32;
        let scratch = Shared(resolve(self.scratch, arena) as *mut f32);
        let tiles = self.batch * self.oh.div_ceil(TILE) * self.ow.div_ceil(TILE);
        let blocks = tiles.div_ceil(self.tiles_per_block);
        let workers = self.workers;
        with_sizes!(self.r, |N, R| {
            let du_floats = N * N * self.c * self.k_pad;
            let du_of = |wk: usize| scratch.get().add((wk + 1) * self.worker_floats - du_floats);
            for_each_worker(workers, |wk| {
                let buf = scratch.get().add(wk * self.worker_floats);
                let du = du_of(wk);
                let (b0, b1) = (blocks * wk / workers, blocks * (wk + 1) / workers);
                if b0 == b1 {
                    std::ptr::write_bytes(du, 0, du_floats);
                }
                for b in b0..b1 {
                    let t0 = b * self.tiles_per_block;
                    let count = self.tiles_per_block.min(tiles - t0);
                    self.dispatch_block::<N, R>(x.get(), dy.get(), buf, du, t0, count, b > b0);
                }
            });
            // The partial sums, in worker order.
            let total = du_of(0);
            for wk in 1..workers {
                let part = du_of(wk);
                for i in 0..du_floats {
                    *total.add(i) += *part.add(i);
                }
            }
            self.write_output::<N, R>(total, out);
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn dispatch_block<const N: usize, const R: usize>(
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
            Simd::Avx2Fma => self.block_avx2::<N, R>(x, dy, buf, du, t0, count, accumulate),
            _ => self.block::<N, R, Portable>(x, dy, buf, du, t0, count, accumulate),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block_avx2<const N: usize, const R: usize>(
        &self,
        x: *const f32,
        dy: *const f32,
        buf: *mut f32,
        du: *mut f32,
        t0: usize,
        count: usize,
        accumulate: bool,
    ) {
        self.block::<N, R, Avx>(x, dy, buf, du, t0, count, accumulate)
    }

    /// Tiles `t0..t0 + count` into `du` (overwritten unless `accumulate`).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<const N: usize, const R: usize, V: Vector>(
        &self,
        x: *const f32,
        dy: *const f32,
        buf: *mut f32,
        du: *mut f32,
        t0: usize,
        count: usize,
        accumulate: bool,
    ) {
        // The matrices as compile-time constants, so that their 0 / 1 / -1 entries fold.
        let mats: &'static Matrices<N, TILE, R> = const { &Matrices::standard() };
        let tpb = self.tiles_per_block;
        let (c, k_pad) = (self.c, self.k_pad);
        let v = buf;
        let yhat = buf.add(N * N * tpb * c);
        let (ty_n, tx_n) = (self.oh.div_ceil(TILE), self.ow.div_ceil(TILE));
        let zero = self.zeros.as_ptr();
        for tb in 0..count {
            let t = t0 + tb;
            let (img, ty, tx) = (t / (ty_n * tx_n), t / tx_n % ty_n, t % tx_n);
            let (oy, ox) = ((ty * TILE) as i64, (tx * TILE) as i64);
            let px = tile_pixels::<N>(
                x,
                img,
                [self.h, self.w],
                c,
                [oy - self.pad_y, ox - self.pad_x],
                zero,
            );
            input_tile::<N, V>(&mats.bt, &px, c, v.add(tb * c), tpb * c);
            let gp = tile_pixels::<TILE>(dy, img, [self.oh, self.ow], self.k, [oy, ox], zero);
            gradient_tile::<N, TILE, V>(&mats.at, &gp, self.k, yhat.add(tb * k_pad), tpb * k_pad);
        }
        for xi in 0..N * N {
            small_gemm(
                self.simd,
                c,
                k_pad,
                count,
                v.add(xi * tpb * c),
                1,
                c as isize,
                yhat.add(xi * tpb * k_pad),
                k_pad,
                du.add(xi * c * k_pad),
                k_pad,
                accumulate,
            );
        }
    }

    /// `dW = G^T dU G`, 8 output features at a time, stored through the output's strides.
    unsafe fn write_output<const N: usize, const R: usize>(&self, du: *const f32, out: *mut f32) {
        // The matrices as compile-time constants, so that their 0 / 1 / -1 entries fold.
        let mats: &'static Matrices<N, TILE, R> = const { &Matrices::standard() };
        let [sy, sx, sc, sk] = self.ostride;
        let plane = self.c * self.k_pad;
        for c in 0..self.c {
            for k0 in (0..self.k).step_by(LANES) {
                let w = (self.k - k0).min(LANES);
                let dw = filter_tile::<N, R, Portable>(&mats.g, du.add(c * self.k_pad + k0), plane);
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

/// Called by generated code: `plan` is a `*const WinogradFilterPlan` the executable keeps
/// alive.
///
/// # Safety
/// `plan` must point to a live `WinogradFilterPlan` and `arena` be the program's arena.
pub unsafe extern "C" fn winograd_filter_routine(
    plan: *const WinogradFilterPlan,
    arena: *mut u8,
) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}
