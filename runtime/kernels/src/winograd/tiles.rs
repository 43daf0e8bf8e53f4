//! The per-tile Winograd transforms, vectorized over channels: every function works on
//! groups of consecutive channels (NHWC keeps them contiguous) held in a [`Vector`]: one
//! AVX-512 register of 16 ([`Avx512`], for the per-block transforms where the machine has
//! AVX-512), one AVX2 register of 8 with fused multiply-add ([`Avx`]), or an `[f32; 8]` the
//! compiler vectorizes as it can ([`Portable`]). The kernel transforms, once per call, stay
//! at 8 lanes.
//!
//! Matrices are passed as compile-time constants of fixed size, so every loop has constant
//! bounds and unrolls: `bt` (N x N), `at` (M x N), `a` (N x M) and `gt` (R x N) through
//! [`Transform`], as arrays or factored by their point pairs (`factored.rs`); the kernel
//! transform's `g` (N x R) as an array.

use super::factored::{Butterfly, Factored, MAX_PAIRS};

/// Channels per vector group.
pub(crate) const LANES: usize = 8;

/// `LANES` f32 lanes (8, or 16 for [`Avx512`]).
pub(crate) trait Vector: Copy {
    /// Channels per vector.
    const LANES: usize;
    fn zero() -> Self;
    /// Reads `w <= LANES` floats (zeros after them).
    ///
    /// # Safety
    /// `p` must address `w` readable floats.
    unsafe fn load(p: *const f32, w: usize) -> Self;
    /// Writes the first `w <= LANES` lanes.
    ///
    /// # Safety
    /// `p` must address `w` writable floats.
    unsafe fn store(self, p: *mut f32, w: usize);
    /// `self + x * s` per lane.
    fn madd(self, x: Self, s: f32) -> Self;
    fn add(self, x: Self) -> Self;
    fn sub(self, x: Self) -> Self;
}

/// Portable lanes: plain loops.
#[derive(Clone, Copy)]
pub struct Portable([f32; LANES]);

impl Vector for Portable {
    const LANES: usize = LANES;
    #[inline(always)]
    fn zero() -> Self {
        Portable([0.0; LANES])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32, w: usize) -> Self {
        let mut v = [0.0; LANES];
        std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), w);
        Portable(v)
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, w: usize) {
        std::ptr::copy_nonoverlapping(self.0.as_ptr(), p, w);
    }
    #[inline(always)]
    fn madd(self, x: Self, s: f32) -> Self {
        let mut out = self.0;
        for (o, xv) in out.iter_mut().zip(x.0) {
            *o += xv * s;
        }
        Portable(out)
    }
    #[inline(always)]
    fn add(self, x: Self) -> Self {
        let mut out = self.0;
        for (o, xv) in out.iter_mut().zip(x.0) {
            *o += xv;
        }
        Portable(out)
    }
    #[inline(always)]
    fn sub(self, x: Self) -> Self {
        let mut out = self.0;
        for (o, xv) in out.iter_mut().zip(x.0) {
            *o -= xv;
        }
        Portable(out)
    }
}

/// One AVX register. Only to be used inside functions compiled with `avx2,fma` on a machine
/// that has them (checked by `Isa::detect` when a plan is made), where these always-inlined
/// methods become single instructions; hence this module is private to the crate.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx(std::arch::x86_64::__m256);

