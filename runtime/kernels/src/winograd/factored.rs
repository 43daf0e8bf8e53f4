//! The transform matrices factored by the `±a` pairs of their interpolation points, so that
//! a product `y = mat * x` costs about half the additions and multiplications.
//!
//! With a point set symmetric about 0 (F(4x4, 5x5) uses `0, ±1, ±2, ±1/2`), the rows of
//! `B^T` for `a` and `-a` agree up to the sign of every other entry: `B^T[j][p] = (-1)^p
//! B^T[i][p]`. With `E` and `O` the sums of row `i`'s even and odd terms, `y_i = E + O` and
//! `y_j = E - O`: each half summed once and a butterfly, instead of two full rows. Where the
//! columns are the points (`A^T`, `G^T`) it is the transpose: butterflies on the inputs
//! first (`x_i + x_j`, `x_i - x_j`), then a sparser product. This is how hand-written
//! Winograd transforms are arranged; here it is derived at compile time from the matrix, so
//! every F(m, r) gets it, and whichever of the two forms (or none) needs the fewest
//! operations is taken.
//!
//! The factored product rounds differently from the row-by-row one (the halves are summed
//! before they meet), within the same error: `tests` here check that it is the matrix's
//! product (in f64) and count its operations, and the routines' tests check their error
//! against the direct sum. So it runs where that rounding decides nothing downstream: the weight gradient, and the
//! forward routine when asked ([`super::TransformOrder::Factored`], the JIT's data
//! gradients). The forward convolution keeps the row-by-row sums, whose rounding the
//! conformance corpus's max-pool ties were matched with (`tiles.rs`, `mat_vec`).

use super::matrices::Matrices;

/// At most this many pairs (matrices up to 8 x 8).
pub(crate) const MAX_PAIRS: usize = 4;

/// `(v[i], v[j]) <- (v[i] + v[j], v[i] - v[j])`, or `v[j] - v[i]` for the second when
/// `flip` (the partner row is the negation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Butterfly {
    pub i: usize,
    pub j: usize,
    pub flip: bool,
}

const NO_BUTTERFLY: Butterfly = Butterfly {
    i: 0,
    j: 0,
    flip: false,
};

/// `y = after(core * before(x))` equals `mat * x` for the `P x Q` matrix it was made from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Factored<const P: usize, const Q: usize> {
    /// Butterflies on the input vector, the first `n_before` entries.
    pub before: [Butterfly; MAX_PAIRS],
    pub n_before: usize,
    /// The remaining sparse product.
    pub core: [[f32; Q]; P],
    /// Per row of `core`, a column holding exactly 1 to start its sum from (no operation),
    /// or `Q` when the row has none.
    pub first: [usize; P],
    /// Butterflies on the output vector, the first `n_after` entries.
    pub after: [Butterfly; MAX_PAIRS],
    pub n_after: usize,
}

impl<const P: usize, const Q: usize> Factored<P, Q> {
    /// The cheapest of: `mat` as it is, its rows paired, its columns paired.
    pub const fn of(mat: &[[f32; Q]; P]) -> Self {
        let plain = Self::plain(mat);
        let rows = Self::rows_paired(mat);
        let cols = Self::columns_paired(mat);
        let mut best = plain;
        if rows.operations() < best.operations() {
            best = rows;
        }
        if cols.operations() < best.operations() {
            best = cols;
        }
        best
    }

    /// No factoring.
    pub const fn plain(mat: &[[f32; Q]; P]) -> Self {
        Self::with(
            *mat,
            [NO_BUTTERFLY; MAX_PAIRS],
            0,
            [NO_BUTTERFLY; MAX_PAIRS],
            0,
        )
    }

    /// Additions, subtractions and multiplications of one product (an FMA counts once).
    pub const fn operations(&self) -> usize {
        let mut ops = 2 * (self.n_before + self.n_after);
        let mut i = 0;
        while i < P {
            let nonzero = nonzeros(&self.core[i]);
            if nonzero > 0 {
                ops += if self.first[i] < Q {
                    nonzero - 1
                } else {
                    nonzero
                };
            }
            i += 1;
        }
        ops
    }

    /// Rows `i < j` with `mat[j][p] = ±(-1)^p mat[i][p]` (row `i` having both even and odd
    /// terms): row `i` of the core keeps the even terms, row `j` the odd ones, and a
    /// butterfly makes `E + O` and `±(E - O)`.
    const fn rows_paired(mat: &[[f32; Q]; P]) -> Self {
        let mut core = *mat;
        let mut after = [NO_BUTTERFLY; MAX_PAIRS];
        let mut n_after = 0;
        let mut paired = [false; P];
        let mut i = 0;
        while i < P {
            let mut j = i + 1;
            while j < P && !paired[i] && n_after < MAX_PAIRS {
                if !paired[j] && has_both_parities(&mat[i]) {
                    if let Some(flip) = alternating(&mat[i], &mat[j]) {
                        let mut p = 0;
                        while p < Q {
                            let even = p % 2 == 0;
                            core[i][p] = if even { mat[i][p] } else { 0.0 };
                            core[j][p] = if even { 0.0 } else { mat[i][p] };
                            p += 1;
                        }
                        after[n_after] = Butterfly { i, j, flip };
                        n_after += 1;
                        paired[i] = true;
                        paired[j] = true;
                    }
                }
                j += 1;
            }
            i += 1;
        }
        Self::with(core, [NO_BUTTERFLY; MAX_PAIRS], 0, after, n_after)
    }

