//! Winograd F(2x2, r x r) convolution for 2-D, stride-1, undilated, one-group convolutions
//! with a square `r x r` kernel (r = 3 or 5): 36 products per 4 outputs for r = 5 where the
//! direct algorithm needs 100 (see `winograd.rs` for the transforms).
//!
//! Layouts: input `[N, H, W, C]` and output `[N, OH, OW, O]` (`b01f` labels, channels
//! contiguous), the kernel in any layout (it is read once per call, through its strides).
//! Any padding, also asymmetric or negative, and any H and W: tiles at the edges read zeros
//! outside the image and write only their valid outputs. Everything else declines (`None`)
//! and takes the general patch-matrix GEMM.
//!
//! Per call: the kernel is transformed once into `U[xi][c][o]` (xi < 36 for F(2,5); the
//! columns padded to a multiple of 8). Then the output tiles are cut into blocks of
//! `tiles_per_block`; each worker takes blocks in turn and, per block, transforms the input
//! tiles into `V[xi][t][c]`, computes the 36 products `M[xi] = V[xi] * U[xi]` with a
//! register-blocked kernel (`small_gemm.rs`) and transforms `M` back into output tiles. The
//! block's scratch stays in L2. Each output is written by exactly one block, so the result
//! does not depend on the number of workers.

use super::buffer::Addr;
use super::conv_shape::f32_dims;
use super::host::{guarded, resolve, Status};
use super::parallel::{for_each_worker, Shared};
use super::small_gemm::{small_gemm, Simd, COLUMN_GROUP};
use super::winograd::Matrices;
#[cfg(target_arch = "x86_64")]
use super::winograd_tiles::Avx;
use super::winograd_tiles::{input_tile, kernel_tile, output_tile, Portable, Vector, LANES};
use std::sync::atomic::{AtomicUsize, Ordering};
use tessel_compiler::ir::{ArrayShape, Convolution};

/// Output tile size per dimension (F(2x2, r x r)).
const TILE: usize = 2;

/// Input channels below this are declined: the transforms work on 8 channels at a time, and
/// with one channel the Winograd products are too thin to pay for them. (Under `Auto`,
/// `conv_select` gives up to `conv_direct::MAX_CHANNELS` channels to the direct loops first.)
pub const MIN_CHANNELS: usize = 2;

/// Scratch bytes a worker's block may use (V and M), so that they stay in the L2 cache.
const BLOCK_BYTES: usize = 512 << 10;

/// The kernel sizes with a transform.
pub fn supported_kernel(r: usize) -> bool {
    matches!(r, 3 | 5)
}

/// Runs `$body` with `N`, `R` bound to the sizes of F(2, r).
macro_rules! with_sizes {
    ($r:expr, |$n:ident, $rr:ident| $body:expr) => {
        match $r {
            3 => {
                const $n: usize = 4;
                const $rr: usize = 3;
                $body
            }
            _ => {
                const $n: usize = 6;
                const $rr: usize = 5;
                $body
            }
        }
    };
}
pub(crate) use with_sizes;

#[derive(Clone, Debug)]
pub struct WinogradPlan {
    pub name: String,
    simd: Simd,
    r: usize,
    input: Addr,
    kernel: Addr,
    output: Addr,
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
    /// Kernel strides (elements) of ky, kx, input feature, output feature, and whether the
    /// window is reversed along y and x.
    kstride: [usize; 4],
    reversed: [bool; 2],
    /// `U[xi][c][o_pad]`.
    u: Addr,
    /// Per worker `V[xi][t][c]` then `M[xi][t][o_pad]`, `worker_floats` apart.
    scratch: Addr,
    worker_floats: usize,
    tiles_per_block: usize,
    workers: usize,
    /// A pixel of zeros for the taps outside the image.
    zeros: Vec<f32>,
}

fn row_major_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Tiles per block so that `n * n * tiles * floats_per_tile * 4` bytes fit the budget: a
/// multiple of 6 (the kernel's row block), at least 6 and at most 96.
pub(crate) fn tiles_per_block(n: usize, floats_per_tile: usize, budget: usize) -> usize {
    let t = budget / (n * n * floats_per_tile.max(1) * 4);
    (t / 6 * 6).clamp(6, 96)
}