#[cfg(target_arch = "x86_64")]
impl Vector for Avx {
    const LANES: usize = LANES;
    #[inline(always)]
    fn zero() -> Self {
        // SAFETY: AVX is present wherever an `Avx` is used (see the type's comment).
        Avx(unsafe { std::arch::x86_64::_mm256_setzero_ps() })
    }
    #[inline(always)]
    unsafe fn load(p: *const f32, w: usize) -> Self {
        use std::arch::x86_64::*;
        if w == LANES {
            Avx(_mm256_loadu_ps(p))
        } else {
            let mut v = [0.0f32; LANES];
            std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), w);
            Avx(_mm256_loadu_ps(v.as_ptr()))
        }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, w: usize) {
        use std::arch::x86_64::*;
        if w == LANES {
            _mm256_storeu_ps(p, self.0)
        } else {
            let mut v = [0.0f32; LANES];
            _mm256_storeu_ps(v.as_mut_ptr(), self.0);
            std::ptr::copy_nonoverlapping(v.as_ptr(), p, w);
        }
    }
    #[inline(always)]
    fn madd(self, x: Self, s: f32) -> Self {
        use std::arch::x86_64::*;
        // SAFETY: FMA is present wherever an `Avx` is used (see the type's comment).
        Avx(unsafe { _mm256_fmadd_ps(x.0, _mm256_set1_ps(s), self.0) })
    }
    #[inline(always)]
    fn add(self, x: Self) -> Self {
        // SAFETY: as above.
        Avx(unsafe { std::arch::x86_64::_mm256_add_ps(self.0, x.0) })
    }
    #[inline(always)]
    fn sub(self, x: Self) -> Self {
        // SAFETY: as above.
        Avx(unsafe { std::arch::x86_64::_mm256_sub_ps(self.0, x.0) })
    }
}

/// One AVX-512 register (16 lanes): the per-block transforms where the CPU has AVX-512
/// (`Isa::Avx512`). As for [`Avx`], only used inside functions compiled with `avx512f` on a
/// machine that has it.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx512(std::arch::x86_64::__m512);

#[cfg(target_arch = "x86_64")]
impl Avx512 {
    /// The first `w` of 16 lanes.
    #[inline(always)]
    fn mask(w: usize) -> u16 {
        ((1u32 << w) - 1) as u16
    }
}

#[cfg(target_arch = "x86_64")]
impl Vector for Avx512 {
    const LANES: usize = 16;
    #[inline(always)]
    fn zero() -> Self {
        // SAFETY: AVX-512 is present wherever an `Avx512` is used (see the type's comment).
        Avx512(unsafe { std::arch::x86_64::_mm512_setzero_ps() })
    }
    #[inline(always)]
    unsafe fn load(p: *const f32, w: usize) -> Self {
        use std::arch::x86_64::*;
        if w == 16 {
            Avx512(_mm512_loadu_ps(p))
        } else {
            // A masked load reads (and may fault on) only the lanes asked for.
            Avx512(_mm512_maskz_loadu_ps(Self::mask(w), p))
        }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, w: usize) {
        use std::arch::x86_64::*;
        if w == 16 {
            _mm512_storeu_ps(p, self.0)
        } else {
            _mm512_mask_storeu_ps(p, Self::mask(w), self.0)
        }
    }
    #[inline(always)]
    fn madd(self, x: Self, s: f32) -> Self {
        use std::arch::x86_64::*;
        // SAFETY: as above.
        Avx512(unsafe { _mm512_fmadd_ps(x.0, _mm512_set1_ps(s), self.0) })
    }
    #[inline(always)]
    fn add(self, x: Self) -> Self {
        // SAFETY: as above.
        Avx512(unsafe { std::arch::x86_64::_mm512_add_ps(self.0, x.0) })
    }
    #[inline(always)]
    fn sub(self, x: Self) -> Self {
        // SAFETY: as above.
        Avx512(unsafe { std::arch::x86_64::_mm512_sub_ps(self.0, x.0) })
    }
}

/// Runs `$body` for `$i` in `0..$n` (`$n` at most 8, a constant in every use here) as
/// straight-line code: the compiler's own unrolling gives up on these nests, and only
/// unrolled, the constant matrix entries fold into the instructions.
macro_rules! unroll {
    ($n:expr, |$i:ident| $body:block) => {{
        let n: usize = $n;
        assert!(n <= 8, "unroll! supports at most 8 iterations");
        unroll!(@step n, $i, $body, 0 1 2 3 4 5 6 7);
    }};
    (@step $n:ident, $i:ident, $body:block, $($k:literal)*) => {
        $(
            if $k < $n {
                let $i: usize = $k;
                $body
            }
        )*
    };
}

