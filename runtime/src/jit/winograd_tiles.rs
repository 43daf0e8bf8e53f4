//! The per-tile Winograd transforms, vectorized over channels: every function works on
//! groups of 8 consecutive channels (NHWC keeps them contiguous), as `[f32; 8]` lanes whose
//! loops the compiler turns into one 256-bit operation each when the caller is compiled with
//! AVX2 (see `conv_winograd.rs`). `F` selects fused multiply-add (only where the caller has
//! the `fma` feature; elsewhere it would be a slow library call).
//!
//! Matrices are passed as fixed-size arrays (`at`: M x N, `bt`: N x N, `g`: N x R), so every
//! loop has constant bounds and unrolls.

/// Channels per vector group.
pub const LANES: usize = 8;

pub type Lanes = [f32; LANES];

const ZERO: Lanes = [0.0; LANES];

/// `acc + x * s` per lane.
#[inline(always)]
fn madd<const F: bool>(acc: Lanes, x: &Lanes, s: f32) -> Lanes {
    let mut out = acc;
    for (o, &xv) in out.iter_mut().zip(x) {
        *o = if F { xv.mul_add(s, *o) } else { *o + xv * s };
    }
    out
}

/// Reads `w <= 8` floats (zeros after them).
#[inline(always)]
unsafe fn load(p: *const f32, w: usize) -> Lanes {
    if w == LANES {
        std::ptr::read_unaligned(p as *const Lanes)
    } else {
        let mut v = ZERO;
        std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), w);
        v
    }
}

/// Writes the first `w <= 8` lanes.
#[inline(always)]
unsafe fn store(p: *mut f32, v: &Lanes, w: usize) {
    if w == LANES {
        std::ptr::write_unaligned(p as *mut Lanes, *v);
    } else {
        std::ptr::copy_nonoverlapping(v.as_ptr(), p, w);
    }
}

/// `rows[i] = sum_j mat[i][j] * cols[j]`: one matrix-vector product over lanes.
#[inline(always)]
fn mat_vec<const P: usize, const Q: usize, const F: bool>(
    mat: &[[f32; Q]; P],
    cols: &[Lanes; Q],
) -> [Lanes; P] {
    let mut out = [ZERO; P];
    for (o, row) in out.iter_mut().zip(mat) {
        for (x, &s) in cols.iter().zip(row) {
            *o = madd::<F>(*o, x, s);
        }
    }
    out
}

/// Input transform of one tile: `V[i*N + k] = (B^T d B)[i][k]`, written at
/// `v + (i*N + k) * plane + c` for the channels `c < ch`. `px[y][x]` points to the `ch`
/// channels of the tile's pixel (or to `ch` zeros outside the image).
///
/// # Safety
/// Every pointer in `px` must address `ch` floats, and `v` the `N * N` planes.
#[inline(always)]
pub unsafe fn input_tile<const N: usize, const F: bool>(
    bt: &[[f32; N]; N],
    px: &[[*const f32; N]; N],
    ch: usize,
    v: *mut f32,
    plane: usize,
) {
    let mut c0 = 0;
    while c0 < ch {
        let w = (ch - c0).min(LANES);
        // tmp[x][i] = (B^T d)[i][x], column by column.
        let mut tmp = [[ZERO; N]; N];
        for (x, t) in tmp.iter_mut().enumerate() {
            let mut col = [ZERO; N];
            for (y, c) in col.iter_mut().enumerate() {
                *c = load(px[y][x].add(c0), w);
            }
            *t = mat_vec::<N, N, F>(bt, &col);
        }
        for i in 0..N {
            let row: [Lanes; N] = std::array::from_fn(|x| tmp[x][i]);
            let out = mat_vec::<N, N, F>(bt, &row);
            for (k, o) in out.iter().enumerate() {
                store(v.add((i * N + k) * plane + c0), o, w);
            }
        }
        c0 += LANES;
    }
}

