//! Convolution of an input dilated by a stride (XLA's base or `lhs_dilate`), split by output
//! phase ([`PhaseConv`]). This is how the data gradient of a strided convolution is written:
//! dY with `s - 1` holes between its pixels, convolved at stride 1 with the reversed kernel.
//! The patch GEMM would multiply the holes (for a stride-2 3x3 window, 3/4 of its products).
//!
//! Output row `y = s * q + r` reads the dilated input at `y + k - pad_low` for window row `k`,
//! a real pixel only when `r + k - pad_low` is a multiple of `s`, and then pixel
//! `q + (r + k - pad_low) / s`. So the outputs of each phase `r` (per spatial dimension) form a
//! stride-1 convolution of the undilated input with a sub-window: for a 3x3 window and stride
//! 2, the four phases take 2x2, 2x1, 1x2 and 1x1 taps, and no product touches a hole. A phase
//! with no tap (a 1x1 window at stride 2 reaches a quarter of the outputs) is zero.
//!
//! Each phase runs as a patch GEMM: in chunks of its output pixels, the taps' input channels
//! are gathered into a `[rows, taps * C]` matrix, multiplied by the phase's kernel (packed
//! once per call as `[taps * C, O]`) into the worker's buffer, and each row stored at its
//! output pixel. The chunks depend on the shape only and each output is one GEMM's dot
//! product, so the result is the same on any number of threads.

#[cfg(test)]
mod tests;

use crate::gemm::{sgemm, GemmBackend};
use crate::parallel::{for_each_share_on_slots, Shared};
use crate::scratch::{floats, Scratch};
use crate::winograd::KernelLayout;
use crate::KernelError;

/// Largest patch matrix chunk one worker gathers at once, in elements (fits in L2 cache).
const PATCH_ELEMS: usize = 1 << 16;

/// Fewest rows a chunk is cut to (below it the GEMM's overhead shows), and the chunks per
/// phase aimed for when the phase is small, so that two threads share it.
const MIN_CHUNK_ROWS: usize = 64;
const CHUNKS_PER_PHASE: usize = 8;

/// A 2-D convolution of an NHWC input dilated by `dilation`, at stride 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DilatedInputGeometry {
    /// The undilated input `[batch, height, width, channels]`.
    pub batch: usize,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
    /// Kernel rows and columns.
    pub window: [usize; 2],
    pub out_channels: usize,
    /// Output rows and columns (the output is `[batch, rows, columns, out_channels]`).
    pub out_size: [usize; 2],
    /// The input's dilation (holes between pixels plus one) per spatial dimension.
    pub dilation: [usize; 2],
    /// Low padding of the dilated input per spatial dimension; negative crops.
    pub pad_low: [isize; 2],
}

/// One window tap of a phase in one spatial dimension: the kernel index it reads (after any
/// reversal) and the input offset from the phase's output index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tap {
    kernel: usize,
    offset: isize,
}

/// The outputs of one phase: every `dilation`-th output from `first`, and the taps that reach
/// input pixels.
#[derive(Clone, Debug)]
struct Phase {
    first: [usize; 2],
    /// Outputs of the phase per spatial dimension.
    count: [usize; 2],
    taps: [Vec<Tap>; 2],
    /// The packed kernel `[taps * C, O]` (a float offset into the packed-kernel region).
    packed: usize,
    rows_per_chunk: usize,
    chunks: usize,
}

impl Phase {
    fn cols(&self, channels: usize) -> usize {
        self.taps[0].len() * self.taps[1].len() * channels
    }
}

/// A planned convolution of a dilated input.
#[derive(Clone, Debug)]
pub struct PhaseConv {
    g: DilatedInputGeometry,
    layout: KernelLayout,
    phases: Vec<Phase>,
    /// Scratch offsets: the packed kernels, and per worker a patch chunk and a result chunk.
    packed: usize,
    patches: usize,
    patch_elems: usize,
    results: usize,
    result_elems: usize,
    workers: usize,
    backend: GemmBackend,
    scratch: Scratch,
}