/// Runs `$body` for every group of `$lanes` channels below `$ch` with `$c0` its first channel
/// and `$w` its width: the full groups in a loop where `$w` is the constant `$lanes` (so the
/// loads and stores have no tail test), then the partial last group, if any.
macro_rules! by_chunks {
    ($ch:expr, $lanes:expr, |$c0:ident, $w:ident| $body:block) => {{
        let ch: usize = $ch;
        let lanes: usize = $lanes;
        let full = ch / lanes * lanes;
        let mut $c0 = 0;
        while $c0 < full {
            let $w = lanes;
            $body
            $c0 += lanes;
        }
        if $c0 < ch {
            let $w = ch - $c0;
            $body
        }
    }};
}

/// A transform matrix as its tile products run it: `[[f32; Q]; P]` row by row
/// (`mat_vec`), or [`Factored`] by its point pairs. Both are compile-time constants in every
/// use, so the unrolled code holds only the operations their nonzero entries need.
pub(crate) trait Transform<const P: usize, const Q: usize> {
    /// `mat * cols` over lanes.
    fn apply<V: Vector>(&self, cols: &[V; Q]) -> [V; P];
}

impl<const P: usize, const Q: usize> Transform<P, Q> for [[f32; Q]; P] {
    #[inline(always)]
    fn apply<V: Vector>(&self, cols: &[V; Q]) -> [V; P] {
        mat_vec(self, cols)
    }
}

impl<const P: usize, const Q: usize> Transform<P, Q> for Factored<P, Q> {
    #[inline(always)]
    fn apply<V: Vector>(&self, cols: &[V; Q]) -> [V; P] {
        factored_mat_vec(self, cols)
    }
}

/// `rows[i] = sum_j mat[i][j] * cols[j]`: one matrix-vector product over lanes. With `mat` a
/// compile-time constant, a 0 entry costs nothing and 1 / -1 an add / subtract. (Skipping
/// `0 * x` differs from the product only for an infinite or NaN `x`, where Winograd's
/// cancellations do not reproduce the direct sum anyway.)
///
/// The order of these sums fixes the forward convolution's rounding, and that rounding
/// decides exact max-pool ties in the conformance corpus (equal fields give equal direct
/// sums but not equal Winograd outputs): a reordering, even an exact one such as factoring
/// by the points' ± pairs, must pass the corpus against JAX (docs/performance.md). This is
/// why the forward keeps it and only the gradients run [`factored_mat_vec`].
#[inline(always)]
fn mat_vec<const P: usize, const Q: usize, V: Vector>(
    mat: &[[f32; Q]; P],
    cols: &[V; Q],
) -> [V; P] {
    let mut out = [V::zero(); P];
    unroll!(P, |i| {
        unroll!(Q, |j| {
            let s = mat[i][j];
            if s == 1.0 {
                out[i] = out[i].add(cols[j]);
            } else if s == -1.0 {
                out[i] = out[i].sub(cols[j]);
            } else if s != 0.0 {
                out[i] = out[i].madd(cols[j], s);
            }
        });
    });
    out
}

/// `mat * cols` for a transform matrix in its factored form ([`Factored`]): the butterflies
/// on the inputs, the sparse core row by row, the butterflies on the outputs. `f` is a
/// compile-time constant in every use, so in the unrolled code a 0 entry costs nothing, 1 /
/// -1 an add / subtract, and each row starts from its `first` term instead of from zero.
#[inline(always)]
fn factored_mat_vec<const P: usize, const Q: usize, V: Vector>(
    f: &Factored<P, Q>,
    cols: &[V; Q],
) -> [V; P] {
    let mut x = *cols;
    unroll!(MAX_PAIRS, |k| {
        if k < f.n_before {
            butterfly(&mut x, f.before[k]);
        }
    });
    let mut out = [V::zero(); P];
    unroll!(P, |i| {
        let first = f.first[i];
        let mut acc = if first < Q { Some(x[first]) } else { None };
        unroll!(Q, |j| {
            let s = f.core[i][j];
            if j != first && s != 0.0 {
                acc = Some(match acc {
                    None => V::zero().madd(x[j], s),
                    Some(a) if s == 1.0 => a.add(x[j]),
                    Some(a) if s == -1.0 => a.sub(x[j]),
                    Some(a) => a.madd(x[j], s),
                });
            }
        });
        out[i] = acc.unwrap_or(V::zero());
    });
    unroll!(MAX_PAIRS, |k| {
        if k < f.n_after {
            butterfly(&mut out, f.after[k]);
        }
    });
    out
}

