//! Direct forward convolution for few input channels (conv layer 1 of an image model): NHWC
//! input, HWIO kernel, NHWO output (`dim_labels=b01f_01io->b01f`), 2-D, stride 1, no
//! dilation or reversal, one group, any padding and kernel size, at most
//! [`MAX_CHANNELS`](super::MAX_CHANNELS) input channels.
//!
//! With one channel and a 5x5 window the patch-matrix GEMM has K = 25: packing and memory
//! traffic dominate it. Here a run of output rows reads a band of zero-padded input rows
//! (`fill_band`), and register tiles (`tile.rs`) of up to 14 output pixels x 32
//! output channels (AVX-512; 6 x 16 with AVX2) run along each row: per kernel tap, the input
//! values are broadcast and multiplied with the tap's weight vectors, all accumulators
//! staying in registers until the tile's sums are stored. `threads` workers take runs of
//! `ROWS_PER_TAKE` output rows of one image as they become free; every output element is
//! computed by the same code whoever computes it, so the result is bitwise the same for any
//! thread count.

use super::channel_blocks;
use super::tile::{fill_band, run_tile, Tile};
use crate::cpu::Isa;
use crate::geometry::Conv2dGeometry;
use crate::parallel::{for_each_worker, Shared};
use crate::pooling::PoolEpilogue;
use crate::scratch::{floats, Scratch};
use crate::KernelError;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Output rows a worker takes at a time, all from one image.
const ROWS_PER_TAKE: usize = 4;

/// A planned forward convolution.
#[derive(Clone, Debug)]
pub struct DirectConv {
    isa: Isa,
    /// One band of `ROWS_PER_TAKE + kh - 1` padded input rows per worker, `band_elems` floats
    /// apart, at this offset of the scratch block.
    bands: usize,
    band_elems: usize,
    scratch: Scratch,
    workers: usize,
    batch: usize,
    height: usize,
    width: usize,
    channels: usize,
    kh: usize,
    kw: usize,
    out_h: usize,
    out_w: usize,
    out_channels: usize,
    pad_top: isize,
    pad_left: isize,
}

impl DirectConv {
    /// Plans `geometry` on `threads` workers; declines more than `MAX_CHANNELS` input channels.
    pub fn new(geometry: &Conv2dGeometry, threads: usize) -> Result<DirectConv, KernelError> {
        let g = geometry;
        if !g.is_nonempty() {
            return Err(KernelError::declined("direct convolution", "empty"));
        }
        if g.channels > super::MAX_CHANNELS {
            return Err(KernelError::declined(
                "direct convolution",
                "more input channels than MAX_CHANNELS",
            ));
        }
        let [oh, ow] = g.output_size().expect("checked by is_nonempty");
        let (n, c, [kh, kw]) = (g.batch, g.channels, g.window);
        let band_elems = ((ROWS_PER_TAKE + kh - 1) * (ow + kw - 1) * c).next_multiple_of(16);
        let workers = threads.clamp(1, n * oh.div_ceil(ROWS_PER_TAKE));
        let mut scratch = Scratch::default();
        Ok(DirectConv {
            isa: Isa::detect(),
            bands: scratch.region(band_elems * workers * 4),
            band_elems,
            scratch,
            workers,
            batch: n,
            height: g.height,
            width: g.width,
            channels: c,
            kh,
            kw,
            out_h: oh,
            out_w: ow,
            out_channels: g.out_channels,
            pad_top: g.padding[0].0,
            pad_left: g.padding[1].0,
        })
    }

    /// Runs on `isa` instead of the detected one (tests and benches; the machine must have it).
    pub fn with_isa(mut self, isa: Isa) -> DirectConv {
        self.isa = isa;
        self
    }

    /// Bytes of scratch memory [`Self::run`] needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// Whether [`Self::run_fused`] can compute `pool` of this convolution's output in its
    /// epilogue: the pool reads this output's shape and each of its windows lies inside one
    /// run of `ROWS_PER_TAKE` output rows.
    pub fn accepts_pool(&self, pool: &PoolEpilogue) -> bool {
        pool.reads(self.batch, self.out_h, self.out_w, self.out_channels)
            && pool.pool.fits_blocks([ROWS_PER_TAKE, usize::MAX])
    }

    /// `output = conv(input, kernel)`.
    ///
    /// # Safety
    /// `input` must hold `[batch, height, width, channels]`, `kernel` `[kh, kw, channels,
    /// out_channels]` and `output` `[batch, out_h, out_w, out_channels]` floats (row-major),
    /// and `scratch` [`Self::scratch_bytes`] bytes, 64-byte aligned.
    pub unsafe fn run(
        &self,
        input: *const f32,
        kernel: *const f32,
        output: *mut f32,
        scratch: *mut u8,
    ) {
        self.run_with_bias(input, kernel, None, output, scratch)
    }

