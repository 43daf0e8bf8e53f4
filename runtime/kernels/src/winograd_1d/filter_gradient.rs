//! The weight gradient of a 1-D F(m, 5) convolution, by the transposed algorithm:
//! `dW[k][c][o] = sum_p G[p][k] M[p][c][o]` with `M[p] = sum_tiles V[p]^T Y[p]`, where
//! `V[p] = sum_j B^T[p][j] x_j` transforms the input tiles as the forward routine does and
//! `Y[p] = sum_i A^T[i][p] dy_i` the output gradient's tiles (zero past the end).
//!
//! The work is cut by point: each point's `V[p]` and `Y[p]` over all tiles and its product
//! `M[p]` (one matrix product summing over every tile) are one share's, and the points are
//! combined in a fixed order, so the result is the same bits on any thread count.

use crate::cpu::Isa;
use crate::gemm::{sgemm, GemmBackend};
use crate::parallel::{for_each_share_on_slots, Shared};
use crate::scratch::{floats, Scratch};
use crate::KernelError;

use super::forward::{transforms, WIDTH};

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
    /// Scratch: the `n` products `M[p]`, then per thread slot (at most `n`; one thread per
    /// point at most) the point's `V` and `Y`.
    products_at: usize,
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
        let mut scratch = Scratch::default();
        let products_at = scratch.region(n * channels * out_features * 4);
        let slots_at = (0..threads.min(n))
            .map(|_| scratch.region(tiles * (channels + out_features) * 4))
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
            products_at,
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
        let products = floats(scratch, self.products_at);
        let (x, dy, prod, blk) = (
            Shared(input as *mut f32),
            Shared(grad as *mut f32),
            Shared(products),
            Shared(scratch),
        );
        let slots = self.slots_at.len();
        for_each_share_on_slots(self.n, slots, |slot, p| unsafe {
            let v = floats(blk.get(), self.slots_at[slot]);
            self.point_on_isa(p, x.get(), dy.get(), v, prod.get().add(p * c_n * o_n));
        });
        let [st, sc, so] = self.out_strides;
        for k in 0..WIDTH {
            for c in 0..c_n {
                for o in 0..o_n {
                    let mut sum = 0.0f32;
                    for p in 0..self.n {
                        sum += self.g[p * WIDTH + k] * *products.add((p * c_n + c) * o_n + o);
                    }
                    *output.offset(k as isize * st + c as isize * sc + o as isize * so) = sum;
                }
            }
        }
    }

    /// [`Winograd1dFilterGradient::point`] compiled for the best vector instructions this
    /// machine has; multiplies and adds only, so the same bits on every instruction set.
    unsafe fn point_on_isa(
        &self,
        p: usize,
        x: *const f32,
        dy: *const f32,
        v: *mut f32,
        out: *mut f32,
    ) {
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma | Isa::Avx512 => self.point_avx2(p, x, dy, v, out),
            _ => self.point(p, x, dy, v, out),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn point_avx2(
        &self,
        p: usize,
        x: *const f32,
        dy: *const f32,
        v: *mut f32,
        out: *mut f32,
    ) {
        self.point(p, x, dy, v, out)
    }

    /// Point `p`: `V[p]` and `Y[p]` of every tile into `v`, then `M[p] = V[p]^T Y[p]`.
    #[inline(always)]
    unsafe fn point(&self, p: usize, x: *const f32, dy: *const f32, v: *mut f32, out: *mut f32) {
        let (n, m, c_n, o_n) = (self.n, self.m, self.channels, self.out_features);
        let tiles_per_row = self.out_len.div_ceil(m);
        let tiles = self.batch * tiles_per_row;
        let y = v.add(tiles * c_n);
        for b in 0..self.batch {
            for tile in 0..tiles_per_row {
                let t = b * tiles_per_row + tile;
                let dst = std::slice::from_raw_parts_mut(v.add(t * c_n), c_n);
                dst.fill(0.0);
                let start = (tile * m) as isize - self.pad_low;
                for j in 0..n {
                    let pos = start + j as isize;
                    let coef = self.bt[p * n + j];
                    if coef == 0.0 || pos < 0 || pos >= self.in_len as isize {
                        continue;
                    }
                    let src = std::slice::from_raw_parts(
                        x.add((b * self.in_len + pos as usize) * c_n),
                        c_n,
                    );
                    for (d, s) in dst.iter_mut().zip(src) {
                        *d += coef * *s;
                    }
                }
                let dst = std::slice::from_raw_parts_mut(y.add(t * o_n), o_n);
                dst.fill(0.0);
                for i in 0..m.min(self.out_len - tile * m) {
                    let coef = self.at[i * n + p];
                    if coef == 0.0 {
                        continue;
                    }
                    let src = std::slice::from_raw_parts(
                        dy.add((b * self.out_len + tile * m + i) * o_n),
                        o_n,
                    );
                    for (d, s) in dst.iter_mut().zip(src) {
                        *d += coef * *s;
                    }
                }
            }
        }
        sgemm(
            self.backend,
            1,
            c_n,
            o_n,
            tiles,
            v,
            1,
            c_n as isize,
            y,
            o_n as isize,
            1,
            out,
            o_n as isize,
            1,
            false,
        );
    }
}
