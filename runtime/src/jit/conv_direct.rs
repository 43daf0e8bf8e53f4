//! Direct forward convolution for few input channels (conv layer 1 of an image model): NHWC
//! input, HWIO kernel, NHWO output (`dim_labels=b01f_01io->b01f`), 2-D, stride 1, no
//! dilation or reversal, one group, any padding and kernel size, at most
//! [`MAX_CHANNELS`] input channels.
//!
//! With one channel and a 5x5 window the patch-matrix GEMM has K = 25: packing and memory
//! traffic dominate it. Here a run of output rows reads a band of zero-padded input rows
//! (`fill_band`), and register tiles (`conv_direct_tile.rs`) of up to 14 output pixels x 32
//! output channels (AVX-512; 6 x 16 with AVX2) run along each row: per kernel tap, the input
//! values are broadcast and multiplied with the tap's weight vectors, all accumulators
//! staying in registers until the tile's sums are stored. `gemm_threads` workers take runs of
//! `ROWS_PER_TAKE` output rows of one image as they become free; every output element is
//! computed by the same code whoever computes it, so the result is bitwise the same for any
//! thread count.

use super::buffer::Addr;
use super::conv_direct_tile::{fill_band, run_tile, Isa, Tile};
use super::conv_shape::{f32_dims, plain_window, window_output};
use super::host::{guarded, resolve, Status};
use super::parallel::{for_each_worker, Shared};
use std::sync::atomic::{AtomicUsize, Ordering};
use tessel_compiler::ir::{ArrayShape, ConvDimensionNumbers, Convolution};

/// Most input channels the direct routines take; beyond it the GEMM's K is large enough.
pub const MAX_CHANNELS: usize = 4;
/// Output rows a worker takes at a time, all from one image.
const ROWS_PER_TAKE: usize = 4;

/// Everything the forward routine needs, decided at compile time.
#[derive(Clone, Debug)]
pub struct DirectConvPlan {
    name: String,
    isa: Isa,
    input: Addr,
    kernel: Addr,
    output: Addr,
    /// One band of `ROWS_PER_TAKE + kh - 1` padded input rows per worker, `band_elems` floats
    /// apart.
    bands: Addr,
    band_elems: usize,
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

/// Output channels `o0..o0 + lanes` of each tile: blocks of `most`, the rest in one block.
pub(crate) fn channel_blocks(channels: usize, most: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..channels)
        .step_by(most)
        .map(move |o0| (o0, (channels - o0).min(most)))
}

impl DirectConvPlan {
    /// Plans convolution `name` if it meets the preconditions (module comment), else `None`.
    pub fn new(
        name: &str,
        conv: &Convolution,
        input: (Addr, &ArrayShape),
        kernel: (Addr, &ArrayShape),
        output: (Addr, &ArrayShape),
        threads: usize,
        alloc: &mut dyn FnMut(usize) -> Addr,
    ) -> Option<DirectConvPlan> {
        if conv.dims != ConvDimensionNumbers::nhwc_hwio() {
            return None;
        }
        let pads = plain_window(conv)?;
        let (i, k, o) = (f32_dims(input.1)?, f32_dims(kernel.1)?, f32_dims(output.1)?);
        let [n, h, w, c] = i[..] else { return None };
        let [kh, kw, kc, ko] = k[..] else { return None };
        let [on, oh, ow, oc] = o[..] else { return None };
        let sizes_match = kc == c
            && on == n
            && oc == ko
            && conv.window.dims[0].size as usize == kh
            && conv.window.dims[1].size as usize == kw
            && window_output(h, pads[0], kh) == Some(oh)
            && window_output(w, pads[1], kw) == Some(ow);
        if !sizes_match || c > MAX_CHANNELS {
            return None;
        }
        let band_elems = ((ROWS_PER_TAKE + kh - 1) * (ow + kw - 1) * c).next_multiple_of(16);
        let workers = threads.clamp(1, n * oh.div_ceil(ROWS_PER_TAKE));
        Some(DirectConvPlan {
            name: name.to_string(),
            isa: Isa::detect(),
            input: input.0,
            kernel: kernel.0,
            output: output.0,
            bands: alloc(band_elems * workers * 4),
            band_elems,
            workers,
            batch: n,
            height: h,
            width: w,
            channels: c,
            kh,
            kw,
            out_h: oh,
            out_w: ow,
            out_channels: oc,
            pad_top: pads[0].0,
            pad_left: pads[1].0,
        })
    }