    /// `output = conv(input, kernel) + bias` (bias broadcast over the output channels), the
    /// bits of the convolution followed by a separate add: each sum is rounded, then the bias
    /// added in the store, which saves the add's pass over the output.
    ///
    /// # Safety
    /// As [`Self::run`]; `bias`, when given, must hold `out_channels` floats.
    pub(crate) unsafe fn run_with_bias(
        &self,
        input: *const f32,
        kernel: *const f32,
        bias: Option<*const f32>,
        output: *mut f32,
        scratch: *mut u8,
    ) {
        self.run_fused(input, kernel, bias, None, output, scratch)
    }

    /// [`Self::run_with_bias`], and when `pool` is given, the max-pool of the output (which
    /// must [`Self::accepts_pool`]) computed for each run of rows right after it is stored:
    /// the bits of a separate pool, without its second read of the whole output. With
    /// [`PoolEpilogue::discard_output`] the output is not stored at all (`output` is not
    /// written).
    ///
    /// # Safety
    /// As [`Self::run_with_bias`]; the pool's output must hold its shape and overlap none of
    /// the other buffers.
    pub unsafe fn run_fused(
        &self,
        input: *const f32,
        kernel: *const f32,
        bias: Option<*const f32>,
        pool: Option<PoolEpilogue>,
        output: *mut f32,
        scratch: *mut u8,
    ) {
        assert!(
            pool.is_none_or(|p| self.accepts_pool(&p)),
            "direct convolution: a pool it does not accept"
        );
        let bias = bias.map(|b| Shared(b as *mut f32));
        let out = output;
        let (c, oc) = (self.channels, self.out_channels);
        // [kh, kw, c, oc]: a tile's weight vector for one tap is contiguous.
        let weights = kernel;
        let band_w = self.out_w + self.kw - 1;
        let runs = self.out_h.div_ceil(ROWS_PER_TAKE);
        let items = self.batch * runs;
        let image_elems = self.height * self.width * c;
        let bands = Shared(floats(scratch, self.bands));
        let (input, weights, out) = (
            Shared(input as *mut f32),
            Shared(weights as *mut f32),
            Shared(out),
        );
        let next_item = AtomicUsize::new(0);
        // With the output discarded, each take's rows go to an image of the worker's own, at
        // their place in it, where the pool reads them: 100 KB for the MNIST step's first
        // layer, which stays in L2 from image to image instead of going to memory. A heap
        // block per call and worker: small beside the call, and the buffer assignment need
        // not know of it.
        let discard = pool.is_some_and(|p| p.discard_output);
        let out_image = self.out_h * self.out_w * oc;
        for_each_worker(self.workers, |wk| {
            let band = bands.get().add(wk * self.band_elems);
            let mut own_image = vec![0f32; if discard { out_image } else { 0 }];
            let own_image = own_image.as_mut_ptr();
            loop {
                let item = next_item.fetch_add(1, Ordering::Relaxed);
                if item >= items {
                    break;
                }
                // Output rows y0..y1 of image n read input rows y0 - pad_top .. y1 - 1 +
                // kh - 1 - pad_top: one band for the run.
                let (n, y0) = (item / runs, item % runs * ROWS_PER_TAKE);
                let y1 = (y0 + ROWS_PER_TAKE).min(self.out_h);
                fill_band(
                    input.get().add(n * image_elems),
                    self.height,
                    self.width,
                    c,
                    y0 as isize - self.pad_top,
                    y1 - y0 + self.kh - 1,
                    self.pad_left,
                    band_w,
                    band,
                );
                for y in y0..y1 {
                    let band = band.add((y - y0) * band_w * c);
                    let out_row = if discard {
                        own_image.add(y * self.out_w * oc)
                    } else {
                        out.get().add((n * self.out_h + y) * self.out_w * oc)
                    };
                    for (o0, lanes) in channel_blocks(oc, self.isa.max_lanes()) {
                        // Blocks of `most` output pixels in one call, then the rest.
                        let most = self.isa.max_rows();
                        let full = self.out_w / most;
                        let runs = [(0, most, full), (full * most, self.out_w % most, 1)];
                        for (x0, rows, blocks) in runs {
                            if rows == 0 || blocks == 0 {
                                continue;
                            }
                            let tile = Tile {
                                a: band.add(x0 * c),
                                a_row: c as isize,
                                b: weights.get().add(o0),
                                outer: self.kh,
                                a_outer: (band_w * c) as isize,
                                b_outer: (self.kw * c * oc) as isize,
                                inner: self.kw * c,
                                a_inner: 1,
                                b_inner: oc as isize,
                                dst: out_row.add(x0 * oc + o0),
                                dst_row: oc as isize,
                                rows,
                                lanes,
                                accumulate: false,
                                bias: bias.map(|b| b.get().add(o0) as *const f32),
                                blocks,
                                a_block: (most * c) as isize,
                                dst_block: (most * oc) as isize,
                            };
                            run_tile(self.isa, &tile);
                        }
                    }
                }
                if let Some(p) = &pool {
                    let image = if discard {
                        own_image
                    } else {
                        out.get().add(n * out_image)
                    };
                    p.run_image_block(image, n, [y0, y1], [0, self.out_w]);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{scratch_block, values};

    /// The forward convolution by its definition, in f64: per output the sum and the sum of
    /// the products' magnitudes.
    fn reference(
        x: &[f32],
        xd: [usize; 4],
        k: &[f32],
        kd: [usize; 4],
        pads: [(i64, i64); 2],
    ) -> Vec<(f64, f64)> {
        let [n, h, w, c] = xd;
        let [kh, kw, _, o] = kd;
        let oh = (h as i64 + pads[0].0 + pads[0].1 - kh as i64 + 1) as usize;
        let ow = (w as i64 + pads[1].0 + pads[1].1 - kw as i64 + 1) as usize;
        let mut out = vec![(0f64, 0f64); n * oh * ow * o];
        for (i, (v, m)) in out.iter_mut().enumerate() {
            let (oc, x0, y0, b) = (i % o, i / o % ow, i / o / ow % oh, i / o / ow / oh);
            for ky in 0..kh {
                for kx in 0..kw {
                    let y = y0 as i64 + ky as i64 - pads[0].0;
                    let xx = x0 as i64 + kx as i64 - pads[1].0;
                    if y < 0 || y >= h as i64 || xx < 0 || xx >= w as i64 {
                        continue;
                    }
                    for ch in 0..c {
                        let xv = x[((b * h + y as usize) * w + xx as usize) * c + ch];
                        let kv = k[((ky * kw + kx) * c + ch) * o + oc];
                        *v += xv as f64 * kv as f64;
                        *m += (xv as f64 * kv as f64).abs();
                    }
                }
            }
        }
        out
    }

    /// Every instruction set, with its own row and channel blocking, against the definition:
    /// 1 and 2 workers, widths around the 6- and 14-pixel tiles, channel tails.
    #[test]
    fn every_isa_matches_the_definition() {
        type Case = ([usize; 4], [usize; 4], [(i64, i64); 2]);
        let cases: [Case; 4] = [
            ([2, 5, 15, 1], [3, 3, 1, 17], [(1, 1), (1, 1)]),
            ([1, 4, 29, 2], [2, 5, 2, 33], [(0, 1), (2, 2)]),
            ([3, 3, 7, 3], [1, 1, 3, 5], [(0, 0), (-1, 0)]),
            ([1, 6, 13, 4], [5, 3, 4, 40], [(2, 2), (0, 3)]),
        ];
        for isa in Isa::available() {
            for (xd, kd, pads) in cases {
                for threads in [1, 2] {
                    let [n, h, w, _] = xd;
                    let [kh, kw, _, o] = kd;
                    let oh = (h as i64 + pads[0].0 + pads[0].1 - kh as i64 + 1) as usize;
                    let ow = (w as i64 + pads[1].0 + pads[1].1 - kw as i64 + 1) as usize;
                    let x = values(xd.iter().product(), 1);
                    let k = values(kd.iter().product(), 2);
                    let mut out = vec![f32::NAN; n * oh * ow * o];
                    let geometry = Conv2dGeometry {
                        batch: n,
                        height: h,
                        width: w,
                        channels: xd[3],
                        window: [kh, kw],
                        out_channels: o,
                        padding: pads.map(|(lo, hi)| (lo as isize, hi as isize)),
                    };
                    let plan = DirectConv::new(&geometry, threads)
                        .expect("within the preconditions")
                        .with_isa(isa);
                    let mut scratch = scratch_block(plan.scratch_bytes());
                    unsafe {
                        plan.run(
                            x.as_ptr(),
                            k.as_ptr(),
                            out.as_mut_ptr(),
                            scratch.as_mut_ptr() as *mut u8,
                        )
                    };
                    let want = reference(&x, xd, &k, kd, pads);
                    // A sum of n products in f32 is within n u S of the exact sum.
                    let n_u = (kh * kw * xd[3]) as f64 * f64::from(f32::EPSILON) / 2.0;
                    for (i, (&g, &(w, m))) in out.iter().zip(&want).enumerate() {
                        assert!(
                            (g as f64 - w).abs() <= 1.01 * n_u * m,
                            "{isa:?} {xd:?} {kd:?} {threads} threads [{i}]: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    /// The max-pool computed run by run in the epilogue gives the bits of the convolution
    /// (with and without its bias) followed by a separate pool, on every instruction set and
    /// thread count, with an odd output height (11: takes of 4, 4 and 3 rows) and 40 channels.
    #[test]
    fn pool_in_the_epilogue_equals_a_separate_pool() {
        use crate::pooling::{check_epilogue, MaxPool, PoolGeometry};
        let ([n, h, w, c], [kh, kw, o]) = ([2usize, 11, 13, 3], [5usize, 5, 40]);
        let x = values(n * h * w * c, 1);
        let k = values(kh * kw * c * o, 2);
        let bias = values(o, 3);
        let geometry = Conv2dGeometry {
            batch: n,
            height: h,
            width: w,
            channels: c,
            window: [kh, kw],
            out_channels: o,
            padding: [(2, 2), (2, 2)],
        };
        let pool_geometry = PoolGeometry {
            batch: n,
            height: h,
            width: w,
            channels: o,
            window: [2, 2],
            stride: [2, 2],
        };
        for isa in Isa::available() {
            for threads in [1, 2] {
                let plan = DirectConv::new(&geometry, threads)
                    .expect("within the preconditions")
                    .with_isa(isa);
                let mut scratch = scratch_block(plan.scratch_bytes());
                let s = scratch.as_mut_ptr() as *mut u8;
                for (relu, b) in [(true, Some(bias.as_ptr())), (false, None)] {
                    let mut pool = MaxPool::new(pool_geometry, relu, 1).expect("a pool");
                    pool.isa = isa;
                    check_epilogue(
                        pool,
                        n * h * w * o,
                        |p| plan.accepts_pool(p),
                        |p, y| unsafe { plan.run_fused(x.as_ptr(), k.as_ptr(), b, p, y, s) },
                        &format!("{isa:?} {threads} threads relu {relu}"),
                    );
                }
                // Windows of 3 rows straddle the runs of 4: refused.
                let mut straddling = pool_geometry;
                straddling.window = [3, 3];
                straddling.stride = [3, 3];
                let refused = PoolEpilogue {
                    pool: MaxPool::new(straddling, true, 1).expect("a pool"),
                    output: std::ptr::null_mut(),
                    choices: std::ptr::null_mut(),
                    discard_output: false,
                };
                assert!(!plan.accepts_pool(&refused));
            }
        }
    }

    /// The bias added in the tiles' stores gives the bits of the convolution followed by a
    /// separate add, on every instruction set, with full and partial channel blocks (40).
    #[test]
    fn bias_in_the_store_equals_a_separate_add() {
        let ([n, h, w, c], [kh, kw, o]) = ([2usize, 6, 13, 3], [5usize, 5, 40]);
        let x = values(n * h * w * c, 1);
        let k = values(kh * kw * c * o, 2);
        let bias = values(o, 3);
        let geometry = Conv2dGeometry {
            batch: n,
            height: h,
            width: w,
            channels: c,
            window: [kh, kw],
            out_channels: o,
            padding: [(2, 2), (2, 2)],
        };
        for isa in Isa::available() {
            let plan = DirectConv::new(&geometry, 2)
                .expect("within the preconditions")
                .with_isa(isa);
            let mut scratch = scratch_block(plan.scratch_bytes());
            let s = scratch.as_mut_ptr() as *mut u8;
            let mut plain = vec![f32::NAN; n * h * w * o];
            let mut biased = vec![f32::NAN; n * h * w * o];
            unsafe {
                plan.run(x.as_ptr(), k.as_ptr(), plain.as_mut_ptr(), s);
                let b = Some(bias.as_ptr());
                plan.run_with_bias(x.as_ptr(), k.as_ptr(), b, biased.as_mut_ptr(), s);
            }
            for (i, (&p, &g)) in plain.iter().zip(&biased).enumerate() {
                let want = p + bias[i % o];
                assert_eq!(g.to_bits(), want.to_bits(), "{isa:?} [{i}]");
            }
        }
    }
}