impl WinogradPlan {
    /// Plans `output = conv(input, kernel)` if it has the shape this routine handles;
    /// `None` otherwise (nothing is allocated then).
    pub fn new(
        name: &str,
        conv: &Convolution,
        input: (Addr, &ArrayShape),
        kernel: (Addr, &ArrayShape),
        output: (Addr, &ArrayShape),
        threads: usize,
        alloc: &mut dyn FnMut(usize) -> Addr,
    ) -> Option<WinogradPlan> {
        let (idims, kdims, odims) = (f32_dims(input.1)?, f32_dims(kernel.1)?, f32_dims(output.1)?);
        let d = &conv.dims;
        let nhwc = |b: i64, sp: &[i64], f: i64| b == 0 && sp == [1, 2] && f == 3;
        if [&idims, &kdims, &odims].iter().any(|dims| dims.len() != 4)
            || conv.feature_group_count != 1
            || conv.batch_group_count != 1
            || !nhwc(d.input_batch, &d.input_spatial, d.input_feature)
            || !nhwc(d.output_batch, &d.output_spatial, d.output_feature)
            || d.kernel_spatial.len() != 2
            || conv.window.dims.len() != 2
        {
            return None;
        }
        let ks = [
            d.kernel_spatial[0] as usize,
            d.kernel_spatial[1] as usize,
            d.kernel_input_feature as usize,
            d.kernel_output_feature as usize,
        ];
        let r = kdims[ks[0]];
        let win = &conv.window.dims;
        let plain = win.iter().all(|w| {
            w.size as usize == r && w.stride == 1 && w.window_dilation == 1 && w.base_dilation == 1
        });
        let (batch, h, w, c) = (idims[0], idims[1], idims[2], idims[3]);
        let (oh, ow, o) = (odims[1], odims[2], odims[3]);
        let out_size = |inp: usize, wd: &tessel_compiler::ir::WindowDim| {
            inp as i64 + wd.pad_low + wd.pad_high - r as i64 + 1
        };
        if !supported_kernel(r)
            || kdims[ks[1]] != r
            || !plain
            || c < MIN_CHANNELS
            || kdims[ks[2]] != c
            || kdims[ks[3]] != o
            || odims[0] != batch
            || out_size(h, &win[0]) != oh as i64
            || out_size(w, &win[1]) != ow as i64
        {
            return None;
        }
        let n = TILE + r - 1;
        let kstrides = row_major_strides(&kdims);
        let o_pad = o.next_multiple_of(COLUMN_GROUP);
        let tiles_per_block = tiles_per_block(n, c + o_pad, BLOCK_BYTES);
        let tiles = batch * oh.div_ceil(TILE) * ow.div_ceil(TILE);
        let workers = threads.max(1).min(tiles.div_ceil(tiles_per_block));
        let worker_floats = (n * n * tiles_per_block * (c + o_pad)).next_multiple_of(16);
        let u = alloc(n * n * c * o_pad * 4);
        let scratch = alloc(worker_floats * workers * 4);
        Some(WinogradPlan {
            name: name.to_string(),
            simd: Simd::detect(),
            r,
            input: input.0,
            kernel: kernel.0,
            output: output.0,
            batch,
            h,
            w,
            c,
            o,
            o_pad,
            oh,
            ow,
            pad_y: win[0].pad_low,
            pad_x: win[1].pad_low,
            kstride: ks.map(|k| kstrides[k]),
            reversed: [win[0].reversal, win[1].reversal],
            u,
            scratch,
            worker_floats,
            tiles_per_block,
            workers,
            zeros: vec![0.0; c],
        })
    }