/// `(v[i], v[j]) <- (v[i] + v[j], v[i] - v[j])` (`v[j] - v[i]` when flipped).
#[inline(always)]
fn butterfly<const L: usize, V: Vector>(v: &mut [V; L], b: Butterfly) {
    let (x, y) = (v[b.i], v[b.j]);
    v[b.i] = x.add(y);
    v[b.j] = if b.flip { y.sub(x) } else { x.sub(y) };
}

/// Input transform of one tile: `V[i*N + k] = (B^T d B)[i][k]`, written at
/// `v + (i*N + k) * plane + c` for the channels `c < ch`. `px[y][x]` points to the `ch`
/// channels of the tile's pixel (or to `ch` zeros outside the image).
///
/// # Safety
/// Every pointer in `px` must address `ch` floats, and `v` the `N * N` planes.
#[inline(always)]
pub(crate) unsafe fn input_tile<const N: usize, V: Vector>(
    bt: &impl Transform<N, N>,
    px: &[[*const f32; N]; N],
    ch: usize,
    v: *mut f32,
    plane: usize,
) {
    by_chunks!(ch, V::LANES, |c0, w| {
        // tmp[x][i] = (B^T d)[i][x], column by column.
        let mut tmp = [[V::zero(); N]; N];
        unroll!(N, |x| {
            let mut col = [V::zero(); N];
            unroll!(N, |y| {
                col[y] = V::load(px[y][x].add(c0), w);
            });
            tmp[x] = bt.apply(&col);
        });
        unroll!(N, |i| {
            let mut row = [V::zero(); N];
            unroll!(N, |x| {
                row[x] = tmp[x][i];
            });
            let out = bt.apply(&row);
            unroll!(N, |k| {
                out[k].store(v.add((i * N + k) * plane + c0), w);
            });
        });
    });
}

/// Output transform of one tile: `Y = A^T Mt A` where `Mt[a][b]` is read at
/// `mm + (a*N + b) * plane + o`, for the channels `o < ch`, written to `out[i][j]` where it is
/// not null (outputs past the image edge are dropped). With a `bias` (`ch` floats), each
/// output is `Y + bias[o]`: the same bits as adding it afterwards.
///
/// # Safety
/// `mm` must hold the `N * N` planes with `ch` readable floats each; every non-null `out`
/// pointer `ch` writable floats, and `bias`, when given, `ch` readable floats.
#[inline(always)]
pub(crate) unsafe fn output_tile<const N: usize, const M: usize, V: Vector>(
    at: &impl Transform<M, N>,
    mm: *const f32,
    plane: usize,
    ch: usize,
    bias: Option<*const f32>,
    out: &[[*mut f32; M]; M],
) {
    by_chunks!(ch, V::LANES, |c0, w| {
        let bias = bias.map(|b| V::load(b.add(c0), w));
        // tmp[b][i] = (A^T Mt)[i][b]
        let mut tmp = [[V::zero(); M]; N];
        unroll!(N, |b| {
            let mut col = [V::zero(); N];
            unroll!(N, |a| {
                col[a] = V::load(mm.add((a * N + b) * plane + c0), w);
            });
            tmp[b] = at.apply(&col);
        });
        unroll!(M, |i| {
            let mut row = [V::zero(); N];
            unroll!(N, |b| {
                row[b] = tmp[b][i];
            });
            let y = at.apply(&row);
            unroll!(M, |j| {
                if !out[i][j].is_null() {
                    let yj = match bias {
                        Some(b) => y[j].add(b),
                        None => y[j],
                    };
                    yj.store(out[i][j].add(c0), w);
                }
            });
        });
    });
}

