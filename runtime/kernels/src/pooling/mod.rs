//! Max-pooling over NHWC data, vectorized along the contiguous channel dimension: the forward
//! reduce-window max ([`MaxPool`], optionally of `max(x, 0)`: a ReLU before the pool) and the
//! fused backward pass ([`MaxPoolGrad`]: the select-and-scatter of a non-overlapping max-pool,
//! the ReLU gradient gate and the bias gradient's sum over batch and space, in one read of the
//! pre-activation and one write of its gradient).
//!
//! Semantics are the interpreter's exactly: `maximum` is NaN when either side is NaN and else
//! `x >= y ? x : y` (so `-0` vs `+0` keeps the first); select-and-scatter's select is `>=`, so
//! the first maximum in window order wins and a NaN candidate is selected (and then replaced by
//! the next element, as `NaN >= e` is false); its scatter adds to the init `0`. The bias sum
//! folds each part's windows in order (window by window, positions in window order) per
//! channel; lanes are channels, so every instruction set gives the same bits.
//!
//! **Window choices.** A forward pass may also record, per output, which window position the
//! backward pass's select will choose and whether the value there is above 0 (one byte,
//! [`CHOICE_POSITION`] and [`CHOICE_OPEN`]): the backward pass then reads those bytes
//! ([`MaxPoolGrad::run_from_choices`]) instead of the whole pre-activation, a quarter of a
//! float per input element for a 2x2 pool instead of a float. The choice is made by the same
//! comparisons on the same values, so the gradient is the same bits. Only the AVX-512 path
//! and the portable one compute it (AVX2 machines would take the portable loops for it, so
//! [`vector_choices`] tells callers not to ask there).
//!
//! Code paths ([`crate::cpu::Isa`], `TESSEL_CONV_ISA` forces one): AVX-512F
//! ([`avx512`]) whenever the CPU has it, also on Zen 4 where 512-bit work runs as two halves:
//! these loops are bound by memory traffic and index arithmetic, not by the vector units, and
//! the 512-bit form has half the instructions and lane masks for the channel tail; AVX2
//! ([`avx2`], 8 lanes, scalar tail) without AVX-512; portable scalar code otherwise
//! ([`portable`], also the reference the others are tested against).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod portable;
#[cfg(test)]
mod tests;

use crate::cpu::Isa;
use crate::parallel::{chunk_len, for_each_range, for_each_worker, Shared};
use crate::KernelError;

/// Gradients of at least this many bytes are written with streaming (non-temporal) stores
/// (where the buffer is aligned and the channels fill whole vectors): more than both cores' L2
/// caches hold, so the lines would leave the core anyway, and a streaming store does not read
/// each line before writing it over. Family 26, bench, 2 threads: the 12.8 MB gradient
/// 0.63 -> 0.35 ms; MNIST step: 1.2 -> 1.0 ms, the 6.4 MB one 0.54 -> 0.39 ms.
pub(crate) const STREAM_BYTES: usize = 4 << 20;

/// Most window positions the backward pass takes (its select keeps one mask per position).
pub(crate) const MAX_WINDOW_POSITIONS: usize = 16;

/// Bits 0-3 of a window choice: the position the select chose, in window order.
pub(crate) const CHOICE_POSITION: u8 = 0x0f;
/// Bit 4 of a window choice: the (pre-ReLU) value at the chosen position is above 0, so the
/// ReLU gate lets its gradient through.
pub(crate) const CHOICE_OPEN: u8 = 0x10;

/// Whether instruction set `isa` computes window choices in vector code (AVX-512). The others
/// take the portable loops for them, which cost more than the gradient saves (bench,
/// 28x28x32: 9.3 ms from the choices against 1.7 from the pre-activation on AVX2), so callers
/// should not ask for choices there.
pub fn vector_choices(isa: Isa) -> bool {
    isa == Isa::Avx512
}

