//! Direct forward convolution for few input channels (conv layer 1 of an image model): NHWC
//! input, HWIO kernel, NHWO output (`dim_labels=b01f_01io->b01f`), 2-D, stride 1, no
//! dilation or reversal, one group, any padding and kernel size, at most
//! [`MAX_CHANNELS`] input channels.
//!
//! With one channel and a 5x5 window the patch-matrix GEMM has K = 25: packing and memory
//! traffic dominate it. Here each output row reads a band of `KH` zero-padded input rows
//! (`fill_band`) and runs register tiles (`conv_direct_tile.rs`) of up to 6 output pixels x
//! 16 output channels: per kernel tap, the 6 input values are broadcast and multiplied with
//! the tap's weight vectors, all accumulators staying in registers until the tile's sums are
//! stored. Output rows are split among `gemm_threads` workers in contiguous ranges; every
//! output element is computed by the same code whatever the split.

use super::buffer::Addr;
use super::conv_direct_tile::{fill_band, run_tile, Isa, Tile, MAX_LANES, MAX_ROWS};
use super::conv_select::{ConvAlgorithm, ConvRoutine};
use super::host::{guarded, resolve, Status};
use super::parallel::{for_each_worker, Shared};
use super::JitOptions;
use tessel_compiler::ir::{ArrayShape, ConvDimensionNumbers, Convolution, ElementType};

/// Most input channels the direct routines take; beyond it the GEMM's K is large enough.
pub const MAX_CHANNELS: usize = 4;

/// Everything the forward routine needs, decided at compile time.
#[derive(Clone, Debug)]
pub struct DirectConvPlan {
    name: String,
    isa: Isa,
    input: Addr,
    kernel: Addr,
    output: Addr,
    /// One band of `kh` padded input rows per worker, `band_elems` floats apart.
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

/// The spatial sizes and padding of a 2-D stride-1 window with no dilation or reversal, one
/// group: `Some([(pad_low, pad_high); 2])`, else `None`.
pub(crate) fn plain_window(conv: &Convolution) -> Option<[(isize, isize); 2]> {
    let w = &conv.window.dims;
    let plain = w.len() == 2
        && conv.feature_group_count <= 1
        && conv.batch_group_count <= 1
        && w.iter().all(|d| {
            d.stride == 1 && d.window_dilation == 1 && d.base_dilation == 1 && !d.reversal
        });
    plain.then(|| [0, 1].map(|i| (w[i].pad_low as isize, w[i].pad_high as isize)))
}

/// The dims of an f32 array with no zero-sized dimension.
pub(crate) fn f32_dims(s: &ArrayShape) -> Option<Vec<usize>> {
    let ok = s.element_type == ElementType::F32 && s.dims.iter().all(|&d| d > 0);
    ok.then(|| s.dims.iter().map(|&d| d as usize).collect())
}

/// The output size of a stride-1 window of `k` over `n` padded by `pad`, if positive.
pub(crate) fn window_output(n: usize, pad: (isize, isize), k: usize) -> Option<usize> {
    let out = n as isize + pad.0 + pad.1 - k as isize + 1;
    (out > 0).then_some(out as usize)
}

/// Output channels `o0..o0 + lanes` of each tile: blocks of 16, the rest in one block.
pub(crate) fn channel_blocks(channels: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..channels)
        .step_by(MAX_LANES)
        .map(move |o0| (o0, (channels - o0).min(MAX_LANES)))
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
        let band_elems = (kh * (ow + kw - 1) * c).next_multiple_of(16);
        let workers = threads.clamp(1, n * oh);
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
        let rows_total = self.batch * self.out_h;
        let image_elems = self.height * self.width * c;
        let bands = Shared(resolve(self.bands, arena) as *mut f32);
        let (input, weights, out) = (
            Shared(input as *mut f32),
            Shared(weights as *mut f32),
            Shared(out),
        );
        let workers = self.workers;
        for_each_worker(workers, |wk| {
            let band = bands.get().add(wk * self.band_elems);
            for row in rows_total * wk / workers..rows_total * (wk + 1) / workers {
                let (n, y) = (row / self.out_h, row % self.out_h);
                fill_band(
                    input.get().add(n * image_elems),
                    self.height,
                    self.width,
                    c,
                    y as isize - self.pad_top,
                    self.kh,
                    self.pad_left,
                    band_w,
                    band,
                );
                let out_row = out.get().add(row * self.out_w * oc);
                for (o0, lanes) in channel_blocks(oc) {
                    // Runs of 6 output pixels in one call, then the rest.
                    let full = self.out_w / MAX_ROWS;
                    let runs = [
                        (0, MAX_ROWS, full),
                        (full * MAX_ROWS, self.out_w % MAX_ROWS, 1),
                    ];
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
                            a_block: (MAX_ROWS * c) as isize,
                            dst_block: (MAX_ROWS * oc) as isize,
                        };
                        run_tile(self.isa, &tile);
                    }
                }
            }
        });
    }
}

/// Plans the direct forward routine for `conv` under [`ConvAlgorithm::Auto`] when its
/// preconditions hold (module comment); `None` leaves the convolution to the other routines.
pub fn plan_direct_conv(
    name: &str,
    conv: &Convolution,
    input: (Addr, &ArrayShape),
    kernel: (Addr, &ArrayShape),
    output: (Addr, &ArrayShape),
    options: &JitOptions,
    alloc: &mut dyn FnMut(usize) -> Addr,
) -> Option<ConvRoutine> {
    if options.conv_algorithm != ConvAlgorithm::Auto {
        return None;
    }
    let plan = DirectConvPlan::new(
        name,
        conv,
        input,
        kernel,
        output,
        options.gemm_threads,
        alloc,
    )?;
    Some(ConvRoutine {
        routine: direct_conv_routine as *const () as usize,
        plan: Box::new(plan),
    })
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
