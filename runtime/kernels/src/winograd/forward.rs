//! Winograd F(m x m, r x r) convolution for 2-D, stride-1, undilated, one-group convolutions
//! with a square `r x r` kernel (r = 3 or 5, `m` a plan parameter): for r = 5, 36 products per
//! 4 outputs with m = 2 and 64 per 16 with m = 4, where the direct algorithm needs 100 per
//! output (see `matrices.rs` for the transforms).
//!
//! Layouts: input `[N, H, W, C]` and output `[N, OH, OW, O]` (`b01f` labels, channels
//! contiguous), the kernel in any layout (it is read once per call, through its strides).
//! Any padding, also asymmetric or negative, and any H and W: tiles at the edges read zeros
//! outside the image and write only their valid outputs. Everything else declines.
//!
//! Per call: the kernel is transformed once into `U[xi][c][o]` (xi < 36 for F(2,5); the
//! columns padded to a multiple of 8). Then the output tiles are cut into blocks of
//! `tiles_per_block`; each worker takes blocks in turn and, per block, transforms the input
//! tiles into `V[t][xi][c]`, computes the 36 products `M[xi] = V[xi] * U[xi]` with a
//! register-blocked kernel (`gemm/small/`) and transforms `M` back into output tiles. The
//! block's scratch stays in L2. Each output is written by exactly one block, so the result
//! does not depend on the number of workers.

use super::factored::FactoredMatrices;
use super::matrices::Matrices;
use super::tiles::{input_tile, kernel_tile, output_tile, Portable, Vector, LANES};
#[cfg(target_arch = "x86_64")]
use super::tiles::{Avx, Avx512};
use super::{
    supported_kernel, supported_tile, tile_pixels, tiles_per_block, with_sizes, BlockTransforms,
    TransformOrder, DEFAULT_TILE, MIN_CHANNELS,
};
use crate::cpu::Isa;
use crate::gemm::small::{small_gemm, COLUMN_GROUP};
use crate::geometry::Conv2dGeometry;
use crate::parallel::{chunk_len, for_each_range, for_each_worker, Shared};
use crate::pooling::PoolEpilogue;
use crate::scratch::{floats, Scratch};
use crate::KernelError;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Scratch bytes a worker's block may use (V and M), so that they stay in the L2 cache.
const BLOCK_BYTES: usize = 768 << 10;

/// Where the kernel's taps are: strides in floats of its rows, columns, input channels and
/// output channels, and whether the window is reversed along the rows and the columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLayout {
    pub strides: [usize; 4],
    pub reversed: [bool; 2],
}

impl KernelLayout {
    /// `[kh, kw, in, out]` row-major, not reversed.
    pub fn hwio(geometry: &Conv2dGeometry) -> KernelLayout {
        let (c, o) = (geometry.channels, geometry.out_channels);
        KernelLayout {
            strides: [geometry.window[1] * c * o, c * o, o, 1],
            reversed: [false, false],
        }
    }
}

/// One block of tiles for a worker: tiles `t0..t0 + count` of input `x` with the transformed
/// kernel `u` (and `bias`) into output `y`, through the worker's scratch `buf`.
#[derive(Clone, Copy)]
struct Block {
    x: *const f32,
    u: *const f32,
    bias: Option<*const f32>,
    y: *mut f32,
    /// The image `y` starts at: 0 for the output, the block's first image for a worker's own
    /// buffer (the output discarded, `PoolEpilogue::discard_output`).
    y_image: usize,
    buf: *mut f32,
    t0: usize,
    count: usize,
}