/// An NHWC max-pool: window `[kh, kw]` moving by `stride` over height and width, no padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolGeometry {
    pub batch: usize,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
    pub window: [usize; 2],
    pub stride: [usize; 2],
}

impl PoolGeometry {
    /// Output height and width: `(in - k) / s + 1` windows, 0 when the window does not fit.
    pub fn output_hw(&self) -> [usize; 2] {
        let f = |n: usize, k: usize, s: usize| if n >= k { (n - k) / s + 1 } else { 0 };
        [
            f(self.height, self.window[0], self.stride[0]),
            f(self.width, self.window[1], self.stride[1]),
        ]
    }

    fn valid(&self) -> bool {
        self.window.iter().chain(&self.stride).all(|&v| v > 0)
    }

    fn in_image(&self) -> usize {
        self.height * self.width * self.channels
    }

    fn out_image(&self) -> usize {
        let [oh, ow] = self.output_hw();
        oh * ow * self.channels
    }
}

/// A forward max-pool that a convolution computes in its epilogue: after writing a block of
/// its output, the convolution pools it ([`MaxPool::run_image_block`]) into `output` while the
/// block is still in the cache. The pool's input is the convolution's output.
#[derive(Clone, Copy, Debug)]
pub struct PoolEpilogue {
    pub pool: MaxPool,
    pub output: *mut f32,
    /// Where the window choices go (one byte per output), or null for none.
    pub choices: *mut u8,
    /// Nothing reads the convolution's output but this pool (its gradient reads the
    /// choices): the routine may keep each block only until it is pooled instead of storing
    /// it, which saves the output's trip to memory. A routine that cannot still stores it.
    pub discard_output: bool,
}

// SAFETY: the workers of a convolution write disjoint blocks of its output, so each pools
// disjoint windows into disjoint outputs.
unsafe impl Send for PoolEpilogue {}
unsafe impl Sync for PoolEpilogue {}

impl PoolEpilogue {
    /// Whether the pool reads an output of `batch x height x width x channels`.
    pub fn reads(&self, batch: usize, height: usize, width: usize, channels: usize) -> bool {
        let g = &self.pool.geometry;
        (g.batch, g.height, g.width, g.channels) == (batch, height, width, channels)
    }

    /// Pools the block of the convolution's output the convolution has just written
    /// ([`MaxPool::run_image_block`], with this epilogue's output and choices): `y_image` is
    /// the start of image `image` of that output, or of a buffer holding that image's block at
    /// its place in the image.
    ///
    /// # Safety
    /// As [`MaxPool::run_image_block`].
    pub(crate) unsafe fn run_image_block(
        &self,
        y_image: *const f32,
        image: usize,
        rows: [usize; 2],
        cols: [usize; 2],
    ) {
        self.pool
            .run_image_block(y_image, self.output, self.choices, image, rows, cols)
    }
}

