//! Direct weight gradient of a convolution with few input channels, in the layouts JAX emits
//! (`dim_labels=f01b_i01o->01bf`): input `[F, H, W, B]` (F = the images, B = the forward
//! convolution's input channels, at most [`MAX_CHANNELS`](super::MAX_CHANNELS)), kernel `[F, WH, WW, O]` (the
//! output gradient), output `[OH, OW, B, O]` (the weight gradient). 2-D, stride 1, no
//! dilation or reversal, one group, any padding:
//!
//! `out[oy, ox, b, o] = sum_{f, y, x} in[f, oy + y - pad_top, ox + x - pad_left, b] * k[f, y, x, o]`
//!
//! It is planned from the geometry of the forward convolution (batch F, channels B, window
//! OH x OW, O output channels, whose output is WH x WW).
//!
//! As a GEMM this has M = OH * OW * B = 25 for MNIST's conv 1, too few rows for packing to pay.
//! Here the output gradient is streamed in chunks of `CHUNK_ROWS` rows of one image (small
//! enough to stay in L1 cache); for every output row `oy` a register tile
//! (`tile.rs`) keeps up to 14 (ox, b) x 32 channels of sums (6 x 16 with AVX2)
//! in registers while it runs over the chunk, broadcasting input values and multiplying them
//! with the gradient's channel vectors, then adds them to partial sums. The chunks are cut
//! into at most `GROUPS` fixed groups of consecutive chunks, each with its own partial;
//! workers take whole groups as they become free (a worker slowed down by another process
//! does not hold the others up), and the partials are added in group order at the end. The
//! groups do not depend on the number of workers, so the result is bitwise the same for any
//! thread count. While a chunk is worked on, the next chunk and the next item's input rows are
//! prefetched (`prefetch.rs`): in the step the gradient arrives from DRAM.

use super::channel_blocks;
use super::tile::{fill_band, run_tile, Tile};
use crate::cpu::Isa;
use crate::geometry::Conv2dGeometry;
use crate::parallel::{for_each_worker, Shared};
use crate::prefetch::prefetch_part;
use crate::scratch::{floats, Scratch};
use crate::KernelError;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Output-gradient rows per chunk: 4 rows of 28 x 32 floats are 14 KB.
const CHUNK_ROWS: usize = 4;
/// The chunks are cut into at most this many groups, each summed into its own partial.
const GROUPS: usize = 16;

/// A planned weight gradient.
#[derive(Clone, Debug)]
pub struct DirectWeightGradient {
    isa: Isa,
    /// One partial sum `[OH, OW, B, O]` per group, `out_elems` floats apart (scratch offset).
    partials: usize,
    groups: usize,
    out_elems: usize,
    /// One band of padded input rows per worker, `band_elems` floats apart (scratch offset).
    bands: usize,
    band_elems: usize,
    scratch: Scratch,
    workers: usize,
    images: usize,
    height: usize,
    width: usize,
    channels: usize,
    grad_h: usize,
    grad_w: usize,
    out_h: usize,
    out_w: usize,
    out_channels: usize,
    pad_top: isize,
    pad_left: isize,
}

impl DirectWeightGradient {
    /// Plans the weight gradient of the forward convolution `geometry` on `threads` workers;
    /// declines more than `MAX_CHANNELS` input channels.
    pub fn new(
        geometry: &Conv2dGeometry,
        threads: usize,
    ) -> Result<DirectWeightGradient, KernelError> {
        let g = geometry;
        if !g.is_nonempty() {
            return Err(KernelError::declined("direct weight gradient", "empty"));
        }
        if g.channels > super::MAX_CHANNELS {
            return Err(KernelError::declined(
                "direct weight gradient",
                "more input channels than MAX_CHANNELS",
            ));
        }
        let [gh, gw] = g.output_size().expect("checked by is_nonempty");
        let (f, b, oc, [oh, ow]) = (g.batch, g.channels, g.out_channels, g.window);
        let groups = (f * gh.div_ceil(CHUNK_ROWS)).min(GROUPS);
        let workers = threads.clamp(1, groups);
        let out_elems = (oh * ow * b * oc).next_multiple_of(16);
        let band_elems = ((CHUNK_ROWS + oh - 1) * (ow + gw - 1) * b).next_multiple_of(16);
        let mut scratch = Scratch::default();
        Ok(DirectWeightGradient {
            isa: Isa::detect(),
            partials: scratch.region(out_elems * groups * 4),
            groups,
            out_elems,
            bands: scratch.region(band_elems * workers * 4),
            band_elems,
            scratch,
            workers,
            images: f,
            height: g.height,
            width: g.width,
            channels: b,
            grad_h: gh,
            grad_w: gw,
            out_h: oh,
            out_w: ow,
            out_channels: oc,
            pad_top: g.padding[0].0,
            pad_left: g.padding[1].0,
        })
    }