    /// Columns `i < j` with `mat[k][j] = ±(-1)^k mat[k][i]` (column `i` having entries in
    /// both even and odd rows): a butterfly turns `x_i, x_j` into `x_i + x_j` and `x_i -
    /// x_j`, which the even and the odd rows take (the other way round for `-`).
    const fn columns_paired(mat: &[[f32; Q]; P]) -> Self {
        let t = transpose(mat);
        let mut core = *mat;
        let mut before = [NO_BUTTERFLY; MAX_PAIRS];
        let mut n_before = 0;
        let mut paired = [false; Q];
        let mut i = 0;
        while i < Q {
            let mut j = i + 1;
            while j < Q && !paired[i] && n_before < MAX_PAIRS {
                if !paired[j] && has_both_parities(&t[i]) {
                    if let Some(flip) = alternating(&t[i], &t[j]) {
                        // The butterfly makes x_i + x_j and x_i - x_j. Unflipped, the even
                        // rows take the sum and the odd rows the difference; flipped
                        // (`mat[k][j] = -(-1)^k mat[k][i]`), the other way round.
                        let (even_at, odd_at) = if flip { (j, i) } else { (i, j) };
                        let mut k = 0;
                        while k < P {
                            core[k][i] = 0.0;
                            core[k][j] = 0.0;
                            k += 1;
                        }
                        k = 0;
                        while k < P {
                            let at = if k % 2 == 0 { even_at } else { odd_at };
                            core[k][at] = mat[k][i];
                            k += 1;
                        }
                        before[n_before] = Butterfly { i, j, flip: false };
                        n_before += 1;
                        paired[i] = true;
                        paired[j] = true;
                    }
                }
                j += 1;
            }
            i += 1;
        }
        Self::with(core, before, n_before, [NO_BUTTERFLY; MAX_PAIRS], 0)
    }

    const fn with(
        core: [[f32; Q]; P],
        before: [Butterfly; MAX_PAIRS],
        n_before: usize,
        after: [Butterfly; MAX_PAIRS],
        n_after: usize,
    ) -> Self {
        let mut first = [Q; P];
        let mut i = 0;
        while i < P {
            let mut p = 0;
            while p < Q && first[i] == Q {
                if core[i][p] == 1.0 {
                    first[i] = p;
                }
                p += 1;
            }
            i += 1;
        }
        Factored {
            before,
            n_before,
            core,
            first,
            after,
            n_after,
        }
    }

    #[cfg(test)]
    /// `mat * x` in f64 through the factored form (for tests: the same operations as the
    /// vector code, in the same order).
    pub(crate) fn apply_f64(&self, x: &[f64; Q]) -> [f64; P] {
        let mut x = *x;
        for b in &self.before[..self.n_before] {
            butterfly_f64(&mut x, *b);
        }
        let mut y = [0.0; P];
        for (i, row) in self.core.iter().enumerate() {
            let mut acc = if self.first[i] < Q {
                x[self.first[i]]
            } else {
                0.0
            };
            for (p, &s) in row.iter().enumerate() {
                if p != self.first[i] && s != 0.0 {
                    acc += s as f64 * x[p];
                }
            }
            y[i] = acc;
        }
        for b in &self.after[..self.n_after] {
            butterfly_f64(&mut y, *b);
        }
        y
    }
}

#[cfg(test)]
fn butterfly_f64<const L: usize>(v: &mut [f64; L], b: Butterfly) {
    let (s, d) = (v[b.i] + v[b.j], v[b.i] - v[b.j]);
    v[b.i] = s;
    v[b.j] = if b.flip { -d } else { d };
}

/// The transform matrices of F(m x m, r x r) the factored routines use, factored, in the
/// orientation each tile transform multiplies by. (The kernel transform `G`, once per call,
/// stays row by row.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FactoredMatrices<const N: usize, const M: usize, const R: usize> {
    /// `B^T` (N x N): the input transform.
    pub bt: Factored<N, N>,
    /// `A^T` (M x N): the output transform.
    pub at: Factored<M, N>,
    /// `A` (N x M): the output-gradient transform of the weight gradient.
    pub a: Factored<N, M>,
    /// `G^T` (R x N): the inverse kernel transform of the weight gradient.
    pub gt: Factored<R, N>,
}