/// Checks a convolution with `pool` in its epilogue against the same convolution followed by
/// the separate pool: `conv(pool, y)` runs it into `y` (`outputs` floats), with the epilogue
/// when given, which `accepts` must take. The output and the pool must be the same bits.
#[cfg(test)]
pub(crate) fn check_epilogue(
    pool: MaxPool,
    outputs: usize,
    accepts: impl Fn(&PoolEpilogue) -> bool,
    mut conv: impl FnMut(Option<PoolEpilogue>, *mut f32),
    what: &str,
) {
    let [ph, pw] = pool.geometry.output_hw();
    let pooled = pool.geometry.batch * ph * pw * pool.geometry.channels;
    let (mut y, mut fused_y) = (vec![f32::NAN; outputs], vec![f32::NAN; outputs]);
    let (mut want, mut got) = (vec![f32::NAN; pooled], vec![f32::NAN; pooled]);
    // Window choices too, where the window has few enough positions.
    let (mut want_choices, mut got_choices) = (vec![0xffu8; pooled], vec![0xeeu8; pooled]);
    let choose = pool.can_choose();
    let choices_of = |v: &mut Vec<u8>| {
        if choose {
            v.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        }
    };
    let epilogue = PoolEpilogue {
        pool,
        output: got.as_mut_ptr(),
        choices: choices_of(&mut got_choices),
        discard_output: false,
    };
    assert!(accepts(&epilogue), "{what}: not accepted");
    conv(None, y.as_mut_ptr());
    unsafe { pool.run_with_choices(y.as_ptr(), want.as_mut_ptr(), choices_of(&mut want_choices)) };
    conv(Some(epilogue), fused_y.as_mut_ptr());
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&fused_y), bits(&y), "{what} output");
    assert_eq!(bits(&got), bits(&want), "{what} pool");
    if choose {
        assert_eq!(got_choices, want_choices, "{what} window choices");
    }
    // The output discarded: the same pool and choices, whatever the output holds.
    let (mut pooled, mut chosen) = (vec![f32::NAN; pooled], vec![0xddu8; pooled]);
    let discarding = PoolEpilogue {
        output: pooled.as_mut_ptr(),
        choices: choices_of(&mut chosen),
        discard_output: true,
        ..epilogue
    };
    assert!(
        accepts(&discarding),
        "{what}: not accepted discarding its output"
    );
    // NaN in the output: a pool that read it instead of the convolution's blocks would show.
    fused_y.fill(f32::NAN);
    conv(Some(discarding), fused_y.as_mut_ptr());
    assert_eq!(bits(&pooled), bits(&want), "{what} pool, output discarded");
    if choose {
        assert_eq!(
            chosen, want_choices,
            "{what} window choices, output discarded"
        );
    }
}

/// Outputs `rows[0]..rows[1]` x `cols[0]..cols[1]` (output rows and columns) of `images`
/// images: what one call of the forward loops computes.
#[derive(Clone, Copy, Debug)]
struct Region {
    images: usize,
    rows: [usize; 2],
    cols: [usize; 2],
}

/// The forward max-pool `dst = reduce_window(max, -inf)(relu ? max(src, 0) : src)`.
#[derive(Clone, Copy, Debug)]
pub struct MaxPool {
    pub geometry: PoolGeometry,
    pub relu: bool,
    pub isa: Isa,
    pub threads: usize,
}

impl MaxPool {
    /// Declines a zero window or stride.
    pub fn new(geometry: PoolGeometry, relu: bool, threads: usize) -> Result<MaxPool, KernelError> {
        if !geometry.valid() {
            return Err(KernelError::declined("max-pool", "zero window or stride"));
        }
        Ok(MaxPool {
            geometry,
            relu,
            isa: Isa::detect(),
            threads: threads.max(1),
        })
    }

    /// # Safety
    /// `src` must hold the input (`batch * height * width * channels` floats) and `dst` room
    /// for the output; they must not overlap.
    pub unsafe fn run(&self, src: *const f32, dst: *mut f32) {
        self.run_with_choices(src, dst, std::ptr::null_mut())
    }

    /// Whether the window has few enough positions for its choices to fit
    /// [`CHOICE_POSITION`].
    pub fn can_choose(&self) -> bool {
        self.geometry.window[0] * self.geometry.window[1] <= MAX_WINDOW_POSITIONS
    }