/// A planned forward convolution.
#[derive(Clone, Debug)]
pub struct WinogradConv {
    simd: Isa,
    /// Output tile size `m` of F(m x m, r x r).
    m: usize,
    r: usize,
    batch: usize,
    h: usize,
    w: usize,
    c: usize,
    o: usize,
    o_pad: usize,
    oh: usize,
    ow: usize,
    pad_y: i64,
    pad_x: i64,
    kernel: KernelLayout,
    /// How the blocks' input and output transforms sum.
    order: TransformOrder,
    /// `U[xi][c][o_pad]` (scratch offset).
    u: usize,
    /// Per worker `V[t][xi][c]` then `M[t][xi][o_pad]`, `worker_floats` apart (scratch offset).
    blocks: usize,
    scratch: Scratch,
    worker_floats: usize,
    tiles_per_block: usize,
    workers: usize,
    /// A pixel of zeros for the taps outside the image.
    zeros: Vec<f32>,
}

impl WinogradConv {
    /// Plans `geometry` with the kernel at `kernel` on `threads` workers, with F(2x2, r x r);
    /// declines windows other than 3x3 and 5x5, and fewer than [`MIN_CHANNELS`] input
    /// channels.
    pub fn new(
        geometry: &Conv2dGeometry,
        kernel: KernelLayout,
        threads: usize,
    ) -> Result<WinogradConv, KernelError> {
        Self::with_tile(geometry, kernel, threads, DEFAULT_TILE)
    }

    /// As [`Self::new`] with output tiles of `m x m` (see [`super::supported_tile`]).
    pub fn with_tile(
        geometry: &Conv2dGeometry,
        kernel: KernelLayout,
        threads: usize,
        m: usize,
    ) -> Result<WinogradConv, KernelError> {
        let g = geometry;
        let r = g.window[0];
        if !supported_kernel(r) || g.window[1] != r {
            return Err(KernelError::declined(
                "winograd",
                "window is not 3x3 or 5x5",
            ));
        }
        if !supported_tile(m, r) {
            return Err(KernelError::declined(
                "winograd",
                "no transform for this tile",
            ));
        }
        if g.channels < MIN_CHANNELS {
            return Err(KernelError::declined(
                "winograd",
                "fewer than MIN_CHANNELS channels",
            ));
        }
        let Some([oh, ow]) = g.output_size().filter(|_| g.is_nonempty()) else {
            return Err(KernelError::declined("winograd", "empty"));
        };
        let (batch, c, o) = (g.batch, g.channels, g.out_channels);
        let n = m + r - 1;
        let o_pad = o.next_multiple_of(COLUMN_GROUP);
        let tiles_per_block = tiles_per_block(n, c + o_pad, BLOCK_BYTES);
        let tiles = batch * oh.div_ceil(m) * ow.div_ceil(m);
        let workers = threads.max(1).min(tiles.div_ceil(tiles_per_block));
        let worker_floats = (n * n * tiles_per_block * (c + o_pad)).next_multiple_of(16);
        let mut scratch = Scratch::default();
        Ok(WinogradConv {
            simd: Isa::detect(),
            m,
            r,
            batch,
            h: g.height,
            w: g.width,
            c,
            o,
            o_pad,
            oh,
            ow,
            pad_y: g.padding[0].0 as i64,
            pad_x: g.padding[1].0 as i64,
            kernel,
            order: TransformOrder::RowByRow,
            u: scratch.region(n * n * c * o_pad * 4),
            blocks: scratch.region(worker_floats * workers * 4),
            scratch,
            worker_floats,
            tiles_per_block,
            workers,
            zeros: vec![0.0; c],
        })
    }

    #[cfg(test)]
    /// Runs `simd` instead of the detected code (tests and benches; the machine must have it).
    pub(crate) fn with_simd(mut self, simd: Isa) -> WinogradConv {
        self.simd = simd;
        self
    }

    /// Runs the blocks' transforms in `order` (the kernel's transform, once per call, stays
    /// row by row).
    pub fn with_transform_order(mut self, order: TransformOrder) -> WinogradConv {
        self.order = order;
        self
    }

    /// The output tile `m` of F(m x m, r x r) this plan runs.
    pub fn tile(&self) -> usize {
        self.m
    }