/// The taps of phase `first` in one dimension of `window` over an input of `size` dilated by
/// `s` and padded low by `pad` (the window reversed when `reversed`).
fn taps(first: usize, window: usize, s: usize, pad: isize, reversed: bool) -> Vec<Tap> {
    (0..window)
        .filter_map(|k| {
            let at = first as isize + k as isize - pad;
            (at.rem_euclid(s as isize) == 0).then(|| Tap {
                kernel: if reversed { window - 1 - k } else { k },
                offset: at.div_euclid(s as isize),
            })
        })
        .collect()
}

impl PhaseConv {
    /// Plans `geometry` with the kernel in `layout` (strides of `[kh, kw, in, out]`) on
    /// `threads` workers with GEMM library `backend`. Declines an input that is not dilated
    /// (the stride-1 routines are better there) and an empty one.
    pub fn new(
        geometry: DilatedInputGeometry,
        layout: KernelLayout,
        backend: GemmBackend,
        threads: usize,
    ) -> Result<PhaseConv, KernelError> {
        let g = geometry;
        let sizes = [
            g.batch,
            g.height,
            g.width,
            g.channels,
            g.out_channels,
            g.out_size[0],
            g.out_size[1],
        ];
        if sizes
            .iter()
            .chain(&g.window)
            .chain(&g.dilation)
            .any(|&d| d == 0)
        {
            return Err(KernelError::declined("phase_conv", "an empty convolution"));
        }
        if g.dilation == [1, 1] {
            return Err(KernelError::declined("phase_conv", "an undilated input"));
        }
        let mut phases = Vec::new();
        let mut packed_elems = 0;
        let (mut patch_elems, mut result_elems) = (0, 0);
        for ry in 0..g.dilation[0].min(g.out_size[0]) {
            for rx in 0..g.dilation[1].min(g.out_size[1]) {
                let first = [ry, rx];
                let count = [0, 1].map(|d| (g.out_size[d] - first[d]).div_ceil(g.dilation[d]));
                let taps = [0, 1].map(|d| {
                    taps(
                        first[d],
                        g.window[d],
                        g.dilation[d],
                        g.pad_low[d],
                        layout.reversed[d],
                    )
                });
                let rows = g.batch * count[0] * count[1];
                let mut phase = Phase {
                    first,
                    count,
                    taps,
                    packed: packed_elems,
                    rows_per_chunk: 0,
                    chunks: 0,
                };
                let cols = phase.cols(g.channels).max(1);
                let most = rows.div_ceil(CHUNKS_PER_PHASE).max(MIN_CHUNK_ROWS);
                phase.rows_per_chunk = (PATCH_ELEMS / cols).clamp(1, most).min(rows);
                phase.chunks = rows.div_ceil(phase.rows_per_chunk);
                packed_elems += phase.cols(g.channels) * g.out_channels;
                patch_elems = patch_elems.max(phase.rows_per_chunk * cols);
                result_elems = result_elems.max(phase.rows_per_chunk * g.out_channels);
                phases.push(phase);
            }
        }
        let items: usize = phases.iter().map(|p| p.chunks).sum();
        let workers = threads.clamp(1, items.max(1));
        let mut scratch = Scratch::default();
        let packed = scratch.region(packed_elems * 4);
        let patches = scratch.region(patch_elems * workers * 4);
        let results = scratch.region(result_elems * workers * 4);
        Ok(PhaseConv {
            g,
            layout,
            phases,
            packed,
            patches,
            patch_elems,
            results,
            result_elems,
            workers,
            backend,
            scratch,
        })
    }

