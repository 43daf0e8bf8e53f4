//! Weight gradient of a strided 2-D convolution ([`StridedWeightGradient`]), in the layouts
//! JAX emits for it (`dim_labels=f01b_i01o->01bf` or `->fb01`, `rhs_dilate` = the forward's
//! stride): input `[F, H, W, B]` (F = the images, B = the forward convolution's input
//! channels, contiguous), output gradient `[F, GH, GW, O]`, weight gradient `[KH, KW, B, O]`
//! written through any strides:
//!
//! `dw[ky, kx, b, o] = sum_{f, gy, gx} x[f, sy * gy + ky - pad_top, sx * gx + kx - pad_left, b]
//!                                     * dy[f, gy, gx, o]`
//!
//! Per tap `(ky, kx)` this is one product `X_tap^T * dY` with a depth of every gradient pixel,
//! where `X_tap` holds the input pixels the tap reads: every `s`-th pixel, so the patch GEMM,
//! which sees a window of `GH x GW` taps dilated by the stride, multiplies through the holes
//! and gathers a patch matrix as large as the input. Here the gradient rows are cut into
//! fixed groups; a group's rows are taken in chunks of at most `CHUNK_PIXELS` pixels, whose
//! `dY` rows are read in place (copied only when `O` is not a multiple of 8) and whose tap
//! pixels are gathered into a `[pixels, B]` panel (zeros where the tap leaves the input), and
//! each tap's product runs on the register-blocked small GEMM into the group's partial sum.
//! Workers take whole groups as they become free; the partials are added in group order at
//! the end. The groups do not depend on the number of workers, so the result is bitwise the
//! same for any thread count.

#[cfg(test)]
mod tests;

use crate::cpu::Isa;
use crate::gemm::small::{small_gemm, COLUMN_GROUP};
use crate::parallel::{chunk_len, for_each_range, for_each_share_on_slots, Shared};
use crate::scratch::{floats, Scratch};
use crate::KernelError;

/// Gradient pixels per product: a 256 x 64 panel of `dY` is 64 KB, in L2 beside the tap's
/// panel of the input.
const CHUNK_PIXELS: usize = 256;
/// The gradient rows are cut into at most this many groups, each summed into its own partial.
const GROUPS: usize = 16;

/// The forward convolution whose weight gradient is computed: NHWC input, `window` taps at
/// `stride`, `padding` of the input, `out_channels`, and its output (the gradient's) size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridedWeightGradGeometry {
    pub images: usize,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
    pub out_channels: usize,
    /// Kernel rows and columns (the weight gradient's spatial size).
    pub window: [usize; 2],
    pub stride: [usize; 2],
    /// `(low, high)` padding of the input rows and columns; negative crops.
    pub padding: [(isize, isize); 2],
    /// Rows and columns of the output gradient.
    pub grad: [usize; 2],
}

impl StridedWeightGradGeometry {
    /// The window size whose strided positions over the padded input give exactly `grad`
    /// outputs per dimension: `padded - stride * (grad - 1)`, if positive.
    pub fn window_for(
        size: usize,
        pad: (isize, isize),
        stride: usize,
        grad: usize,
    ) -> Option<usize> {
        let padded = size as isize + pad.0 + pad.1;
        let span = (stride * grad.checked_sub(1)?) as isize;
        (padded - span > 0).then(|| (padded - span) as usize)
    }
}

/// A planned weight gradient of a strided convolution.
#[derive(Clone, Debug)]
pub struct StridedWeightGradient {
    isa: Isa,
    g: StridedWeightGradGeometry,
    /// `O` rounded up to the small GEMM's column group.
    o_pad: usize,
    /// Gradient rows per group and per chunk.
    rows_per_group: usize,
    rows_per_chunk: usize,
    groups: usize,
    /// One partial `[KH * KW, B, o_pad]` per group, `partial_floats` apart (scratch offset).
    partials: usize,
    partial_floats: usize,
    /// Per worker slot: the tap's input panel, then (when `O % 8 != 0`) a padded copy of the
    /// chunk's `dY` rows, `slot_floats` apart (scratch offset).
    slots: usize,
    slot_floats: usize,
    threads: usize,
    scratch: Scratch,
    /// Strides in floats of the weight gradient's `[ky, kx, b, o]`.
    out_strides: [usize; 4],
}

