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
//! Each phase's taps of the kernel are packed once per call as `[taps, C, O]`; then each line
//! of a phase's outputs (one image row of it) runs on the direct convolutions' register tiles
//! (`conv_direct::tile`): a tile's rows are consecutive output pixels of the line, which read
//! input pixels `C` floats apart, its steps the taps' input rows (outer) and the taps'
//! columns and channels, contiguous in NHWC (inner), and it stores each row at its output
//! pixel, `s * O` floats apart. Nothing is gathered or copied. Pixels whose taps leave the
//! input (the padding) take the tile with only the taps inside. Each output is summed by one
//! tile in a fixed order, so the result is the same on any number of threads.

#[cfg(test)]
mod tests;

use crate::conv_direct::channel_blocks;
use crate::conv_direct::tile::{run_tile, Tile};
use crate::cpu::Isa;
use crate::parallel::{chunk_len, for_each_range, Shared};
use crate::scratch::{floats, Scratch};
use crate::winograd::KernelLayout;
use crate::KernelError;

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

/// One spatial dimension of a phase: its first output, how many outputs it has (every
/// `dilation`-th), and its taps: the kernel index of each (after any reversal) and the input
/// offset of the first from the phase's output index (the next taps read the next pixels).
#[derive(Clone, Debug)]
struct PhaseDim {
    first: usize,
    count: usize,
    kernel: Vec<usize>,
    offset: isize,
}

impl PhaseDim {
    /// The taps `[lo, hi)` that fall inside an input of `size` for output index `q`.
    fn inside(&self, q: usize, size: usize) -> (usize, usize) {
        let at = q as isize + self.offset;
        let taps = self.kernel.len() as isize;
        let lo = (-at).clamp(0, taps);
        let hi = (size as isize - at).clamp(lo, taps);
        (lo as usize, hi as usize)
    }
}

/// The outputs of one phase.
#[derive(Clone, Debug)]
struct Phase {
    dims: [PhaseDim; 2],
    /// The packed kernel `[taps_y, taps_x, C, O]` (a float offset into the packed region).
    packed: usize,
    /// The phase's first line (image row of its outputs) among all phases' lines.
    line0: usize,
}

/// A planned convolution of a dilated input.
#[derive(Clone, Debug)]
pub struct PhaseConv {
    g: DilatedInputGeometry,
    layout: KernelLayout,
    phases: Vec<Phase>,
    lines: usize,
    /// Scratch offset of the packed kernels.
    packed: usize,
    threads: usize,
    isa: Isa,
    scratch: Scratch,
}

/// The phase of dimension `d` whose first output is `first`.
fn phase_dim(g: &DilatedInputGeometry, reversed: bool, d: usize, first: usize) -> PhaseDim {
    let (window, s, pad) = (g.window[d], g.dilation[d] as isize, g.pad_low[d]);
    let taps: Vec<usize> = (0..window)
        .filter(|&k| (first as isize + k as isize - pad).rem_euclid(s) == 0)
        .collect();
    PhaseDim {
        first,
        count: (g.out_size[d] - first).div_ceil(g.dilation[d]),
        offset: taps
            .first()
            .map_or(0, |&k| (first as isize + k as isize - pad).div_euclid(s)),
        kernel: taps
            .iter()
            .map(|&k| if reversed { window - 1 - k } else { k })
            .collect(),
    }
}

