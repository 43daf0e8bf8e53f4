//! The weight gradient of a 1-D F(m, 5) convolution, by the transposed algorithm:
//! `dW[k][c][o] = sum_p G[p][k] M[p][c][o]` with `M[p] = sum_tiles V[p]^T Y[p]`, where
//! `V[p] = sum_j B^T[p][j] x_j` transforms the input tiles as the forward routine does and
//! `Y[p] = sum_i A^T[i][p] dy_i` the output gradient's tiles (zero past the end).
//!
//! The tiles are cut into at most [`SHARES`] fixed shares. A share walks its tiles
//! [`TILES_PER_BLOCK`] at a time, and for each point transforms the block's `V[p]` and `Y[p]`
//! and adds `V[p]^T Y[p]` into its own partial `M[p]`; so the rows of `x` and `dy` a block
//! reads stay in cache while the points go by. (Cut by point instead, every point read all
//! of `x` and `dy` from memory again: at textcnn's shape, 13 MB per point.) The partials
//! are then added in share order, so the result is the same bits on any thread count.

use crate::cpu::Isa;
use crate::gemm::{sgemm, GemmBackend};
use crate::parallel::{chunk_len, for_each_range, for_each_share_on_slots, Shared};
use crate::scratch::{floats, Scratch};
use crate::KernelError;

use super::forward::{transforms, WIDTH};
use super::Terms;

/// Shares the tiles are cut into at most, whatever the thread count (each needs its own
/// partial `M`, `n x channels x out_features` floats).
pub const SHARES: usize = 8;

/// Tiles a share transforms and multiplies at a time: a block's `V[p]` and `Y[p]` (48 KB at
/// 128 channels) and the rows of `x` and `dy` it reads stay in L2.
pub const TILES_PER_BLOCK: usize = 48;

/// A planned weight gradient: `x` as `[batch, in_len, channels]`, `dy` as `[batch, out_len,
/// out_features]`, `dW` written at `(tap, channel, feature)` by `out_strides` (elements).
#[derive(Clone, Debug)]
pub struct Winograd1dFilterGradient {
    batch: usize,
    in_len: usize,
    channels: usize,
    out_len: usize,
    out_features: usize,
    pad_low: isize,
    out_strides: [isize; 3],
    m: usize,
    n: usize,
    at: Vec<f32>,
    bt: Vec<f32>,
    g: Vec<f32>,
    backend: GemmBackend,
    /// The vector instructions the transforms are compiled for (`Isa::detect`).
    isa: Isa,
    threads: usize,
    /// Tiles in each share but maybe the last, and the number of shares.
    tiles_per_share: usize,
    shares: usize,
    /// Scratch: each share's partial products `M[p]` (`n` of them), then per thread slot
    /// one block's `V[p]` and `Y[p]`.
    partials_at: usize,
    slots_at: Vec<usize>,
    scratch: Scratch,
}