impl<const N: usize, const M: usize, const R: usize> FactoredMatrices<N, M, R> {
    /// [`Matrices::standard`], factored.
    pub(crate) const fn standard() -> Self {
        let m = Matrices::<N, M, R>::standard();
        FactoredMatrices {
            bt: Factored::of(&m.bt),
            at: Factored::of(&m.at),
            a: Factored::of(&transpose(&m.at)),
            gt: Factored::of(&transpose(&m.g)),
        }
    }
}

const fn transpose<const P: usize, const Q: usize>(mat: &[[f32; Q]; P]) -> [[f32; P]; Q] {
    let mut t = [[0f32; P]; Q];
    let mut i = 0;
    while i < P {
        let mut j = 0;
        while j < Q {
            t[j][i] = mat[i][j];
            j += 1;
        }
        i += 1;
    }
    t
}

const fn nonzeros<const Q: usize>(row: &[f32; Q]) -> usize {
    let (mut n, mut p) = (0, 0);
    while p < Q {
        if row[p] != 0.0 {
            n += 1;
        }
        p += 1;
    }
    n
}

/// Whether `row` has a nonzero entry at an even and at an odd index.
const fn has_both_parities<const Q: usize>(row: &[f32; Q]) -> bool {
    let (mut even, mut odd, mut p) = (false, false, 0);
    while p < Q {
        if row[p] != 0.0 {
            if p % 2 == 0 {
                even = true;
            } else {
                odd = true;
            }
        }
        p += 1;
    }
    even && odd
}

/// `Some(flip)` when `b[p] = s * (-1)^p * a[p]` for every `p`, with `s = -1` if `flip`.
const fn alternating<const Q: usize>(a: &[f32; Q], b: &[f32; Q]) -> Option<bool> {
    let mut sign = 1.0f32;
    while sign >= -1.0 {
        let mut p = 0;
        let mut all = true;
        while p < Q && all {
            let parity = if p % 2 == 0 { 1.0 } else { -1.0 };
            all = b[p] == sign * parity * a[p];
            p += 1;
        }
        if all {
            return Some(sign < 0.0);
        }
        sign -= 2.0;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mat * x` in f64, row by row.
    fn product<const P: usize, const Q: usize>(mat: &[[f32; Q]; P], x: &[f64; Q]) -> [f64; P] {
        std::array::from_fn(|i| (0..Q).map(|p| mat[i][p] as f64 * x[p]).sum())
    }

    fn values<const Q: usize>(seed: u64) -> [f64; Q] {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        std::array::from_fn(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 2001) as f64 / 1000.0 - 1.0
        })
    }

    fn check<const P: usize, const Q: usize>(mat: &[[f32; Q]; P]) -> Factored<P, Q> {
        let f = Factored::of(mat);
        for seed in 1..20 {
            let x = values::<Q>(seed);
            let (want, got) = (product(mat, &x), f.apply_f64(&x));
            for (w, g) in want.iter().zip(&got) {
                assert!(
                    (w - g).abs() <= 1e-12 * (1.0 + w.abs()),
                    "{want:?} != {got:?}"
                );
            }
        }
        assert!(f.operations() <= Factored::plain(mat).operations());
        f
    }

    fn check_all<const N: usize, const M: usize, const R: usize>() -> FactoredMatrices<N, M, R> {
        let m = Matrices::<N, M, R>::standard();
        check(&m.bt);
        check(&m.at);
        check(&transpose(&m.at));
        check(&m.g);
        check(&transpose(&m.g));
        FactoredMatrices::standard()
    }

    #[test]
    fn factored_products_equal_the_matrices() {
        check_all::<4, 2, 3>();
        check_all::<6, 2, 5>();
        check_all::<6, 4, 3>();
        check_all::<7, 3, 5>();
        check_all::<8, 6, 3>();
        check_all::<8, 4, 5>();
    }

    /// F(4x4, 5x5)'s points `0, ±1, ±2, ±1/2` pair three rows of `B^T` and three columns of
    /// `A^T`: 36 -> 26 and 22 -> 16 operations, as counted by hand (rows 1 and 2 of `B^T`:
    /// `E = x2 + x6 - 17/4 x4`, `O = x1 + x5 - 17/4 x3`, then `E ± O`: 6 operations for the
    /// two rows instead of 10).
    #[test]
    fn the_symmetric_points_of_f4_5_pair_up() {
        let m = Matrices::<8, 4, 5>::standard();
        let f = check_all::<8, 4, 5>();
        assert_eq!(f.bt.n_after, 3);
        assert_eq!(f.at.n_before, 3);
        assert_eq!(f.a.n_after, 3);
        assert_eq!(
            (Factored::plain(&m.bt).operations(), f.bt.operations()),
            (36, 26)
        );
        assert_eq!(
            (Factored::plain(&m.at).operations(), f.at.operations()),
            (22, 16)
        );
    }

    #[test]
    fn a_matrix_without_pairs_stays_as_it_is() {
        let mat = [[1.0, 2.0, 0.0], [0.5, 0.0, 3.0]];
        assert_eq!(Factored::of(&mat), Factored::plain(&mat));
    }
}