    /// # Safety
    /// `arena` must be the program's arena.
    unsafe fn run(&self, arena: *mut u8) {
        let input = resolve(self.input, arena) as *const f32;
        let out = resolve(self.output, arena) as *mut f32;
        let (c, oc) = (self.channels, self.out_channels);
        // [kh, kw, c, oc]: a tile's weight vector for one tap is contiguous.
        let weights = resolve(self.kernel, arena) as *const f32;
        let band_w = self.out_w + self.kw - 1;
        let runs = self.out_h.div_ceil(ROWS_PER_TAKE);
        let items = self.batch * runs;
        let image_elems = self.height * self.width * c;
        let bands = Shared(resolve(self.bands, arena) as *mut f32);
        let (input, weights, out) = (
            Shared(input as *mut f32),
            Shared(weights as *mut f32),
            Shared(out),
        );
        let next_item = AtomicUsize::new(0);
        for_each_worker(self.workers, |wk| {
            let band = bands.get().add(wk * self.band_elems);
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
                    let out_row = out.get().add((n * self.out_h + y) * self.out_w * oc);
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
                                blocks,
                                a_block: (most * c) as isize,
                                dst_block: (most * oc) as isize,
                            };
                            run_tile(self.isa, &tile);
                        }
                    }
                }
            }
        });
    }
}

/// Called by generated code: `plan` is a `*const DirectConvPlan` the executable keeps alive.
///
/// # Safety
/// `plan` must point to a live `DirectConvPlan` and `arena` be the program's arena.
pub unsafe extern "C" fn direct_conv_routine(
    plan: *const DirectConvPlan,
    arena: *mut u8,
) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || {
        unsafe { plan.run(arena) };
        Ok(())
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tessel_compiler::ir::{ElementType, Window, WindowDim};

    /// A 2-D window of `sizes` with `pads`, stride 1.
    pub(crate) fn window(sizes: [usize; 2], pads: [(i64, i64); 2]) -> Window {
        let dim = |i: usize| {
            let mut d = WindowDim::new(sizes[i] as i64);
            (d.pad_low, d.pad_high) = pads[i];
            d
        };
        Window {
            dims: vec![dim(0), dim(1)],
        }
    }

    pub(crate) fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2000) as f32 / 500.0 - 2.0
            })
            .collect()
    }

    /// Scratch space for a plan: `alloc` hands out offsets in one arena.
    pub(crate) struct Scratch(pub usize);

    impl Scratch {
        pub fn alloc(&mut self, bytes: usize) -> Addr {
            let at = self.0;
            self.0 += bytes.next_multiple_of(64);
            Addr::Arena(at)
        }

        pub fn arena(&self) -> Vec<u64> {
            vec![0; self.0 / 8 + 1]
        }
    }

    pub(crate) fn shape(dims: &[usize]) -> ArrayShape {
        let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        ArrayShape::new(ElementType::F32, &dims)
    }

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
                    let conv = Convolution {
                        window: window([kh, kw], pads),
                        dims: ConvDimensionNumbers::nhwc_hwio(),
                        feature_group_count: 1,
                        batch_group_count: 1,
                    };
                    let mut scratch = Scratch(0);
                    let mut plan = DirectConvPlan::new(
                        "t",
                        &conv,
                        (Addr::Absolute(x.as_ptr() as usize), &shape(&xd)),
                        (Addr::Absolute(k.as_ptr() as usize), &shape(&kd)),
                        (
                            Addr::Absolute(out.as_mut_ptr() as usize),
                            &shape(&[n, oh, ow, o]),
                        ),
                        threads,
                        &mut |b| scratch.alloc(b),
                    )
                    .expect("within the preconditions");
                    plan.isa = isa;
                    let mut arena = scratch.arena();
                    unsafe { plan.run(arena.as_mut_ptr() as *mut u8) };
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
}