    /// Bytes of scratch memory [`Self::run`] needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// Whether [`Self::run_fused`] can compute `pool` of this convolution's output in its
    /// epilogue: the pool reads this output's shape and each of its windows lies inside one
    /// `m x m` output tile.
    pub fn accepts_pool(&self, pool: &PoolEpilogue) -> bool {
        pool.reads(self.batch, self.oh, self.ow, self.o) && pool.pool.fits_blocks([self.m; 2])
    }

    /// `output = conv(input, kernel)`.
    ///
    /// # Safety
    /// `input` must hold `[batch, height, width, channels]` and `output` `[batch, out_h,
    /// out_w, out_channels]` floats (row-major), `kernel` every tap its [`KernelLayout`]
    /// reaches, and `scratch` [`Self::scratch_bytes`] bytes, 64-byte aligned.
    pub unsafe fn run(&self, x: *const f32, k: *const f32, y: *mut f32, scratch: *mut u8) {
        self.run_with_bias(x, k, None, y, scratch)
    }

    /// `output = conv(input, kernel) + bias` (bias broadcast over the output channels), the
    /// bits of the convolution followed by a separate add: the output transform adds the bias
    /// to each rounded output as it stores it, which saves the add's pass over the output.
    ///
    /// # Safety
    /// As [`Self::run`]; `bias`, when given, must hold `out_channels` floats.
    pub(crate) unsafe fn run_with_bias(
        &self,
        x: *const f32,
        k: *const f32,
        bias: Option<*const f32>,
        y: *mut f32,
        scratch: *mut u8,
    ) {
        self.run_fused(x, k, bias, None, y, scratch)
    }