impl StridedWeightGradient {
    /// Plans the weight gradient of `geometry` on `threads` workers, stored through
    /// `out_strides` (floats, for `[ky, kx, b, o]`). Declines an empty geometry, a window
    /// that does not match the gradient's size, and strides of 0.
    pub fn new(
        geometry: &StridedWeightGradGeometry,
        out_strides: [usize; 4],
        threads: usize,
    ) -> Result<StridedWeightGradient, KernelError> {
        let g = *geometry;
        let dims = [
            g.images,
            g.height,
            g.width,
            g.channels,
            g.out_channels,
            g.window[0],
            g.window[1],
            g.stride[0],
            g.stride[1],
            g.grad[0],
            g.grad[1],
        ];
        if dims.contains(&0) {
            return Err(KernelError::declined("strided weight gradient", "empty"));
        }
        let size = [g.height, g.width];
        let matches = (0..2).all(|i| {
            StridedWeightGradGeometry::window_for(size[i], g.padding[i], g.stride[i], g.grad[i])
                == Some(g.window[i])
        });
        if !matches {
            return Err(KernelError::Invalid(format!(
                "strided weight gradient: window {:?} does not match a gradient of {:?} at stride {:?}",
                g.window, g.grad, g.stride
            )));
        }
        let (b, o) = (g.channels, g.out_channels);
        let o_pad = o.next_multiple_of(COLUMN_GROUP);
        let rows = g.images * g.grad[0];
        let rows_per_group = rows.div_ceil(GROUPS);
        let groups = rows.div_ceil(rows_per_group);
        let rows_per_chunk = (CHUNK_PIXELS / g.grad[1]).clamp(1, rows_per_group);
        let pixels = rows_per_chunk * g.grad[1];
        let taps = g.window[0] * g.window[1];
        let partial_floats = (taps * b * o_pad).next_multiple_of(16);
        let dy_copy = if o_pad == o { 0 } else { pixels * o_pad };
        let slot_floats = (pixels * b + dy_copy).next_multiple_of(16);
        let threads = threads.clamp(1, groups);
        let mut scratch = Scratch::default();
        Ok(StridedWeightGradient {
            isa: Isa::detect(),
            g,
            o_pad,
            rows_per_group,
            rows_per_chunk,
            groups,
            partials: scratch.region(partial_floats * groups * 4),
            partial_floats,
            slots: scratch.region(slot_floats * threads * 4),
            slot_floats,
            threads,
            scratch,
            out_strides,
        })
    }

    #[cfg(test)]
    /// Runs `isa` instead of the detected code (tests; the machine must have it).
    pub(crate) fn with_isa(mut self, isa: Isa) -> StridedWeightGradient {
        self.isa = isa;
        self
    }

    /// Bytes of scratch memory [`Self::run`] needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// `dw = the weight gradient of input x and output gradient dy`.
    ///
    /// # Safety
    /// `x` must hold `[images, height, width, channels]` floats, `dy` `[images, grad_h,
    /// grad_w, out_channels]`, `dw` every element its strides reach, `scratch`
    /// [`Self::scratch_bytes`] bytes, 64-byte aligned; `dw` overlaps neither input.
    pub unsafe fn run(&self, x: *const f32, dy: *const f32, dw: *mut f32, scratch: *mut u8) {
        let g = &self.g;
        let (partials, slots) = (
            Shared(floats(scratch, self.partials)),
            Shared(floats(scratch, self.slots)),
        );
        let (xs, dys) = (Shared(x as *mut f32), Shared(dy as *mut f32));
        let rows = g.images * g.grad[0];
        for_each_share_on_slots(self.groups, self.threads, |slot, group| {
            let partial = partials.get().add(group * self.partial_floats);
            let buf = slots.get().add(slot * self.slot_floats);
            let r0 = group * self.rows_per_group;
            let r1 = (r0 + self.rows_per_group).min(rows);
            self.group(xs.get(), dys.get(), partial, buf, r0, r1);
        });
        // The partials summed in group order, rows (tap, b) split among the workers.
        let (b, o) = (g.channels, g.out_channels);
        let taps = g.window[0] * g.window[1];
        let out = Shared(dw);
        let chunk = chunk_len(taps * b, self.threads, 1);
        for_each_range(taps * b, chunk, self.threads, |lo, hi| {
            for row in lo..hi {
                let (tap, ch) = (row / b, row % b);
                let (ky, kx) = (tap / g.window[1], tap % g.window[1]);
                let [sy, sx, sb, so] = self.out_strides;
                let dst = out.get().add(ky * sy + kx * sx + ch * sb);
                for oc in 0..o {
                    let mut sum = 0f32;
                    for p in 0..self.groups {
                        sum += *partials
                            .get()
                            .add(p * self.partial_floats + row * self.o_pad + oc);
                    }
                    *dst.add(oc * so) = sum;
                }
            }
        });
    }