/// Transform of an `M x M` output-gradient tile for the weight gradient: `A dy A^T`
/// (`N x N`), written at `y + (a*N + b) * plane + k` for `k` below `ch` rounded up to 8 (the
/// padding lanes get zeros). `px[i][j]` points to the `ch` channels of `dy` (or to zeros).
///
/// # Safety
/// Every pointer in `px` must address `ch` floats; `y` the `N * N` planes with
/// `ch.next_multiple_of(8)` floats each.
#[inline(always)]
pub(crate) unsafe fn gradient_tile<const N: usize, const M: usize, V: Vector>(
    a: &impl Transform<N, M>,
    px: &[[*const f32; M]; M],
    ch: usize,
    y: *mut f32,
    plane: usize,
) {
    by_chunks!(ch, V::LANES, |c0, w| {
        // The lanes past `w` load as zeros and so transform to zeros: written up to the next
        // multiple of 8, they are the zero padding the products read.
        let padded = w.next_multiple_of(LANES).min(V::LANES);
        // tmp[j][p] = (A dy)[p][j]
        let mut tmp = [[V::zero(); N]; M];
        unroll!(M, |j| {
            let mut col = [V::zero(); M];
            unroll!(M, |i| {
                col[i] = V::load(px[i][j].add(c0), w);
            });
            tmp[j] = a.apply(&col);
        });
        unroll!(N, |p| {
            let mut row = [V::zero(); M];
            unroll!(M, |j| {
                row[j] = tmp[j][p];
            });
            let out = a.apply(&row);
            unroll!(N, |q| {
                out[q].store(y.add((p * N + q) * plane + c0), padded);
            });
        });
    });
}

/// Kernel transform of 8 channels at once: `G g G^T` for taps `g[ky][kx]`.
#[inline(always)]
pub(crate) fn kernel_tile<const N: usize, const R: usize, V: Vector>(
    g: &[[f32; R]; N],
    taps: &[[V; R]; R],
) -> [[V; N]; N] {
    // tmp[kx][i] = (G g)[i][kx]
    let mut tmp = [[V::zero(); N]; R];
    unroll!(R, |kx| {
        let mut col = [V::zero(); R];
        unroll!(R, |ky| {
            col[ky] = taps[ky][kx];
        });
        tmp[kx] = mat_vec::<N, R, V>(g, &col);
    });
    let mut out = [[V::zero(); N]; N];
    unroll!(N, |i| {
        let mut row = [V::zero(); R];
        unroll!(R, |kx| {
            row[kx] = tmp[kx][i];
        });
        out[i] = mat_vec::<N, R, V>(g, &row);
    });
    out
}

/// Inverse kernel transform for the weight gradient, 8 channels at once: `G^T du G` with
/// `du[i][j]` read at `du + (i*N + j) * plane`.
///
/// # Safety
/// `du` must address the `N * N` planes with 8 readable floats each.
#[inline(always)]
pub(crate) unsafe fn filter_tile<const N: usize, const R: usize, V: Vector>(
    gt: &impl Transform<R, N>,
    du: *const f32,
    plane: usize,
) -> [[V; R]; R] {
    // tmp[j][ky] = (G^T du)[ky][j]
    let mut tmp = [[V::zero(); R]; N];
    unroll!(N, |j| {
        let mut col = [V::zero(); N];
        unroll!(N, |i| {
            col[i] = V::load(du.add((i * N + j) * plane), LANES);
        });
        tmp[j] = gt.apply(&col);
    });
    let mut out = [[V::zero(); R]; R];
    unroll!(R, |ky| {
        let mut row = [V::zero(); N];
        unroll!(N, |j| {
            row[j] = tmp[j][ky];
        });
        out[ky] = gt.apply(&row);
    });
    out
}