    /// Bytes of scratch memory [`Self::run`] needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// `output = conv(dilate(input), kernel)`, input and output NHWC.
    ///
    /// # Safety
    /// The pointers must hold the arrays of the geometry (the kernel as its layout says), and
    /// `scratch` [`Self::scratch_bytes`] bytes, 64-byte aligned.
    pub unsafe fn run(
        &self,
        input: *const f32,
        kernel: *const f32,
        output: *mut f32,
        scratch: *mut u8,
    ) {
        let packed = floats(scratch, self.packed);
        self.pack_kernels(kernel, packed);
        let (patches, results) = (floats(scratch, self.patches), floats(scratch, self.results));
        let items: Vec<(usize, usize)> = self
            .phases
            .iter()
            .enumerate()
            .flat_map(|(p, phase)| (0..phase.chunks).map(move |c| (p, c)))
            .collect();
        let (input, packed, output, patches, results) = (
            Shared(input as *mut f32),
            Shared(packed),
            Shared(output),
            Shared(patches),
            Shared(results),
        );
        for_each_share_on_slots(items.len(), self.workers, |slot, item| {
            let (p, chunk) = items[item];
            self.run_chunk(
                &self.phases[p],
                chunk,
                input.get(),
                packed.get(),
                output.get(),
                patches.get().add(slot * self.patch_elems),
                results.get().add(slot * self.result_elems),
            );
        });
    }

    /// Packs each phase's taps of `kernel` as a `[taps * C, O]` matrix.
    unsafe fn pack_kernels(&self, kernel: *const f32, packed: *mut f32) {
        let (c, o) = (self.g.channels, self.g.out_channels);
        let s = self.layout.strides;
        for phase in &self.phases {
            let mut to = packed.add(phase.packed);
            for ty in &phase.taps[0] {
                for tx in &phase.taps[1] {
                    for ci in 0..c {
                        let from = kernel.add(ty.kernel * s[0] + tx.kernel * s[1] + ci * s[2]);
                        for oi in 0..o {
                            *to.add(oi) = *from.add(oi * s[3]);
                        }
                        to = to.add(o);
                    }
                }
            }
        }
    }

    /// Chunk `chunk` of `phase`: gathers its patches, multiplies them by the phase's kernel
    /// and stores the rows at their output pixels (zeros for a phase with no tap).
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_chunk(
        &self,
        phase: &Phase,
        chunk: usize,
        input: *const f32,
        packed: *const f32,
        output: *mut f32,
        patch: *mut f32,
        result: *mut f32,
    ) {
        let g = &self.g;
        let (c, o) = (g.channels, g.out_channels);
        let [qh, qw] = phase.count;
        let row0 = chunk * phase.rows_per_chunk;
        let rows = phase.rows_per_chunk.min(g.batch * qh * qw - row0);
        let cols = phase.cols(c);
        let pixel = |row: usize| {
            let (n, q) = (row / (qh * qw), row % (qh * qw));
            (n, q / qw, q % qw)
        };
        if cols > 0 {
            for r in 0..rows {
                let (n, qy, qx) = pixel(row0 + r);
                let image = input.add(n * g.height * g.width * c);
                let mut to = patch.add(r * cols);
                for ty in &phase.taps[0] {
                    let iy = qy as isize + ty.offset;
                    let row_in = (0..g.height as isize).contains(&iy);
                    for tx in &phase.taps[1] {
                        let ix = qx as isize + tx.offset;
                        if row_in && (0..g.width as isize).contains(&ix) {
                            let from = image.add((iy as usize * g.width + ix as usize) * c);
                            std::ptr::copy_nonoverlapping(from, to, c);
                        } else {
                            std::ptr::write_bytes(to, 0, c);
                        }
                        to = to.add(c);
                    }
                }
            }
            sgemm(
                self.backend,
                1,
                rows,
                o,
                cols,
                patch,
                cols as isize,
                1,
                packed.add(phase.packed),
                o as isize,
                1,
                result,
                o as isize,
                1,
                false,
            );
        }
        let [oh, ow] = g.out_size;
        for r in 0..rows {
            let (n, qy, qx) = pixel(row0 + r);
            let y = phase.first[0] + qy * g.dilation[0];
            let x = phase.first[1] + qx * g.dilation[1];
            let to = output.add(((n * oh + y) * ow + x) * o);
            if cols > 0 {
                std::ptr::copy_nonoverlapping(result.add(r * o), to, o);
            } else {
                std::ptr::write_bytes(to, 0, o);
            }
        }
    }
}