/// Output transform of one tile: `Y = A^T Mt A` where `Mt[a][b]` is read at
/// `mm + (a*N + b) * plane + o`, for the channels `o < ch`, written to `out[i][j]` where it is
/// not null (outputs past the image edge are dropped).
///
/// # Safety
/// `mm` must hold the `N * N` planes with `ch` rounded up to 8 readable floats each; every
/// non-null `out` pointer `ch` writable floats.
#[inline(always)]
pub unsafe fn output_tile<const N: usize, const M: usize, const F: bool>(
    at: &[[f32; N]; M],
    mm: *const f32,
    plane: usize,
    ch: usize,
    out: &[[*mut f32; M]; M],
) {
    let mut c0 = 0;
    while c0 < ch {
        let w = (ch - c0).min(LANES);
        // tmp[b][i] = (A^T Mt)[i][b]
        let mut tmp = [[ZERO; M]; N];
        for (b, t) in tmp.iter_mut().enumerate() {
            let col: [Lanes; N] =
                std::array::from_fn(|a| load(mm.add((a * N + b) * plane + c0), LANES));
            *t = mat_vec::<M, N, F>(at, &col);
        }
        for i in 0..M {
            let row: [Lanes; N] = std::array::from_fn(|b| tmp[b][i]);
            let y = mat_vec::<M, N, F>(at, &row);
            for (j, yj) in y.iter().enumerate() {
                if !out[i][j].is_null() {
                    store(out[i][j].add(c0), yj, w);
                }
            }
        }
        c0 += LANES;
    }
}

/// Transform of an `M x M` output-gradient tile for the weight gradient: `A dy A^T`
/// (`N x N`), written at `y + (a*N + b) * plane + k` for `k` below `ch` rounded up to 8 (the
/// padding lanes get zeros). `px[i][j]` points to the `ch` channels of `dy` (or to zeros).
///
/// # Safety
/// Every pointer in `px` must address `ch` floats; `y` the `N * N` planes with
/// `ch.next_multiple_of(8)` floats each.
#[inline(always)]
pub unsafe fn gradient_tile<const N: usize, const M: usize, const F: bool>(
    at: &[[f32; N]; M],
    px: &[[*const f32; M]; M],
    ch: usize,
    y: *mut f32,
    plane: usize,
) {
    // a[p][i] = at[i][p]: A as an N x M matrix.
    let a: [[f32; M]; N] = std::array::from_fn(|p| std::array::from_fn(|i| at[i][p]));
    let mut c0 = 0;
    while c0 < ch {
        let w = (ch - c0).min(LANES);
        // tmp[j][p] = (A dy)[p][j]
        let mut tmp = [[ZERO; N]; M];
        for (j, t) in tmp.iter_mut().enumerate() {
            let col: [Lanes; M] = std::array::from_fn(|i| load(px[i][j].add(c0), w));
            *t = mat_vec::<N, M, F>(&a, &col);
        }
        for p in 0..N {
            let row: [Lanes; M] = std::array::from_fn(|j| tmp[j][p]);
            let out = mat_vec::<N, M, F>(&a, &row);
            for (q, o) in out.iter().enumerate() {
                store(y.add((p * N + q) * plane + c0), o, LANES);
            }
        }
        c0 += LANES;
    }
}

/// Kernel transform of 8 channels at once: `G g G^T` for taps `g[ky][kx]`.
#[inline(always)]
pub fn kernel_tile<const N: usize, const R: usize, const F: bool>(
    g: &[[f32; R]; N],
    taps: &[[Lanes; R]; R],
) -> [[Lanes; N]; N] {
    // tmp[kx][i] = (G g)[i][kx]
    let tmp: [[Lanes; N]; R] = std::array::from_fn(|kx| {
        let col: [Lanes; R] = std::array::from_fn(|ky| taps[ky][kx]);
        mat_vec::<N, R, F>(g, &col)
    });
    std::array::from_fn(|i| {
        let row: [Lanes; R] = std::array::from_fn(|kx| tmp[kx][i]);
        mat_vec::<N, R, F>(g, &row)
    })
}

/// Inverse kernel transform for the weight gradient, 8 channels at once: `G^T du G` with
/// `du[i][j]` read at `du + (i*N + j) * plane`.
///
/// # Safety
/// `du` must address the `N * N` planes with 8 readable floats each.
#[inline(always)]
pub unsafe fn filter_tile<const N: usize, const R: usize, const F: bool>(
    g: &[[f32; R]; N],
    du: *const f32,
    plane: usize,
) -> [[Lanes; R]; R] {
    let gt: [[f32; N]; R] = std::array::from_fn(|k| std::array::from_fn(|i| g[i][k]));
    // tmp[j][ky] = (G^T du)[ky][j]
    let tmp: [[Lanes; R]; N] = std::array::from_fn(|j| {
        let col: [Lanes; N] = std::array::from_fn(|i| load(du.add((i * N + j) * plane), LANES));
        mat_vec::<R, N, F>(&gt, &col)
    });
    std::array::from_fn(|ky| {
        let row: [Lanes; N] = std::array::from_fn(|j| tmp[j][ky]);
        mat_vec::<R, N, F>(&gt, &row)
    })
}