    /// Runs on `isa` instead of the detected one (tests and benches; the machine must have it).
    pub fn with_isa(mut self, isa: Isa) -> DirectWeightGradient {
        self.isa = isa;
        self
    }

    /// Bytes of scratch memory [`Self::run`] needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// `output = dW` of the forward convolution of `input` whose output gradient is `grad`.
    ///
    /// # Safety
    /// `input` must hold `[batch, height, width, channels]`, `grad` `[batch, grad_h, grad_w,
    /// out_channels]` and `output` `[kh, kw, channels, out_channels]` floats (row-major), and
    /// `scratch` [`Self::scratch_bytes`] bytes, 64-byte aligned.
    pub unsafe fn run(
        &self,
        input: *const f32,
        grad: *const f32,
        output: *mut f32,
        scratch: *mut u8,
    ) {
        let (b, oc) = (self.channels, self.out_channels);
        let band_w = self.out_w + self.grad_w - 1;
        let chunks = self.grad_h.div_ceil(CHUNK_ROWS);
        let items = self.images * chunks;
        let image_elems = self.height * self.width * b;
        // Tile rows are (ox, b) pairs, consecutive in both the band and the output.
        let tile_rows = self.out_w * b;
        let input = Shared(input as *mut f32);
        let grad = Shared(grad as *mut f32);
        let partials = Shared(floats(scratch, self.partials));
        let bands = Shared(floats(scratch, self.bands));
        let most_rows = self.isa.max_rows();
        let groups = self.groups;
        let next_group = AtomicUsize::new(0);
        let chunk_bytes = CHUNK_ROWS * self.grad_w * oc * 4;
        let grad_elems = self.images * self.grad_h * self.grad_w * oc;
        for_each_worker(self.workers, |wk| {
            let (input, grad) = (input.get() as *const f32, grad.get() as *const f32);
            let band = bands.get().add(wk * self.band_elems);
            let input_end = input.add(self.images * image_elems) as *const u8;
            let grad_end = grad.add(grad_elems) as *const u8;
            loop {
                let g = next_group.fetch_add(1, Ordering::Relaxed);
                if g >= groups {
                    break;
                }
                let part = partials.get().add(g * self.out_elems);
                std::ptr::write_bytes(part, 0, self.out_elems);
                for item in items * g / groups..items * (g + 1) / groups {
                    let (f, y0) = (item / chunks, item % chunks * CHUNK_ROWS);
                    let rows = CHUNK_ROWS.min(self.grad_h - y0);
                    fill_band(
                        input.add(f * image_elems),
                        self.height,
                        self.width,
                        b,
                        y0 as isize - self.pad_top,
                        rows + self.out_h - 1,
                        self.pad_left,
                        band_w,
                        band,
                    );
                    let chunk = grad.add((f * self.grad_h + y0) * self.grad_w * oc);
                    // The next item's chunk follows this one in memory: fetch it a part per
                    // output row (`prefetch.rs`, the gradient is often just out of DRAM).
                    let next = chunk.wrapping_add(rows * self.grad_w * oc) as *const u8;
                    // And the next item's input rows (the band is filled before any FMA).
                    if item + 1 < items {
                        let (nf, ny0) = ((item + 1) / chunks, (item + 1) % chunks * CHUNK_ROWS);
                        let first = (ny0 as isize - self.pad_top).max(0) as usize;
                        let at = input.wrapping_add((nf * self.height + first) * self.width * b);
                        let bytes = (CHUNK_ROWS + self.out_h - 1) * self.width * b * 4;
                        prefetch_part(at as *const u8, bytes, input_end, 0, 1);
                    }
                    for oy in 0..self.out_h {
                        prefetch_part(next, chunk_bytes, grad_end, oy, self.out_h);
                        for r0 in (0..tile_rows).step_by(most_rows) {
                            for (o0, lanes) in channel_blocks(oc, self.isa.max_lanes()) {
                                let tile = Tile {
                                    a: band.add(oy * band_w * b + r0),
                                    a_row: 1,
                                    b: chunk.add(o0),
                                    outer: rows,
                                    a_outer: (band_w * b) as isize,
                                    b_outer: (self.grad_w * oc) as isize,
                                    inner: self.grad_w,
                                    a_inner: b as isize,
                                    b_inner: oc as isize,
                                    dst: part.add((oy * tile_rows + r0) * oc + o0),
                                    dst_row: oc as isize,
                                    rows: (tile_rows - r0).min(most_rows),
                                    lanes,
                                    accumulate: true,
                                    bias: None,
                                    blocks: 1,
                                    a_block: 0,
                                    dst_block: 0,
                                };
                                run_tile(self.isa, &tile);
                            }
                        }
                    }
                }
            }
        });
        // The partials in group order.
        let out = output;
        let n = self.out_h * tile_rows * oc;
        let first = partials.get();
        std::ptr::copy_nonoverlapping(first, out, n);
        for g in 1..groups {
            let part = first.add(g * self.out_elems);
            for j in 0..n {
                *out.add(j) += *part.add(j);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{scratch_block, values};

    /// The weight gradient by its definition, in f64: per output the sum and the sum of the
    /// products' magnitudes.
    fn reference(
        x: &[f32],
        xd: [usize; 4],
        g: &[f32],
        gd: [usize; 4],
        out: [usize; 2],
        pads: [(i64, i64); 2],
    ) -> Vec<(f64, f64)> {
        let [f, h, w, b] = xd;
        let [_, gh, gw, o] = gd;
        let mut sums = vec![(0f64, 0f64); out[0] * out[1] * b * o];
        for (i, (v, m)) in sums.iter_mut().enumerate() {
            let (oc, bb, ox, oy) = (i % o, i / o % b, i / o / b % out[1], i / o / b / out[1]);
            for img in 0..f {
                for y in 0..gh {
                    for xx in 0..gw {
                        let iy = (oy + y) as i64 - pads[0].0;
                        let ix = (ox + xx) as i64 - pads[1].0;
                        if iy < 0 || iy >= h as i64 || ix < 0 || ix >= w as i64 {
                            continue;
                        }
                        let xv = x[((img * h + iy as usize) * w + ix as usize) * b + bb];
                        let gv = g[((img * gh + y) * gw + xx) * o + oc];
                        *v += xv as f64 * gv as f64;
                        *m += (xv as f64 * gv as f64).abs();
                    }
                }
            }
        }
        sums
    }

    /// Every instruction set, with its own row and channel blocking, against the definition:
    /// 1, 2 and 3 workers (partials added), chunks of rows with a short last one, channel
    /// tails, more (ox, b) rows than one tile holds.
    #[test]
    fn every_isa_matches_the_definition() {
        // (input dims, gradient dims, output spatial, pads)
        type Case = ([usize; 4], [usize; 4], [usize; 2], [(i64, i64); 2]);
        let cases: [Case; 4] = [
            ([3, 9, 9, 1], [3, 9, 9, 32], [5, 5], [(2, 2), (2, 2)]),
            ([2, 7, 11, 2], [2, 6, 9, 17], [4, 4], [(1, 1), (0, 1)]),
            ([1, 5, 20, 3], [1, 7, 4, 3], [2, 18], [(1, 2), (1, 0)]),
            ([4, 6, 5, 4], [4, 5, 5, 40], [2, 3], [(-1, 1), (1, 1)]),
        ];
        for isa in Isa::available() {
            for (xd, gd, os, pads) in cases {
                for threads in [1, 2, 3] {
                    let (b, o) = (xd[3], gd[3]);
                    let x = values(xd.iter().product(), 3);
                    let g = values(gd.iter().product(), 4);
                    let mut out = vec![f32::NAN; os[0] * os[1] * b * o];
                    // The forward convolution whose kernel gradient this is.
                    let geometry = Conv2dGeometry {
                        batch: xd[0],
                        height: xd[1],
                        width: xd[2],
                        channels: b,
                        window: os,
                        out_channels: o,
                        padding: pads.map(|(lo, hi)| (lo as isize, hi as isize)),
                    };
                    assert_eq!(geometry.output_size(), Some([gd[1], gd[2]]));
                    let plan = DirectWeightGradient::new(&geometry, threads)
                        .expect("within the preconditions")
                        .with_isa(isa);
                    let mut scratch = scratch_block(plan.scratch_bytes());
                    unsafe {
                        plan.run(
                            x.as_ptr(),
                            g.as_ptr(),
                            out.as_mut_ptr(),
                            scratch.as_mut_ptr() as *mut u8,
                        )
                    };
                    let want = reference(&x, xd, &g, gd, os, pads);
                    // A sum of n products in f32 is within n u S of the exact sum.
                    let n_u = (xd[0] * gd[1] * gd[2]) as f64 * f64::from(f32::EPSILON) / 2.0;
                    for (i, (&got, &(w, m))) in out.iter().zip(&want).enumerate() {
                        assert!(
                            (got as f64 - w).abs() <= 1.01 * n_u * m,
                            "{isa:?} {xd:?} {gd:?} {threads} threads [{i}]: {got} vs {w}"
                        );
                    }
                }
            }
        }
    }
}