impl Winograd1dFilterGradient {
    /// Plans the gradient of a width-5 forward convolution padded `pads` whose output has
    /// `out_len` positions, on tiles of `m` (2 or 4) outputs.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        batch: usize,
        in_len: usize,
        channels: usize,
        out_features: usize,
        (pad_low, pad_high): (isize, isize),
        out_len: usize,
        out_strides: [isize; 3],
        m: usize,
        backend: GemmBackend,
        threads: usize,
    ) -> Result<Winograd1dFilterGradient, KernelError> {
        let padded = in_len as isize + pad_low + pad_high - WIDTH as isize + 1;
        if padded != out_len as isize || out_len == 0 {
            return Err(KernelError::Invalid(format!(
                "1-D Winograd weight gradient: output gradient length {out_len} for input \
                 {in_len} padded ({pad_low}, {pad_high}) by a width-{WIDTH} window"
            )));
        }
        if batch == 0 || channels == 0 || out_features == 0 {
            return Err(KernelError::Invalid(
                "1-D Winograd weight gradient: an empty dimension".into(),
            ));
        }
        let (at, bt, g) = transforms(m)?;
        let n = m + WIDTH - 1;
        let threads = threads.max(1);
        let tiles = batch * out_len.div_ceil(m);
        let tiles_per_share = tiles.div_ceil(SHARES);
        let shares = tiles.div_ceil(tiles_per_share);
        let mut scratch = Scratch::default();
        let partials_at = scratch.region(shares * n * channels * out_features * 4);
        let slots_at = (0..threads.min(shares))
            .map(|_| scratch.region(TILES_PER_BLOCK * (channels + out_features) * 4))
            .collect();
        Ok(Winograd1dFilterGradient {
            batch,
            in_len,
            channels,
            out_len,
            out_features,
            pad_low,
            out_strides,
            m,
            n,
            at,
            bt,
            g,
            backend,
            isa: Isa::detect(),
            threads,
            tiles_per_share,
            shares,
            partials_at,
            slots_at,
            scratch,
        })
    }

    /// The tile `m` of the output gradient.
    pub fn tile(&self) -> usize {
        self.m
    }

    /// Bytes of the scratch block [`Winograd1dFilterGradient::run`] needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// # Safety
    /// `input`, `grad` and `output` must address the planned arrays, and `scratch` a block
    /// of [`Winograd1dFilterGradient::scratch_bytes`] aligned to 64 bytes.
    pub unsafe fn run(
        &self,
        input: *const f32,
        grad: *const f32,
        output: *mut f32,
        scratch: *mut u8,
    ) {
        let (c_n, o_n) = (self.channels, self.out_features);
        let point_floats = self.n * c_n * o_n;
        let tiles = self.batch * self.out_len.div_ceil(self.m);
        let partials = floats(scratch, self.partials_at);
        let (x, dy, part, blk) = (
            Shared(input as *mut f32),
            Shared(grad as *mut f32),
            Shared(partials),
            Shared(scratch),
        );
        for_each_share_on_slots(self.shares, self.threads, |slot, share| unsafe {
            let first = share * self.tiles_per_share;
            let last = (first + self.tiles_per_share).min(tiles);
            let v = floats(blk.get(), self.slots_at[slot]);
            let partial = part.get().add(share * point_floats);
            self.share_on_isa(first, last, x.get(), dy.get(), v, partial);
        });
        // The shares' partials, added into the first in share order.
        let chunk = chunk_len(point_floats, self.threads, 16);
        for_each_range(point_floats, chunk, self.threads, |lo, hi| unsafe {
            let total = std::slice::from_raw_parts_mut(part.get().add(lo), hi - lo);
            for s in 1..self.shares {
                let other = part.get().add(s * point_floats + lo);
                for (i, t) in total.iter_mut().enumerate() {
                    *t += *other.add(i);
                }
            }
        });
        let [st, sc, so] = self.out_strides;
        for k in 0..WIDTH {
            for c in 0..c_n {
                for o in 0..o_n {
                    let mut sum = 0.0f32;
                    for p in 0..self.n {
                        sum += self.g[p * WIDTH + k] * *partials.add((p * c_n + c) * o_n + o);
                    }
                    *output.offset(k as isize * st + c as isize * sc + o as isize * so) = sum;
                }
            }
        }
    }

    /// [`Winograd1dFilterGradient::share`] compiled for the best vector instructions this
    /// machine has; multiplies and adds only, so the same bits on every instruction set.
    unsafe fn share_on_isa(
        &self,
        first: usize,
        last: usize,
        x: *const f32,
        dy: *const f32,
        v: *mut f32,
        partial: *mut f32,
    ) {
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma | Isa::Avx512 => self.share_avx2(first, last, x, dy, v, partial),
            _ => self.share(first, last, x, dy, v, partial),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn share_avx2(
        &self,
        first: usize,
        last: usize,
        x: *const f32,
        dy: *const f32,
        v: *mut f32,
        partial: *mut f32,
    ) {
        self.share(first, last, x, dy, v, partial)
    }

    /// Tiles `first..last`, a block at a time: for each point, the block's `V[p]` into `v`
    /// and `Y[p]` after it, then `V[p]^T Y[p]` added into the share's `partial` `M[p]` (the
    /// first block writes it).
    #[inline(always)]
    unsafe fn share(
        &self,
        first: usize,
        last: usize,
        x: *const f32,
        dy: *const f32,
        v: *mut f32,
        partial: *mut f32,
    ) {
        let (n, m, c_n, o_n) = (self.n, self.m, self.channels, self.out_features);
        let tiles_per_row = self.out_len.div_ceil(m);
        let y = v.add(TILES_PER_BLOCK * c_n);
        for block in (first..last).step_by(TILES_PER_BLOCK) {
            let count = TILES_PER_BLOCK.min(last - block);
            for p in 0..n {
                for t in 0..count {
                    let (b, tile) = ((block + t) / tiles_per_row, (block + t) % tiles_per_row);
                    let start = (tile * m) as isize - self.pad_low;
                    let seq = x.add(b * self.in_len * c_n);
                    let bt_row = &self.bt[p * n..(p + 1) * n];
                    let terms = Terms::input_tile(bt_row, seq, self.in_len, c_n, start);
                    terms.combine_into(std::slice::from_raw_parts_mut(v.add(t * c_n), c_n));
                    let mut terms = Terms::new();
                    for i in 0..m.min(self.out_len - tile * m) {
                        let row = dy.add((b * self.out_len + tile * m + i) * o_n);
                        terms.push(self.at[i * n + p], row);
                    }
                    terms.combine_into(std::slice::from_raw_parts_mut(y.add(t * o_n), o_n));
                }
                sgemm(
                    self.backend,
                    1,
                    c_n,
                    o_n,
                    count,
                    v,
                    1,
                    c_n as isize,
                    y,
                    o_n as isize,
                    1,
                    partial.add(p * c_n * o_n),
                    o_n as isize,
                    1,
                    block != first,
                );
            }
        }
    }
}