    /// [`Self::run`], also writing each output's window choice into `choices` unless it is
    /// null (see the module doc).
    ///
    /// # Safety
    /// As [`Self::run`]; `choices`, unless null, has room for one byte per output and
    /// [`Self::can_choose`] holds.
    pub unsafe fn run_with_choices(&self, src: *const f32, dst: *mut f32, choices: *mut u8) {
        let g = self.geometry;
        if g.out_image() == 0 || g.batch == 0 {
            return;
        }
        debug_assert!(choices.is_null() || self.can_choose());
        let (src, dst, choices) = (Shared(src as *mut f32), Shared(dst), Shared(choices));
        let images = chunk_len(g.batch, self.threads, 1);
        for_each_range(g.batch, images, self.threads, |n0, n1| {
            let (src, dst) = unsafe {
                (
                    src.get().add(n0 * g.in_image()),
                    dst.get().add(n0 * g.out_image()),
                )
            };
            let choices = match choices.get() {
                c if c.is_null() => c,
                c => unsafe { c.add(n0 * g.out_image()) },
            };
            let [oh, ow] = g.output_hw();
            let whole = Region {
                images: n1 - n0,
                rows: [0, oh],
                cols: [0, ow],
            };
            unsafe { forward_part(self.isa, &g, self.relu, src, dst, choices, whole) };
        });
    }

    /// Whether a convolution that writes its output in blocks of `block` rows x columns,
    /// aligned to multiples of `block` (columns `usize::MAX`: whole rows), can pool each
    /// block as soon as it is written ([`Self::run_block`]): every window lies inside one
    /// block when it is no larger than its stride and the stride divides the block.
    pub(crate) fn fits_blocks(&self, block: [usize; 2]) -> bool {
        let g = &self.geometry;
        (0..2).all(|d| {
            block[d] == usize::MAX
                || (g.window[d] <= g.stride[d] && block[d].is_multiple_of(g.stride[d]))
        })
    }

    #[cfg(test)]
    /// The outputs whose windows start in input rows `rows[0]..rows[1]` and columns
    /// `cols[0]..cols[1]` of image `image`, on the calling thread: a convolution's epilogue
    /// pools the block of its output it has just written (while it is in the cache), instead
    /// of a second pass over the whole output. Each output is computed by the same loops as
    /// [`Self::run`], so the bits are the same.
    ///
    /// # Safety
    /// As [`Self::run`]; every window starting in the block must lie inside it (see
    /// [`Self::fits_blocks`]) and be written.
    pub(crate) unsafe fn run_block(
        &self,
        src: *const f32,
        dst: *mut f32,
        image: usize,
        rows: [usize; 2],
        cols: [usize; 2],
    ) {
        if image >= self.geometry.batch {
            return;
        }
        let src_image = src.add(image * self.geometry.in_image());
        self.run_image_block(src_image, dst, std::ptr::null_mut(), image, rows, cols)
    }

    /// [`Self::run_block`] with `src_image` the start of image `image` of the input, or of a
    /// buffer holding that image's block at its place in the image (only the block is read),
    /// also writing the block's window choices into `choices` (the whole pass's array) unless
    /// it is null.
    ///
    /// # Safety
    /// As [`Self::run_block`] for that image, and [`Self::run_with_choices`].
    pub(crate) unsafe fn run_image_block(
        &self,
        src_image: *const f32,
        dst: *mut f32,
        choices: *mut u8,
        image: usize,
        rows: [usize; 2],
        cols: [usize; 2],
    ) {
        let g = &self.geometry;
        let out = g.output_hw();
        // Output i's window starts at input row i * stride.
        let outputs = |d: usize, [a, b]: [usize; 2]| {
            let s = g.stride[d];
            [a.div_ceil(s).min(out[d]), b.div_ceil(s).min(out[d])]
        };
        let region = Region {
            images: 1,
            rows: outputs(0, rows),
            cols: outputs(1, cols),
        };
        if image >= g.batch || region.rows[0] >= region.rows[1] || region.cols[0] >= region.cols[1]
        {
            return;
        }
        let dst = dst.add(image * g.out_image());
        let choices = match choices {
            c if c.is_null() => c,
            c => c.add(image * g.out_image()),
        };
        forward_part(self.isa, g, self.relu, src_image, dst, choices, region);
    }
}

