//! The forward convolution (also the data gradient: the same convolution with the kernel
//! reversed and transposed) on F(m, 5) tiles along the length.
//!
//! Per call: the kernel is transformed once (`U[p] = sum_k G[p][k] w[k]`, a `channels x
//! out_features` matrix per point `p`). The tiles (`batch x ceil(out_len / m)`) are cut into
//! fixed shares of [`TILES_PER_SHARE`]; for each share a thread transforms the input tiles
//! (`V[p] = sum_j B^T[p][j] d_j`), multiplies `M[p] = V[p] U[p]` for each point, and writes
//! `y_i = sum_p A^T[i][p] M[p]`. Every output is computed by one share whatever the thread
//! count, so the result is the same bits on any number of threads.

use crate::cpu::Isa;
use crate::gemm::{sgemm, GemmBackend};
use crate::parallel::{for_each_share, for_each_share_on_slots, Shared};
use crate::scratch::{floats, Scratch};
use crate::winograd::matrices::Matrices;
use crate::KernelError;

use super::Terms;

/// Output tiles per share: a share's transformed tiles and products (`2 x n x 48 x 128`
/// floats for F(4, 5) at 128 channels, 384 KB) stay in L2.
pub const TILES_PER_SHARE: usize = 48;

/// The window width this routine implements.
pub const WIDTH: usize = 5;

/// Where kernel element `(tap, input channel, output feature)` is, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelStrides {
    pub tap: isize,
    pub input: isize,
    pub output: isize,
    /// The window is applied reversed (tap `k` reads element `WIDTH - 1 - k`).
    pub reversed: bool,
}

/// A planned 1-D Winograd convolution of `[batch, in_len, channels]` into `[batch, out_len,
/// out_features]`, stride 1, undilated, `pad_low` zeros before each row (negative crops).
#[derive(Clone, Debug)]
pub struct Winograd1d {
    batch: usize,
    in_len: usize,
    channels: usize,
    out_len: usize,
    out_features: usize,
    pad_low: isize,
    kernel: KernelStrides,
    /// Output tile `m`; the input tile is `n = m + WIDTH - 1`.
    m: usize,
    n: usize,
    /// `A^T` (`m x n`), `B^T` (`n x n`) and `G` (`n x WIDTH`), row-major.
    at: Vec<f32>,
    bt: Vec<f32>,
    g: Vec<f32>,
    backend: GemmBackend,
    /// The vector instructions the transforms are compiled for (`Isa::detect`).
    isa: Isa,
    threads: usize,
    /// Scratch: the transformed kernel, then per thread slot the share's `V` and `M`.
    kernel_at: usize,
    slots_at: Vec<usize>,
    scratch: Scratch,
}

fn flat<const R: usize, const C: usize>(rows: &[[f32; C]; R]) -> Vec<f32> {
    rows.iter().flatten().copied().collect()
}

/// `A^T`, `B^T` and `G` of a 1-D Winograd tile, each row-major.
pub(super) type Transforms = (Vec<f32>, Vec<f32>, Vec<f32>);

/// `A^T`, `B^T` and `G` of F(m, 5), row-major, for the tiles this module implements.
pub(super) fn transforms(m: usize) -> Result<Transforms, KernelError> {
    match m {
        2 => {
            let t = const { Matrices::<6, 2, 5>::standard() };
            Ok((flat(&t.at), flat(&t.bt), flat(&t.g)))
        }
        4 => {
            let t = const { Matrices::<8, 4, 5>::standard() };
            Ok((flat(&t.at), flat(&t.bt), flat(&t.g)))
        }
        _ => Err(KernelError::Invalid(format!(
            "1-D Winograd: no F({m}, {WIDTH}) (tiles 2 and 4)"
        ))),
    }
}