    /// Gradient rows `r0..r1` (row `f * GH + gy`) into `partial`, through the slot `buf`.
    unsafe fn group(
        &self,
        x: *const f32,
        dy: *const f32,
        partial: *mut f32,
        buf: *mut f32,
        r0: usize,
        r1: usize,
    ) {
        let g = &self.g;
        let (b, o, o_pad) = (g.channels, g.out_channels, self.o_pad);
        let gw = g.grad[1];
        let taps = g.window[0] * g.window[1];
        std::ptr::write_bytes(partial, 0, taps * b * o_pad);
        let panel = buf;
        let dy_copy = buf.add(self.rows_per_chunk * gw * b);
        let mut c0 = r0;
        while c0 < r1 {
            let c1 = (c0 + self.rows_per_chunk).min(r1);
            let pixels = (c1 - c0) * gw;
            // The chunk's gradient rows are consecutive in dY; padded to o_pad columns if needed.
            let (dy_rows, ldb) = if o == o_pad {
                (dy.add(c0 * gw * o), o)
            } else {
                for p in 0..pixels {
                    let src = dy.add((c0 * gw + p) * o);
                    let dst = dy_copy.add(p * o_pad);
                    std::ptr::copy_nonoverlapping(src, dst, o);
                    std::ptr::write_bytes(dst.add(o), 0, o_pad - o);
                }
                (dy_copy as *const f32, o_pad)
            };
            for ky in 0..g.window[0] {
                for kx in 0..g.window[1] {
                    if !self.gather(x, panel, c0, c1, [ky, kx]) {
                        continue;
                    }
                    let tap = ky * g.window[1] + kx;
                    // dw_tap[b][o] += sum_p panel[p][b] * dY[p][o]
                    small_gemm(
                        self.isa,
                        b,
                        o_pad,
                        pixels,
                        panel,
                        1,
                        b as isize,
                        dy_rows,
                        ldb,
                        partial.add(tap * b * o_pad),
                        o_pad,
                        true,
                    );
                }
            }
            c0 = c1;
        }
    }

    /// Gathers into `panel` (`[pixels, B]`) the input pixels tap `k` reads for gradient rows
    /// `c0..c1`, zeros where it reads the padding; false when every one is padding.
    unsafe fn gather(
        &self,
        x: *const f32,
        panel: *mut f32,
        c0: usize,
        c1: usize,
        k: [usize; 2],
    ) -> bool {
        let g = &self.g;
        let b = g.channels;
        let [gh, gw] = g.grad;
        let mut any = false;
        for (i, r) in (c0..c1).enumerate() {
            let (f, gy) = (r / gh, r % gh);
            let row = panel.add(i * gw * b);
            let y = (g.stride[0] * gy + k[0]) as isize - g.padding[0].0;
            if y < 0 || y >= g.height as isize {
                std::ptr::write_bytes(row, 0, gw * b);
                continue;
            }
            let line = x.add((f * g.height + y as usize) * g.width * b);
            for gx in 0..gw {
                let xx = (g.stride[1] * gx + k[1]) as isize - g.padding[1].0;
                let dst = row.add(gx * b);
                if xx < 0 || xx >= g.width as isize {
                    std::ptr::write_bytes(dst, 0, b);
                } else {
                    std::ptr::copy_nonoverlapping(line.add(xx as usize * b), dst, b);
                    any = true;
                }
            }
        }
        any
    }
}