/// The fused backward pass of a non-overlapping max-pool (stride = window, windows tiling the
/// input): `dz = select(gate ? z > 0 : true, select_and_scatter(relu ? max(z, 0) : z, g, 0), 0)`
/// and, when asked, `bias[c] = sum over n, h, w of dz`.
#[derive(Clone, Copy, Debug)]
pub struct MaxPoolGrad {
    pub geometry: PoolGeometry,
    pub relu: bool,
    pub gate: bool,
    pub isa: Isa,
    pub threads: usize,
    /// Write the gradient with streaming stores (see [`STREAM_BYTES`]).
    pub stream: bool,
}

/// Where the bias gradient goes: images `[0, cut)` sum into `bias`, images `[cut, batch)` into
/// `partial` (when given; else all into `bias`), then `bias += partial`. The cut is fixed by
/// the caller, so the result does not depend on the thread count.
#[derive(Clone, Copy, Debug)]
pub struct BiasSum {
    pub bias: *mut f32,
    pub partial: Option<(*mut f32, usize)>,
}

impl MaxPoolGrad {
    /// Declines windows that overlap, skip or do not tile the input, and windows of more than
    /// [`MAX_WINDOW_POSITIONS`] positions.
    pub fn new(
        geometry: PoolGeometry,
        relu: bool,
        gate: bool,
        threads: usize,
    ) -> Result<MaxPoolGrad, KernelError> {
        let g = geometry;
        let tiles = g.valid()
            && g.window == g.stride
            && g.height.is_multiple_of(g.window[0])
            && g.width.is_multiple_of(g.window[1]);
        if !tiles || g.window[0] * g.window[1] > MAX_WINDOW_POSITIONS {
            return Err(KernelError::declined(
                "max-pool gradient",
                "windows must tile the input, at most 16 positions",
            ));
        }
        Ok(MaxPoolGrad {
            geometry,
            relu,
            gate,
            isa: Isa::detect(),
            threads: threads.max(1),
            stream: 4 * g.batch * g.in_image() >= STREAM_BYTES,
        })
    }

    /// # Safety
    /// `z` and `dz` hold `batch * height * width * channels` floats, `g` the pooled shape;
    /// `dz` may be `z` itself (each window is read before it is written) but must not overlap
    /// `g`; the bias buffers hold `channels` floats each.
    pub unsafe fn run(&self, z: *const f32, g: *const f32, dz: *mut f32, bias: Option<BiasSum>) {
        self.run_picked(Picks::Values(z), g, dz, bias)
    }

    /// [`Self::run`] with the windows' choices a forward pass recorded
    /// ([`MaxPool::run_with_choices`], same geometry and ReLU) instead of the pre-activation:
    /// the same bits, reading one byte per output instead of the window's floats.
    ///
    /// # Safety
    /// As [`Self::run`]; `choices` holds one byte per output of `g`'s shape, written by a
    /// forward pass of this geometry and `relu`.
    pub unsafe fn run_from_choices(
        &self,
        choices: *const u8,
        g: *const f32,
        dz: *mut f32,
        bias: Option<BiasSum>,
    ) {
        self.run_picked(Picks::Choices(choices), g, dz, bias)
    }

    unsafe fn run_picked(&self, picks: Picks, g: *const f32, dz: *mut f32, bias: Option<BiasSum>) {
        let geo = self.geometry;
        let (g, dz) = (Shared(g as *mut f32), Shared(dz));
        let part = |n0: usize, n1: usize, acc: *mut f32| unsafe {
            if !acc.is_null() {
                std::ptr::write_bytes(acc, 0, geo.channels);
            }
            backward_part(self.isa, &geo, self, picks, g.get(), dz.get(), acc, n0, n1);
        };
        match bias {
            None => {
                let images = chunk_len(geo.batch, self.threads, 1);
                for_each_range(geo.batch, images, self.threads, |n0, n1| {
                    part(n0, n1, std::ptr::null_mut())
                });
            }
            Some(BiasSum {
                bias,
                partial: None,
            }) => part(0, geo.batch, bias),
            Some(BiasSum {
                bias,
                partial: Some((partial, cut)),
            }) => {
                let cut = cut.min(geo.batch);
                let accs = [Shared(bias), Shared(partial)];
                let ranges = [(0, cut), (cut, geo.batch)];
                if self.threads >= 2 {
                    for_each_worker(2, |w| part(ranges[w].0, ranges[w].1, accs[w].get()));
                } else {
                    (0..2).for_each(|w| part(ranges[w].0, ranges[w].1, accs[w].get()));
                }
                for c in 0..geo.channels {
                    *bias.add(c) += *partial.add(c);
                }
            }
        }
    }
}