impl Winograd1d {
    /// Plans the convolution with output tile `m` (2 or 4). The output length must be what
    /// the input length and padding give for a width-5 window with padding `pad_high`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        batch: usize,
        in_len: usize,
        channels: usize,
        out_features: usize,
        (pad_low, pad_high): (isize, isize),
        out_len: usize,
        kernel: KernelStrides,
        m: usize,
        backend: GemmBackend,
        threads: usize,
    ) -> Result<Winograd1d, KernelError> {
        let padded = in_len as isize + pad_low + pad_high - WIDTH as isize + 1;
        if padded != out_len as isize || out_len == 0 {
            return Err(KernelError::Invalid(format!(
                "1-D Winograd: output length {out_len} for input {in_len} padded \
                 ({pad_low}, {pad_high}) by a width-{WIDTH} window"
            )));
        }
        if batch == 0 || channels == 0 || out_features == 0 {
            return Err(KernelError::Invalid(
                "1-D Winograd: an empty dimension".into(),
            ));
        }
        let (at, bt, g) = transforms(m)?;
        let n = m + WIDTH - 1;
        let threads = threads.max(1);
        let mut scratch = Scratch::default();
        let kernel_at = scratch.region(n * channels * out_features * 4);
        let slot_floats = n * TILES_PER_SHARE * (channels + out_features);
        let slots_at = (0..threads)
            .map(|_| scratch.region(slot_floats * 4))
            .collect();
        Ok(Winograd1d {
            batch,
            in_len,
            channels,
            out_len,
            out_features,
            pad_low,
            kernel,
            m,
            n,
            at,
            bt,
            g,
            backend,
            isa: Isa::detect(),
            threads,
            kernel_at,
            slots_at,
            scratch,
        })
    }

    /// The output tile `m` of F(m, 5).
    pub fn tile(&self) -> usize {
        self.m
    }

    /// Bytes of the scratch block [`Winograd1d::run`] needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// # Safety
    /// `input`, `kernel` and `output` must address the planned arrays (the kernel by its
    /// strides), and `scratch` a block of [`Winograd1d::scratch_bytes`] aligned to 64 bytes.
    pub unsafe fn run(
        &self,
        input: *const f32,
        kernel: *const f32,
        output: *mut f32,
        scratch: *mut u8,
    ) {
        let u = Shared(floats(scratch, self.kernel_at));
        let k = Shared(kernel as *mut f32);
        for_each_share(self.n, self.threads, |p| unsafe {
            self.transform_kernel(p, k.get(), u.get())
        });
        let tiles_per_row = self.out_len.div_ceil(self.m);
        let tiles = self.batch * tiles_per_row;
        let shares = tiles.div_ceil(TILES_PER_SHARE);
        let (x, y, blk) = (Shared(input as *mut f32), Shared(output), Shared(scratch));
        for_each_share_on_slots(shares, self.threads, |slot, share| unsafe {
            let first = share * TILES_PER_SHARE;
            let count = TILES_PER_SHARE.min(tiles - first);
            let v = floats(blk.get(), self.slots_at[slot]);
            let prod = v.add(self.n * TILES_PER_SHARE * self.channels);
            self.share_on_isa(
                first,
                count,
                tiles_per_row,
                x.get(),
                u.get(),
                v,
                prod,
                y.get(),
            );
        });
    }

    /// `U[p][c][o] = sum_k G[p][k] w[k][c][o]`.
    unsafe fn transform_kernel(&self, p: usize, kernel: *const f32, u: *mut f32) {
        let (c_n, o_n) = (self.channels, self.out_features);
        let ks = self.kernel;
        let row = u.add(p * c_n * o_n);
        for c in 0..c_n {
            let out = std::slice::from_raw_parts_mut(row.add(c * o_n), o_n);
            out.fill(0.0);
            for k in 0..WIDTH {
                let gk = self.g[p * WIDTH + k];
                if gk == 0.0 {
                    continue;
                }
                let tap = if ks.reversed { WIDTH - 1 - k } else { k };
                let base = kernel.offset(tap as isize * ks.tap + c as isize * ks.input);
                for (o, v) in out.iter_mut().enumerate() {
                    *v += gk * *base.offset(o as isize * ks.output);
                }
            }
        }
    }

    /// [`Winograd1d::share`] compiled for the best vector instructions this machine has. The
    /// transforms are multiplies and adds (no fused multiply-add: Rust does not contract
    /// them), so every instruction set gives the same bits.
    #[allow(clippy::too_many_arguments)]
    unsafe fn share_on_isa(
        &self,
        first: usize,
        count: usize,
        tiles_per_row: usize,
        x: *const f32,
        u: *const f32,
        v: *mut f32,
        prod: *mut f32,
        y: *mut f32,
    ) {
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma | Isa::Avx512 => {
                self.share_avx2(first, count, tiles_per_row, x, u, v, prod, y)
            }
            _ => self.share(first, count, tiles_per_row, x, u, v, prod, y),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn share_avx2(
        &self,
        first: usize,
        count: usize,
        tiles_per_row: usize,
        x: *const f32,
        u: *const f32,
        v: *mut f32,
        prod: *mut f32,
        y: *mut f32,
    ) {
        self.share(first, count, tiles_per_row, x, u, v, prod, y)
    }

    /// Tiles `first..first + count`: input transform into `v`, the `n` products into `prod`,
    /// output transform into `y`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn share(
        &self,
        first: usize,
        count: usize,
        tiles_per_row: usize,
        x: *const f32,
        u: *const f32,
        v: *mut f32,
        prod: *mut f32,
        y: *mut f32,
    ) {
        let (n, m, c_n, o_n) = (self.n, self.m, self.channels, self.out_features);
        let v_point = TILES_PER_SHARE * c_n;
        let m_point = TILES_PER_SHARE * o_n;
        for t in 0..count {
            let (b, tile) = ((first + t) / tiles_per_row, (first + t) % tiles_per_row);
            let start = (tile * m) as isize - self.pad_low;
            let seq = x.add(b * self.in_len * c_n);
            for p in 0..n {
                let bt_row = &self.bt[p * n..(p + 1) * n];
                let terms = Terms::input_tile(bt_row, seq, self.in_len, c_n, start);
                terms.combine_into(std::slice::from_raw_parts_mut(
                    v.add(p * v_point + t * c_n),
                    c_n,
                ));
            }
        }
        for p in 0..n {
            sgemm(
                self.backend,
                1,
                count,
                o_n,
                c_n,
                v.add(p * v_point),
                c_n as isize,
                1,
                u.add(p * c_n * o_n),
                o_n as isize,
                1,
                prod.add(p * m_point),
                o_n as isize,
                1,
                false,
            );
        }
        for t in 0..count {
            let (b, tile) = ((first + t) / tiles_per_row, (first + t) % tiles_per_row);
            for i in 0..m.min(self.out_len - tile * m) {
                let pos = tile * m + i;
                let mut terms = Terms::new();
                for p in 0..n {
                    terms.push(self.at[i * n + p], prod.add(p * m_point + t * o_n));
                }
                terms.combine_into(std::slice::from_raw_parts_mut(
                    y.add((b * self.out_len + pos) * o_n),
                    o_n,
                ));
            }
        }
    }
}