    /// # Safety
    /// `arena` must be the program's arena.
    pub unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        let x = resolve(self.input, arena) as *const f32;
        let k = resolve(self.kernel, arena) as *const f32;
        let y = resolve(self.output, arena) as *mut f32;
        let u = resolve(self.u, arena) as *mut f32;
        let scratch = resolve(self.scratch, arena) as *mut f32;
        with_sizes!(self.r, |N, R| {
            let (xs, ks, ys, us, ss) = (
                Shared(x as *mut f32),
                Shared(k as *mut f32),
                Shared(y),
                Shared(u),
                Shared(scratch),
            );
            // 1. U, the transformed kernel: input channels split among the workers.
            for_each_worker(self.workers, |wk| {
                let (c0, c1) = (self.c * wk / self.workers, self.c * (wk + 1) / self.workers);
                self.dispatch_kernel::<N, R>(ks.get(), us.get(), c0, c1);
            });
            // 2. Blocks of tiles, taken in turn.
            let tiles = self.batch * self.oh.div_ceil(TILE) * self.ow.div_ceil(TILE);
            let blocks = tiles.div_ceil(self.tiles_per_block);
            let next = AtomicUsize::new(0);
            for_each_worker(self.workers, |wk| {
                let buf = ss.get().add(wk * self.worker_floats);
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    if b >= blocks {
                        break;
                    }
                    let t0 = b * self.tiles_per_block;
                    let count = self.tiles_per_block.min(tiles - t0);
                    self.dispatch_block::<N, R>(xs.get(), us.get(), ys.get(), buf, t0, count);
                }
            });
        });
        Ok(())
    }

    unsafe fn dispatch_kernel<const N: usize, const R: usize>(
        &self,
        k: *const f32,
        u: *mut f32,
        c0: usize,
        c1: usize,
    ) {
        match self.simd {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2Fma => self.kernel_avx2::<N, R>(k, u, c0, c1),
            _ => self.kernel_part::<N, R, Portable>(k, u, c0, c1),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn kernel_avx2<const N: usize, const R: usize>(
        &self,
        k: *const f32,
        u: *mut f32,
        c0: usize,
        c1: usize,
    ) {
        self.kernel_part::<N, R, Avx>(k, u, c0, c1)
    }

    /// `U[xi][c][o] = (G g G^T)[xi]` for input channels `c0..c1`, 8 output channels at a
    /// time (zeros in the padding columns).
    #[inline(always)]
    unsafe fn kernel_part<const N: usize, const R: usize, V: Vector>(
        &self,
        k: *const f32,
        u: *mut f32,
        c0: usize,
        c1: usize,
    ) {
        // The matrices as compile-time constants, so that their 0 / 1 / -1 entries fold.
        let mats: &'static Matrices<N, TILE, R> = const { &Matrices::standard() };
        let [sy, sx, si, so] = self.kstride;
        let plane = self.c * self.o_pad;
        let tap = |t: usize, rev: bool| if rev { R - 1 - t } else { t };
        for c in c0..c1 {
            for o0 in (0..self.o_pad).step_by(LANES) {
                let w = (self.o - o0.min(self.o)).min(LANES);
                let mut taps = [[V::zero(); R]; R];
                for (ky, row) in taps.iter_mut().enumerate() {
                    for (kx, t) in row.iter_mut().enumerate() {
                        let base = k.add(
                            tap(ky, self.reversed[0]) * sy
                                + tap(kx, self.reversed[1]) * sx
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

    #[allow(clippy::too_many_arguments)]
    unsafe fn dispatch_block<const N: usize, const R: usize>(
        &self,
        x: *const f32,
        u: *const f32,
        y: *mut f32,
        buf: *mut f32,
        t0: usize,
        count: usize,
    ) {
        match self.simd {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2Fma => self.block_avx2::<N, R>(x, u, y, buf, t0, count),
            _ => self.block::<N, R, Portable>(x, u, y, buf, t0, count),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block_avx2<const N: usize, const R: usize>(
        &self,
        x: *const f32,
        u: *const f32,
        y: *mut f32,
        buf: *mut f32,
        t0: usize,
        count: usize,
    ) {
        self.block::<N, R, Avx>(x, u, y, buf, t0, count)
    }

    /// Tiles `t0..t0 + count`: input transform, the `N * N` products, output transform.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<const N: usize, const R: usize, V: Vector>(
        &self,
        x: *const f32,
        u: *const f32,
        y: *mut f32,
        buf: *mut f32,
        t0: usize,
        count: usize,
    ) {
        // The matrices as compile-time constants, so that their 0 / 1 / -1 entries fold.
        let mats: &'static Matrices<N, TILE, R> = const { &Matrices::standard() };
        let tpb = self.tiles_per_block;
        let (c, o_pad) = (self.c, self.o_pad);
        let v = buf;
        let mm = buf.add(N * N * tpb * c);
        let (ty_n, tx_n) = (self.oh.div_ceil(TILE), self.ow.div_ceil(TILE));
        let zero = self.zeros.as_ptr();
        for tb in 0..count {
            let t = t0 + tb;
            let (img, ty, tx) = (t / (ty_n * tx_n), t / tx_n % ty_n, t % tx_n);
            let (y0, x0) = (
                (ty * TILE) as i64 - self.pad_y,
                (tx * TILE) as i64 - self.pad_x,
            );
            let px = tile_pixels::<N>(x, img, [self.h, self.w], c, [y0, x0], zero);
            input_tile::<N, V>(&mats.bt, &px, c, v.add(tb * c), tpb * c);
        }
        for xi in 0..N * N {
            small_gemm(
                self.simd,
                count,
                o_pad,
                c,
                v.add(xi * tpb * c),
                c as isize,
                1,
                u.add(xi * c * o_pad),
                o_pad,
                mm.add(xi * tpb * o_pad),
                o_pad,
                false,
            );
        }
        for tb in 0..count {
            let t = t0 + tb;
            let (img, ty, tx) = (t / (ty_n * tx_n), t / tx_n % ty_n, t % tx_n);
            let out: [[*mut f32; TILE]; TILE] = std::array::from_fn(|i| {
                let oy = ty * TILE + i;
                std::array::from_fn(|j| {
                    let ox = tx * TILE + j;
                    if oy < self.oh && ox < self.ow {
                        y.add(((img * self.oh + oy) * self.ow + ox) * self.o)
                    } else {
                        std::ptr::null_mut()
                    }
                })
            });
            output_tile::<N, TILE, V>(&mats.at, mm.add(tb * o_pad), tpb * o_pad, self.o, &out);
        }
    }
}

/// Pointers to the `S x S` pixels (`ch` floats each) of image `img` of an NHWC array with
/// spatial size `hw`, starting at (`at[0]`, `at[1]`); pixels outside the image point to `zero`.
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
    std::array::from_fn(|j| {
        let y = at[0] + j as i64;
        std::array::from_fn(|i| {
            let x = at[1] + i as i64;
            if y >= 0 && y < hw[0] as i64 && x >= 0 && x < hw[1] as i64 {
                base.add(((img * hw[0] + y as usize) * hw[1] + x as usize) * ch)
            } else {
                zero
            }
        })
    })
}

/// Called by generated code: `plan` is a `*const WinogradPlan` the executable keeps alive.
///
/// # Safety
/// `plan` must point to a live `WinogradPlan` and `arena` be the program's arena.
pub unsafe extern "C" fn winograd_routine(plan: *const WinogradPlan, arena: *mut u8) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::conv_winograd_filter::WinogradFilterPlan;
    use tessel_compiler::ir::{ConvDimensionNumbers, ElementType, Window, WindowDim};

    /// Buffers outside any arena, addressed absolutely (the routines resolve `Absolute`
    /// addresses as they are).
    struct Buffers(Vec<Vec<f32>>);

    impl Buffers {
        fn add(&mut self, v: Vec<f32>) -> Addr {
            self.0.push(v);
            Addr::Absolute(self.0.last().unwrap().as_ptr() as usize)
        }
        fn alloc(&mut self, bytes: usize) -> Addr {
            self.add(vec![f32::NAN; bytes.div_ceil(4)])
        }
    }

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

    fn conv(
        r: i64,
        pads: [(i64, i64); 2],
        dims: ConvDimensionNumbers,
        size: [i64; 2],
    ) -> Convolution {
        let mut window = Window::default();
        for (&(lo, hi), &sz) in pads.iter().zip(&size) {
            let mut d = WindowDim::new(if sz > 0 { sz } else { r });
            d.pad_low = lo;
            d.pad_high = hi;
            window.dims.push(d);
        }
        Convolution {
            window,
            dims,
            feature_group_count: 1,
            batch_group_count: 1,
        }
    }

    /// The AVX and the portable code on the same forward and weight-gradient convolutions,
    /// against a direct f64 sum (relative to the sum of |terms|, like tests/tests/jit/winograd.rs).
    #[test]
    fn portable_and_avx_paths_match_the_direct_sum() {
        let (n, h, w, c, o, r) = (2usize, 7usize, 9usize, 11usize, 13usize, 5usize);
        let pads = [(2i64, 1i64), (1, 2)];
        let (oh, ow) = (h + 3 - r + 1, w + 3 - r + 1);
        let x = data(n * h * w * c, 1);
        let k = data(r * r * c * o, 2);
        let dy = data(n * oh * ow * o, 3);
        let f32s = |d: &[usize]| {
            ArrayShape::new(
                ElementType::F32,
                &d.iter().map(|&v| v as i64).collect::<Vec<_>>(),
            )
        };
        let at = |img: usize, y: i64, xx: i64, ch: usize| -> f64 {
            if y < 0 || xx < 0 || y >= h as i64 || xx >= w as i64 {
                0.0
            } else {
                x[((img * h + y as usize) * w + xx as usize) * c + ch] as f64
            }
        };
        let paths = [Simd::detect(), Simd::Portable];
        // Forward: y[n, oy, ox, o] = sum x[n, oy + ky - 2, ox + kx - 1, c] * k[ky, kx, c, o].
        for simd in paths {
            let mut b = Buffers(vec![]);
            let (xa, ka) = (b.add(x.clone()), b.add(k.clone()));
            let ya = b.alloc(n * oh * ow * o * 4);
            let cv = conv(r as i64, pads, ConvDimensionNumbers::nhwc_hwio(), [0, 0]);
            let (xs, ks, ys) = (
                f32s(&[n, h, w, c]),
                f32s(&[r, r, c, o]),
                f32s(&[n, oh, ow, o]),
            );
            let mut plan =
                WinogradPlan::new("t", &cv, (xa, &xs), (ka, &ks), (ya, &ys), 2, &mut |s| {
                    b.alloc(s)
                })
                .expect("winograd takes it");
            plan.simd = simd;
            unsafe { plan.run(std::ptr::null_mut()).unwrap() };
            let Addr::Absolute(yp) = ya else {
                unreachable!()
            };
            let y = unsafe { std::slice::from_raw_parts(yp as *const f32, n * oh * ow * o) };
            for img in 0..n {
                for oy in 0..oh {
                    for ox in 0..ow {
                        for oc in 0..o {
                            let (mut want, mut mag) = (0f64, 0f64);
                            for ky in 0..r {
                                for kx in 0..r {
                                    for ch in 0..c {
                                        let t =
                                            at(img, (oy + ky) as i64 - 2, (ox + kx) as i64 - 1, ch)
                                                * k[((ky * r + kx) * c + ch) * o + oc] as f64;
                                        want += t;
                                        mag += t.abs();
                                    }
                                }
                            }
                            let got = y[((img * oh + oy) * ow + ox) * o + oc] as f64;
                            assert!(
                                (got - want).abs() <= 1e-5 * mag,
                                "{simd:?} forward: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
        // Weight gradient: dw[ky, kx, c, o] = sum x[n, y + ky - 2, x + kx - 1, c] * dy[n, y, x, o].
        for simd in paths {
            let mut b = Buffers(vec![]);
            let (xa, ga) = (b.add(x.clone()), b.add(dy.clone()));
            let wa = b.alloc(r * r * c * o * 4);
            let dims = ConvDimensionNumbers {
                input_batch: 3,
                input_feature: 0,
                input_spatial: vec![1, 2],
                kernel_input_feature: 0,
                kernel_output_feature: 3,
                kernel_spatial: vec![1, 2],
                output_batch: 2,
                output_feature: 3,
                output_spatial: vec![0, 1],
            };
            let cv = conv(r as i64, pads, dims, [oh as i64, ow as i64]);
            let (xs, gs, ws) = (
                f32s(&[n, h, w, c]),
                f32s(&[n, oh, ow, o]),
                f32s(&[r, r, c, o]),
            );
            let mut plan =
                WinogradFilterPlan::new("t", &cv, (xa, &xs), (ga, &gs), (wa, &ws), 2, &mut |s| {
                    b.alloc(s)
                })
                .expect("the filter routine takes it");
            plan.force_simd(simd);
            unsafe { plan.run(std::ptr::null_mut()).unwrap() };
            let Addr::Absolute(wp) = wa else {
                unreachable!()
            };
            let dw = unsafe { std::slice::from_raw_parts(wp as *const f32, r * r * c * o) };
            for ky in 0..r {
                for kx in 0..r {
                    for ch in 0..c {
                        for oc in 0..o {
                            let (mut want, mut mag) = (0f64, 0f64);
                            for img in 0..n {
                                for oy in 0..oh {
                                    for ox in 0..ow {
                                        let t =
                                            at(img, (oy + ky) as i64 - 2, (ox + kx) as i64 - 1, ch)
                                                * dy[((img * oh + oy) * ow + ox) * o + oc] as f64;
                                        want += t;
                                        mag += t.abs();
                                    }
                                }
                            }
                            let got = dw[((ky * r + kx) * c + ch) * o + oc] as f64;
                            assert!(
                                (got - want).abs() <= 1e-5 * mag,
                                "{simd:?} filter: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