/// What the backward pass chooses each window's position from: the pre-activation, or the
/// choices a forward pass recorded.
#[derive(Clone, Copy)]
enum Picks {
    Values(*const f32),
    Choices(*const u8),
}

// SAFETY: the workers read disjoint images of it.
unsafe impl Send for Picks {}
unsafe impl Sync for Picks {}

/// `region` of the forward pass, of the images from `src`, `dst` and `choices` (null: none)
/// on.
unsafe fn forward_part(
    isa: Isa,
    g: &PoolGeometry,
    relu: bool,
    src: *const f32,
    dst: *mut f32,
    choices: *mut u8,
    region: Region,
) {
    // The window's offsets on the stack when they fit: a convolution's epilogue calls this
    // once per block.
    let mut small = [0usize; MAX_WINDOW_POSITIONS];
    let heap;
    let offsets: &[usize] = if g.window[0] * g.window[1] <= MAX_WINDOW_POSITIONS {
        let n = window_offsets_into(g, &mut small);
        &small[..n]
    } else {
        heap = window_offsets(g);
        &heap
    };
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::forward(g, relu, offsets, src, dst, choices, region),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if choices.is_null() => avx2::forward(g, relu, offsets, src, dst, region),
        _ => portable::forward(g, relu, offsets, src, dst, choices, region, 0),
    }
}

/// Images `[n0, n1)` of the backward pass, summing into `acc` (zeroed) unless it is null.
#[allow(clippy::too_many_arguments)]
unsafe fn backward_part(
    isa: Isa,
    geo: &PoolGeometry,
    r: &MaxPoolGrad,
    picks: Picks,
    g: *const f32,
    dz: *mut f32,
    acc: *mut f32,
    n0: usize,
    n1: usize,
) {
    let picks = match picks {
        Picks::Values(z) => Picks::Values(z.add(n0 * geo.in_image())),
        Picks::Choices(c) => Picks::Choices(c.add(n0 * geo.out_image())),
    };
    let dz = dz.add(n0 * geo.in_image());
    let g = g.add(n0 * geo.out_image());
    let images = n1 - n0;
    let f = Flags {
        relu: r.relu,
        gate: r.gate,
        stream: r.stream,
    };
    match (isa, picks) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, _) => avx512::backward(geo, f, picks, g, dz, acc, images),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2Fma, Picks::Values(z)) => avx2::backward(geo, f, z, g, dz, acc, images),
        _ => portable::backward(geo, f, picks, g, dz, acc, images, 0),
    }
}

/// The backward pass's options.
#[derive(Clone, Copy, Debug)]
struct Flags {
    relu: bool,
    gate: bool,
    stream: bool,
}

/// Offsets (in floats, from a window's first element) of a window's positions, in window order.
fn window_offsets(g: &PoolGeometry) -> Vec<usize> {
    let mut v = vec![0; g.window[0] * g.window[1]];
    window_offsets_into(g, &mut v);
    v
}

/// [`window_offsets`] into `out` (long enough); returns how many.
fn window_offsets_into(g: &PoolGeometry, out: &mut [usize]) -> usize {
    let mut k = 0;
    for i in 0..g.window[0] {
        for j in 0..g.window[1] {
            out[k] = (i * g.width + j) * g.channels;
            k += 1;
        }
    }
    k
}