impl PhaseConv {
    /// Plans `geometry` with the kernel in `layout` (strides of `[kh, kw, in, out]`) on
    /// `threads` workers. Declines an input that is not dilated (the stride-1 routines are
    /// better there) and an empty one.
    pub fn new(
        geometry: DilatedInputGeometry,
        layout: KernelLayout,
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
        let (mut phases, mut packed_elems, mut lines) = (Vec::new(), 0, 0);
        for ry in 0..g.dilation[0].min(g.out_size[0]) {
            for rx in 0..g.dilation[1].min(g.out_size[1]) {
                let dims = [
                    phase_dim(&g, layout.reversed[0], 0, ry),
                    phase_dim(&g, layout.reversed[1], 1, rx),
                ];
                let taps = dims[0].kernel.len() * dims[1].kernel.len();
                phases.push(Phase {
                    packed: packed_elems,
                    line0: lines,
                    dims,
                });
                packed_elems += taps * g.channels * g.out_channels;
                lines += g.batch * phases.last().map_or(0, |p| p.dims[0].count);
            }
        }
        let mut scratch = Scratch::default();
        let packed = scratch.region(packed_elems * 4);
        Ok(PhaseConv {
            g,
            layout,
            phases,
            lines,
            packed,
            threads: threads.max(1),
            isa: Isa::detect(),
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
        let (input, packed, output) = (Shared(input as *mut f32), Shared(packed), Shared(output));
        let chunk = chunk_len(self.lines, self.threads, 1);
        for_each_range(self.lines, chunk, self.threads, |l0, l1| {
            for line in l0..l1 {
                // The phase holding `line`: the last one starting at or before it.
                let p = self.phases.partition_point(|ph| ph.line0 <= line) - 1;
                let phase = &self.phases[p];
                let at = line - phase.line0;
                let (n, qy) = (at / phase.dims[0].count, at % phase.dims[0].count);
                self.run_line(phase, n, qy, input.get(), packed.get(), output.get());
            }
        });
    }

    /// Packs each phase's taps of `kernel` as a `[taps_y, taps_x, C, O]` array.
    unsafe fn pack_kernels(&self, kernel: *const f32, packed: *mut f32) {
        let (c, o) = (self.g.channels, self.g.out_channels);
        let s = self.layout.strides;
        for phase in &self.phases {
            let mut to = packed.add(phase.packed);
            for &ky in &phase.dims[0].kernel {
                for &kx in &phase.dims[1].kernel {
                    for ci in 0..c {
                        let from = kernel.add(ky * s[0] + kx * s[1] + ci * s[2]);
                        for oi in 0..o {
                            *to.add(oi) = *from.add(oi * s[3]);
                        }
                        to = to.add(o);
                    }
                }
            }
        }
    }

    /// Output row `qy` of `phase` in image `n`: runs of pixels whose taps inside the input are
    /// the same, each on tiles of up to the instruction set's rows.
    unsafe fn run_line(
        &self,
        phase: &Phase,
        n: usize,
        qy: usize,
        input: *const f32,
        packed: *const f32,
        output: *mut f32,
    ) {
        let g = &self.g;
        let (c, o) = (g.channels, g.out_channels);
        let [dy, dx] = &phase.dims;
        let [oh, ow] = g.out_size;
        let (sx, taps_x) = (g.dilation[1], dx.kernel.len());
        let y = dy.first + qy * g.dilation[0];
        let line = output.add(((n * oh + y) * ow + dx.first) * o);
        let (ty0, ty1) = dy.inside(qy, g.height);
        let most_rows = self.isa.max_rows();
        let mut qa = 0;
        while qa < dx.count {
            let (tx0, tx1) = dx.inside(qa, g.width);
            let mut qb = qa + 1;
            while qb < dx.count && dx.inside(qb, g.width) == (tx0, tx1) {
                qb += 1;
            }
            let dst = line.add(qa * sx * o);
            if ty0 == ty1 || tx0 == tx1 {
                for q in 0..qb - qa {
                    std::ptr::write_bytes(dst.add(q * sx * o), 0, o);
                }
                qa = qb;
                continue;
            }
            let iy = (qy as isize + dy.offset) as usize + ty0;
            let ix = (qa as isize + dx.offset) as usize + tx0;
            let a = input.add(((n * g.height + iy) * g.width + ix) * c);
            let b = packed.add(phase.packed + (ty0 * taps_x + tx0) * c * o);
            let pixels = qb - qa;
            for (o0, lanes) in channel_blocks(o, self.isa.max_lanes()) {
                let tile = |a: *const f32, dst: *mut f32, rows: usize, blocks: usize| Tile {
                    a,
                    a_row: c as isize,
                    b: b.add(o0),
                    outer: ty1 - ty0,
                    a_outer: (g.width * c) as isize,
                    b_outer: (taps_x * c * o) as isize,
                    inner: (tx1 - tx0) * c,
                    a_inner: 1,
                    b_inner: o as isize,
                    dst: dst.add(o0),
                    dst_row: (sx * o) as isize,
                    rows,
                    lanes,
                    accumulate: false,
                    bias: None,
                    blocks,
                    a_block: (rows * c) as isize,
                    dst_block: (rows * sx * o) as isize,
                };
                let full = pixels / most_rows;
                if full > 0 {
                    run_tile(self.isa, &tile(a, dst, most_rows, full));
                }
                let rest = pixels % most_rows;
                if rest > 0 {
                    let done = full * most_rows;
                    let t = tile(a.add(done * c), dst.add(done * sx * o), rest, 1);
                    run_tile(self.isa, &t);
                }
            }
            qa = qb;
        }
    }
}