    /// [`Self::run_with_bias`], and when `pool` is given, the max-pool of the output (which
    /// must [`Self::accepts_pool`]) computed right after each block of tiles is stored:
    /// the bits of a separate pool, without its second read of the whole output. With
    /// [`PoolEpilogue::discard_output`] the output is not stored at all (`y` is not written).
    ///
    /// # Safety
    /// As [`Self::run_with_bias`]; the pool's output must hold its shape and overlap none of
    /// the other buffers.
    pub unsafe fn run_fused(
        &self,
        x: *const f32,
        k: *const f32,
        bias: Option<*const f32>,
        pool: Option<PoolEpilogue>,
        y: *mut f32,
        scratch: *mut u8,
    ) {
        assert!(
            pool.is_none_or(|p| self.accepts_pool(&p)),
            "winograd: a pool it does not accept"
        );
        let bias = bias.map(|b| Shared(b as *mut f32));
        let u = floats(scratch, self.u);
        let scratch = floats(scratch, self.blocks);
        with_sizes!(self.m, self.r, |N, M, R| {
            let (xs, ks, ys, us, ss) = (
                Shared(x as *mut f32),
                Shared(k as *mut f32),
                Shared(y),
                Shared(u),
                Shared(scratch),
            );
            // 1. U, the transformed kernel: input channels split among the workers.
            let channels = chunk_len(self.c, self.workers, 1);
            for_each_range(self.c, channels, self.workers, |c0, c1| {
                self.dispatch_kernel::<N, M, R>(ks.get(), us.get(), c0, c1);
            });
            // 2. Blocks of tiles, taken in turn.
            let tiles_per_image = self.oh.div_ceil(M) * self.ow.div_ceil(M);
            let tiles = self.batch * tiles_per_image;
            let blocks = tiles.div_ceil(self.tiles_per_block);
            // With the output discarded, a block's tiles go to images of the worker's own, at
            // their place in them, where the pool reads them. A block spans at most `span`
            // images: 3 of 50 KB for the MNIST step's conv 2 (30 tiles of 16 per image), which
            // stay in L2. A heap block per call and worker: small beside the call, and the
            // buffer assignment need not know of it.
            let discard = pool.is_some_and(|p| p.discard_output);
            let span = self.tiles_per_block.div_ceil(tiles_per_image.max(1)) + 1;
            let out_image = self.oh * self.ow * self.o;
            let next = AtomicUsize::new(0);
            for_each_worker(self.workers, |wk| {
                let buf = ss.get().add(wk * self.worker_floats);
                let mut own = vec![0f32; if discard { span * out_image } else { 0 }];
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    if b >= blocks {
                        break;
                    }
                    let t0 = b * self.tiles_per_block;
                    let count = self.tiles_per_block.min(tiles - t0);
                    let (y, y_image) = if discard {
                        (own.as_mut_ptr(), t0 / tiles_per_image)
                    } else {
                        (ys.get(), 0)
                    };
                    let block = Block {
                        x: xs.get(),
                        u: us.get(),
                        bias: bias.map(|b| b.get() as *const f32),
                        y,
                        y_image,
                        buf,
                        t0,
                        count,
                    };
                    self.dispatch_block::<N, M, R>(&block);
                    if let Some(p) = &pool {
                        self.pool_tiles::<M>(p, &block);
                    }
                }
            });
        });
    }

    /// Pools the tiles of block `b` (just stored, so still in the cache).
    unsafe fn pool_tiles<const M: usize>(&self, p: &PoolEpilogue, b: &Block) {
        let (ty_n, tx_n) = (self.oh.div_ceil(M), self.ow.div_ceil(M));
        let out_image = self.oh * self.ow * self.o;
        for t in b.t0..b.t0 + b.count {
            let (img, ty, tx) = (t / (ty_n * tx_n), t / tx_n % ty_n, t % tx_n);
            let (rows, cols) = ([ty * M, ty * M + M], [tx * M, tx * M + M]);
            let y_image = b.y.add((img - b.y_image) * out_image);
            p.run_image_block(y_image, img, rows, cols);
        }
    }

    unsafe fn dispatch_kernel<const N: usize, const M: usize, const R: usize>(
        &self,
        k: *const f32,
        u: *mut f32,
        c0: usize,
        c1: usize,
    ) {
        match self.simd {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma | Isa::Avx512 => self.kernel_avx2::<N, M, R>(k, u, c0, c1),
            _ => self.kernel_part::<N, M, R, Portable>(k, u, c0, c1),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn kernel_avx2<const N: usize, const M: usize, const R: usize>(
        &self,
        k: *const f32,
        u: *mut f32,
        c0: usize,
        c1: usize,
    ) {
        self.kernel_part::<N, M, R, Avx>(k, u, c0, c1)
    }

    /// `U[xi][c][o] = (G g G^T)[xi]` for input channels `c0..c1`, 8 output channels at a
    /// time (zeros in the padding columns).
    #[inline(always)]
    unsafe fn kernel_part<const N: usize, const M: usize, const R: usize, V: Vector>(
        &self,
        k: *const f32,
        u: *mut f32,
        c0: usize,
        c1: usize,
    ) {
        // The matrices as compile-time constants, so that their 0 / 1 / -1 entries fold.
        let mats: &'static Matrices<N, M, R> = const { &Matrices::standard() };
        let [sy, sx, si, so] = self.kernel.strides;
        let plane = self.c * self.o_pad;
        let tap = |t: usize, rev: bool| if rev { R - 1 - t } else { t };
        for c in c0..c1 {
            for o0 in (0..self.o_pad).step_by(LANES) {
                let w = (self.o - o0.min(self.o)).min(LANES);
                let mut taps = [[V::zero(); R]; R];
                for (ky, row) in taps.iter_mut().enumerate() {
                    for (kx, t) in row.iter_mut().enumerate() {
                        let base = k.add(
                            tap(ky, self.kernel.reversed[0]) * sy
                                + tap(kx, self.kernel.reversed[1]) * sx
                                + c * si,
                        );
                        let mut lanes = [0f32; LANES];
                        for (l, x) in lanes.iter_mut().take(w).enumerate() {
                            *x = *base.add((o0 + l) * so);
                        }
                        *t = V::load(lanes.as_ptr(), LANES);
                    }
                }
                let t = kernel_tile::<N, R, V>(&mats.g, &taps);
                for (i, ti) in t.iter().enumerate() {
                    for (j, tij) in ti.iter().enumerate() {
                        tij.store(u.add((i * N + j) * plane + c * self.o_pad + o0), LANES);
                    }
                }
            }
        }
    }

    unsafe fn dispatch_block<const N: usize, const M: usize, const R: usize>(&self, b: &Block) {
        match self.order {
            TransformOrder::RowByRow => self.dispatch_block_as::<N, M, R, Matrices<N, M, R>>(b),
            TransformOrder::Factored => {
                self.dispatch_block_as::<N, M, R, FactoredMatrices<N, M, R>>(b)
            }
        }
    }

    unsafe fn dispatch_block_as<const N: usize, const M: usize, const R: usize, T>(&self, b: &Block)
    where
        T: BlockTransforms<N, M, R>,
    {
        match self.simd {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => self.block_avx2::<N, M, R, T>(b),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => self.block_avx512::<N, M, R, T>(b),
            _ => self.block::<N, M, R, Portable, T>(b),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_avx2<const N: usize, const M: usize, const R: usize, T>(&self, b: &Block)
    where
        T: BlockTransforms<N, M, R>,
    {
        self.block::<N, M, R, Avx, T>(b)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn block_avx512<const N: usize, const M: usize, const R: usize, T>(&self, b: &Block)
    where
        T: BlockTransforms<N, M, R>,
    {
        self.block::<N, M, R, Avx512, T>(b)
    }

    /// Tiles `t0..t0 + count`: input transform, the `N * N` products, output transform.
    #[inline(always)]
    unsafe fn block<const N: usize, const M: usize, const R: usize, V: Vector, T>(&self, b: &Block)
    where
        T: BlockTransforms<N, M, R>,
    {
        let Block {
            x,
            u,
            bias,
            y,
            y_image,
            buf,
            t0,
            count,
        } = *b;
        // The transforms as compile-time constants, so that their 0 / 1 / -1 entries fold.
        let mats: &'static T = T::STANDARD;
        let tpb = self.tiles_per_block;
        let (c, o_pad) = (self.c, self.o_pad);
        // Tile-major: a tile's N * N transformed points are adjacent (`V[t][xi][c]`,
        // `M[t][xi][o]`), so each transform reads or writes one contiguous run, and the
        // products reach their rows through a stride.
        let v = buf;
        let mm = buf.add(N * N * tpb * c);
        // Strides of a tile and of a point in V and M.
        let (vt, vx) = (N * N * c, c);
        let (mt, mx) = (N * N * o_pad, o_pad);
        let (ty_n, tx_n) = (self.oh.div_ceil(M), self.ow.div_ceil(M));
        let zero = self.zeros.as_ptr();
        for tb in 0..count {
            let t = t0 + tb;
            let (img, ty, tx) = (t / (ty_n * tx_n), t / tx_n % ty_n, t % tx_n);
            let (y0, x0) = ((ty * M) as i64 - self.pad_y, (tx * M) as i64 - self.pad_x);
            let px = tile_pixels::<N>(x, img, [self.h, self.w], c, [y0, x0], zero);
            input_tile::<N, V>(mats.bt(), &px, c, v.add(tb * vt), vx);
        }
        for xi in 0..N * N {
            small_gemm(
                self.simd,
                count,
                o_pad,
                c,
                v.add(xi * vx),
                vt as isize,
                1,
                u.add(xi * c * o_pad),
                o_pad,
                mm.add(xi * mx),
                mt,
                false,
            );
        }
        for tb in 0..count {
            let t = t0 + tb;
            let (img, ty, tx) = (t / (ty_n * tx_n), t / tx_n % ty_n, t % tx_n);
            // The tile's outputs inside the image; null past its edges.
            let mut out = [[std::ptr::null_mut::<f32>(); M]; M];
            let (oy, ox) = (ty * M, tx * M);
            let first = y.add((((img - y_image) * self.oh + oy) * self.ow + ox) * self.o);
            let (rows, cols) = ((self.oh - oy).min(M), (self.ow - ox).min(M));
            for (i, row) in out.iter_mut().enumerate().take(rows) {
                for (j, p) in row.iter_mut().enumerate().take(cols) {
                    *p = first.add((i * self.ow + j) * self.o);
                }
            }
            output_tile::<N, M, V>(mats.at(), mm.add(tb * mt), mx, self.o, bias, &out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::scratch_block;
    use crate::winograd::WinogradFilterGradient;

    fn data(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).max(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2000) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// The odd case the tests below use: 2 images of 7 x 9 pixels, 11 channels to 13 (tails
    /// in every vector width), an r x r window padded (r/2, r/2 - 1) x (r/2 - 1, r/2), so the
    /// output is 6 x 8; with its input `[2, 7, 9, 11]` and HWIO kernel `[r, r, 11, 13]`.
    fn odd_case(r: usize) -> (Conv2dGeometry, Vec<f32>, Vec<f32>) {
        let (n, h, w, c, o) = (2usize, 7usize, 9usize, 11usize, 13usize);
        let geometry = Conv2dGeometry {
            batch: n,
            height: h,
            width: w,
            channels: c,
            window: [r, r],
            out_channels: o,
            padding: [
                (r as isize / 2, r as isize / 2 - 1),
                (r as isize / 2 - 1, r as isize / 2),
            ],
        };
        (geometry, data(n * h * w * c, 1), data(r * r * c * o, 2))
    }

    /// Both windows with a transform.
    const WINDOWS: [usize; 2] = [3, 5];

    /// The AVX and the portable code on the same forward and weight-gradient convolutions,
    /// against a direct f64 sum (relative to the sum of |terms|, like tests/tests/jit/winograd.rs).
    #[test]
    fn portable_and_avx_paths_match_the_direct_sum() {
        for r in WINDOWS {
            paths_match_the_direct_sum(r);
        }
    }

    fn paths_match_the_direct_sum(r: usize) {
        let (geometry, x, k) = odd_case(r);
        let g = &geometry;
        let (n, h, w, c, o) = (g.batch, g.height, g.width, g.channels, g.out_channels);
        let [oh, ow] = g.output_size().expect("a valid geometry");
        let dy = data(n * oh * ow * o, 3);
        let (py, px) = (g.padding[0].0 as i64, g.padding[1].0 as i64);
        // x at (y, xx) of the output grid shifted back by the low padding.
        let at = |img: usize, y: i64, xx: i64, ch: usize| -> f64 {
            let (y, xx) = (y - py, xx - px);
            if y < 0 || xx < 0 || y >= h as i64 || xx >= w as i64 {
                0.0
            } else {
                x[((img * h + y as usize) * w + xx as usize) * c + ch] as f64
            }
        };
        // Every instruction set and every tile (the error grows with the tile).
        let paths: Vec<(Isa, usize)> = Isa::available()
            .into_iter()
            .flat_map(|s| [2, 4].map(|m| (s, m)))
            .collect();
        let tol = |m: usize| 1e-5 * m as f64;
        // Forward: y[n, oy, ox, o] = sum x[n, oy + ky - py, ox + kx - px, c] * k[ky, kx, c, o],
        // with the transforms summed in both orders.
        let orders = [TransformOrder::RowByRow, TransformOrder::Factored];
        for (&(simd, m), order) in paths.iter().flat_map(|p| orders.map(|o| (p, o))) {
            let plan = WinogradConv::with_tile(&geometry, KernelLayout::hwio(&geometry), 2, m)
                .expect("winograd takes it")
                .with_simd(simd)
                .with_transform_order(order);
            let mut y = vec![f32::NAN; n * oh * ow * o];
            let mut scratch = scratch_block(plan.scratch_bytes());
            unsafe {
                plan.run(
                    x.as_ptr(),
                    k.as_ptr(),
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr() as *mut u8,
                )
            };
            for img in 0..n {
                for oy in 0..oh {
                    for ox in 0..ow {
                        for oc in 0..o {
                            let (mut want, mut mag) = (0f64, 0f64);
                            for ky in 0..r {
                                for kx in 0..r {
                                    for ch in 0..c {
                                        let t = at(img, (oy + ky) as i64, (ox + kx) as i64, ch)
                                            * k[((ky * r + kx) * c + ch) * o + oc] as f64;
                                        want += t;
                                        mag += t.abs();
                                    }
                                }
                            }
                            let got = y[((img * oh + oy) * ow + ox) * o + oc] as f64;
                            assert!(
                                (got - want).abs() <= tol(m) * mag,
                                "{simd:?} F({m}, {r}) {order:?} forward: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
        // Weight gradient: dw[ky, kx, c, o] = sum x[n, y + ky - py, x + kx - px, c] * dy[n, y, x, o].
        for &(simd, m) in &paths {
            let strides = [r * c * o, c * o, o, 1];
            let plan = WinogradFilterGradient::with_tile(&geometry, strides, 2, m)
                .expect("the filter routine takes it")
                .with_simd(simd);
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
            for ky in 0..r {
                for kx in 0..r {
                    for ch in 0..c {
                        for oc in 0..o {
                            let (mut want, mut mag) = (0f64, 0f64);
                            for img in 0..n {
                                for oy in 0..oh {
                                    for ox in 0..ow {
                                        let t = at(img, (oy + ky) as i64, (ox + kx) as i64, ch)
                                            * dy[((img * oh + oy) * ow + ox) * o + oc] as f64;
                                        want += t;
                                        mag += t.abs();
                                    }
                                }
                            }
                            let got = dw[((ky * r + kx) * c + ch) * o + oc] as f64;
                            assert!(
                                (got - want).abs() <= tol(m) * mag,
                                "{simd:?} F({m}, {r}) filter: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The factored order is a different sum, not the same code: on the odd case its outputs
    /// differ from the row-by-row ones in some bits (both within the error bound above), and
    /// each order gives the same bits on 1 and 2 workers.
    #[test]
    fn the_factored_order_rounds_differently() {
        for r in WINDOWS {
            factored_order_rounds_differently(r);
        }
    }

    fn factored_order_rounds_differently(r: usize) {
        let (geometry, x, k) = odd_case(r);
        let [oh, ow] = geometry.output_size().expect("a valid geometry");
        let outputs = geometry.batch * oh * ow * geometry.out_channels;
        let run = |simd: Isa, order: TransformOrder, threads: usize| {
            let plan =
                WinogradConv::with_tile(&geometry, KernelLayout::hwio(&geometry), threads, 4)
                    .expect("winograd takes it")
                    .with_simd(simd)
                    .with_transform_order(order);
            let mut y = vec![f32::NAN; outputs];
            let mut scratch = scratch_block(plan.scratch_bytes());
            let s = scratch.as_mut_ptr() as *mut u8;
            unsafe { plan.run(x.as_ptr(), k.as_ptr(), y.as_mut_ptr(), s) };
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        for simd in Isa::available() {
            let plain = run(simd, TransformOrder::RowByRow, 2);
            let factored = run(simd, TransformOrder::Factored, 2);
            let differ = plain.iter().zip(&factored).filter(|(a, b)| a != b).count();
            assert!(
                differ > outputs / 20,
                "{simd:?} r {r}: only {differ} of {outputs} differ"
            );
            assert_eq!(
                factored,
                run(simd, TransformOrder::Factored, 1),
                "{simd:?} r {r}"
            );
        }
    }

    /// The max-pool computed block by block in the epilogue gives the bits of the
    /// convolution (with and without its bias) followed by a separate pool, on every
    /// instruction set and tile, with an odd output height (7) and a channel tail (13).
    #[test]
    fn pool_in_the_epilogue_equals_a_separate_pool() {
        for r in WINDOWS {
            pool_equals_a_separate_pool(r);
        }
    }

    fn pool_equals_a_separate_pool(r: usize) {
        use crate::pooling::{check_epilogue, MaxPool, PoolGeometry};
        let (mut geometry, x, k) = odd_case(r);
        let half = r as isize / 2;
        geometry.padding = [(half, half), (half - 1, half)];
        let o = geometry.out_channels;
        let [oh, ow] = geometry.output_size().expect("a valid geometry");
        assert_eq!([oh, ow], [7, 8]);
        let n = geometry.batch;
        let bias = data(o, 4);
        let pool_geometry = PoolGeometry {
            batch: n,
            height: oh,
            width: ow,
            channels: o,
            window: [2, 2],
            stride: [2, 2],
        };
        for simd in Isa::available() {
            for m in [2, 4] {
                let plan = WinogradConv::with_tile(&geometry, KernelLayout::hwio(&geometry), 2, m)
                    .expect("winograd takes it")
                    .with_simd(simd);
                let mut scratch = scratch_block(plan.scratch_bytes());
                let s = scratch.as_mut_ptr() as *mut u8;
                for (relu, b) in [(true, Some(bias.as_ptr())), (false, None)] {
                    let mut pool = MaxPool::new(pool_geometry, relu, 1).expect("a pool");
                    pool.isa = simd;
                    check_epilogue(
                        pool,
                        n * oh * ow * o,
                        |p| plan.accepts_pool(p),
                        |p, y| unsafe { plan.run_fused(x.as_ptr(), k.as_ptr(), b, p, y, s) },
                        &format!("{simd:?} F({m}, {r}) relu {relu}"),
                    );
                }
                // A window that straddles the tiles, or another output shape, is refused.
                let mut straddling = pool_geometry;
                straddling.window = [3, 3];
                let wide = PoolEpilogue {
                    pool: MaxPool::new(straddling, true, 1).expect("a pool"),
                    output: std::ptr::null_mut(),
                    choices: std::ptr::null_mut(),
                    discard_output: false,
                };
                assert!(!plan.accepts_pool(&wide));
                let mut other = pool_geometry;
                other.channels += 1;
                let shape = PoolEpilogue {
                    pool: MaxPool::new(other, true, 1).expect("a pool"),
                    output: std::ptr::null_mut(),
                    choices: std::ptr::null_mut(),
                    discard_output: false,
                };
                assert!(!plan.accepts_pool(&shape));
            }
        }
    }

    /// The bias added in the output transform gives the bits of the convolution followed by
    /// a separate add, on every instruction set and tile, with a channel tail (13 outputs).
    #[test]
    fn bias_in_the_store_equals_a_separate_add() {
        for r in WINDOWS {
            bias_equals_a_separate_add(r);
        }
    }

    fn bias_equals_a_separate_add(r: usize) {
        let (geometry, x, k) = odd_case(r);
        let o = geometry.out_channels;
        let [oh, ow] = geometry.output_size().expect("a valid geometry");
        let outputs = geometry.batch * oh * ow * o;
        let bias = data(o, 4);
        for simd in Isa::available() {
            for m in [2, 4] {
                let plan = WinogradConv::with_tile(&geometry, KernelLayout::hwio(&geometry), 2, m)
                    .expect("winograd takes it")
                    .with_simd(simd);
                let mut scratch = scratch_block(plan.scratch_bytes());
                let s = scratch.as_mut_ptr() as *mut u8;
                let mut plain = vec![f32::NAN; outputs];
                let mut biased = vec![f32::NAN; outputs];
                unsafe {
                    plan.run(x.as_ptr(), k.as_ptr(), plain.as_mut_ptr(), s);
                    let b = Some(bias.as_ptr());
                    plan.run_with_bias(x.as_ptr(), k.as_ptr(), b, biased.as_mut_ptr(), s);
                }
                for (i, (&p, &g)) in plain.iter().zip(&biased).enumerate() {
                    let want = p + bias[i % o];
                    assert_eq!(g.to_bits(), want.to_bits(), "{simd:?} F({m}, {r}) [{i}]");
                }
            }
        }
    }
}
