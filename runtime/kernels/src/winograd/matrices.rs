//! Winograd minimal-filtering transforms F(m, r): `m` outputs of an `r`-tap correlation from
//! `n = m + r - 1` inputs with `n` multiplications instead of `m * r`.
//!
//! For one dimension, `y = A^T [(G g) . (B^T d)]` where `d` holds `n` inputs, `g` the `r` taps
//! and `y_k = sum_j g_j d_{k+j}` the `m` outputs. In two dimensions the tile is transformed on
//! both sides: `Y = A^T [(G g G^T) . (B^T d B)] A`.
//!
//! The matrices come from the Cook-Toom construction (Lavin & Gray, "Fast Algorithms for
//! Convolutional Neural Networks", 2016): correlation is the transpose of polynomial
//! multiplication, which is evaluated at `n - 1` finite points and at infinity (the leading
//! coefficient) and interpolated back. With finite points `a_i` and `f_i = prod_{l != i}(a_i -
//! a_l)`:
//! - `A^T[k][i] = a_i^k` (evaluating the output polynomial), `A^T[k][inf] = [k == m - 1]`;
//! - `G[i][j] = a_i^j / f_i` (evaluating the kernel polynomial, with the Lagrange
//!   normalization), `G[inf][j] = [j == r - 1]`;
//! - row `i` of `B^T` holds the coefficients of `prod_{l != i}(x - a_l)`, row `inf` those of
//!   `prod_l (x - a_l)` (the interpolation, transposed).
//!
//! Everything is built in f64 and rounded to f32 once. Which points: see [`points_for`].

#[cfg(test)]
/// The transform matrices of F(m, r), row-major, in f64.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Transform {
    pub m: usize,
    pub r: usize,
    /// `m + r - 1`: the input tile size and the number of products per dimension.
    pub n: usize,
    /// `m x n` output transform.
    pub at: Vec<f64>,
    /// `n x n` input transform.
    pub bt: Vec<f64>,
    /// `n x r` kernel transform.
    pub g: Vec<f64>,
}

/// The finite interpolation points used for F(m, r) (infinity is always the last point), or
/// `None` when that size is not supported.
///
/// Chosen by the f32 error of a whole 2-D tile measured in `tests::chosen_points_have_the_
/// lowest_error` (max error relative to the sum of |terms|, random data):
/// - F(2, 3): `{0, 1, -1}` (the classic choice, exact in binary);
/// - F(2, 5) and F(4, 3): `{0, 1, -1, 2, -1/2}`, which beat `{0, +-1, +-2}` and
///   `{0, +-1, +-1/2}` (see `docs/jit.md` for the figures).
pub(crate) const fn points_for(m: usize, r: usize) -> Option<&'static [f64]> {
    match (m, r) {
        (2, 3) => Some(&POINTS_3),
        (2, 5) | (4, 3) => Some(&POINTS_5),
        (3, 5) => Some(&POINTS_6),
        (4, 5) | (6, 3) => Some(&POINTS_7),
        _ => None,
    }
}

/// The finite points of F(2, 3).
pub(crate) const POINTS_3: [f64; 3] = [0.0, 1.0, -1.0];
/// The finite points of F(2, 5) and F(4, 3).
pub(crate) const POINTS_5: [f64; 5] = [0.0, 1.0, -1.0, 2.0, -0.5];
/// The finite points of F(3, 5).
pub(crate) const POINTS_6: [f64; 6] = [0.0, 1.0, -1.0, 2.0, -0.5, 0.5];
/// The finite points of F(4, 5) and F(6, 3).
pub(crate) const POINTS_7: [f64; 7] = [0.0, 1.0, -1.0, 2.0, -0.5, 0.5, -2.0];

/// F(M, R) (N = M + R - 1) rounded to f32, as fixed-size arrays. The routines evaluate
/// [`Matrices::standard`] at compile time (`const { .. }`), so that in their unrolled loops
/// the multiplications by 0, 1 and -1 fold away (`tiles.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Matrices<const N: usize, const M: usize, const R: usize> {
    pub at: [[f32; N]; M],
    pub bt: [[f32; N]; N],
    pub g: [[f32; R]; N],
}

impl<const N: usize, const M: usize, const R: usize> Matrices<N, M, R> {
    /// F(M, R) with the points of [`points_for`].
    pub(crate) const fn standard() -> Self {
        let points: &[f64] = match points_for(M, R) {
            Some(p) => p,
            None => panic!("no transform for this F(m, r)"),
        };
        Self::cook_toom(points)
    }

    /// The Cook-Toom construction of the module comment in f64, rounded to f32; the same
    /// arithmetic as [`Transform::cook_toom`] (a test checks they agree), written for `const`
    /// evaluation. `points` must be `N - 1` distinct finite values.
    pub(crate) const fn cook_toom(points: &[f64]) -> Self {
        assert!(N == M + R - 1 && points.len() == N - 1);
        let mut at = [[0f32; N]; M];
        let mut bt = [[0f32; N]; N];
        let mut g = [[0f32; R]; N];
        let mut i = 0;
        while i < N - 1 {
            let a = points[i];
            let (mut f, mut l) = (1.0f64, 0);
            while l < N - 1 {
                if l != i {
                    f *= a - points[l];
                }
                l += 1;
            }
            assert!(f != 0.0, "repeated interpolation point");
            let (mut pow, mut k) = (1.0f64, 0);
            while k < M || k < R {
                if k < M {
                    at[k][i] = pow as f32;
                }
                if k < R {
                    g[i][k] = (pow / f) as f32;
                }
                pow *= a;
                k += 1;
            }
            let row = poly_from_roots_const::<N>(points, i);
            let mut p = 0;
            while p < N {
                bt[i][p] = row[p] as f32;
                p += 1;
            }
            i += 1;
        }
        at[M - 1][N - 1] = 1.0;
        g[N - 1][R - 1] = 1.0;
        let row = poly_from_roots_const::<N>(points, N);
        let mut p = 0;
        while p < N {
            bt[N - 1][p] = row[p] as f32;
            p += 1;
        }
        Matrices { at, bt, g }
    }
}

/// Coefficients (constant term first) of `prod (x - points[l])` over `l != skip`.
const fn poly_from_roots_const<const N: usize>(points: &[f64], skip: usize) -> [f64; N] {
    let mut c = [0f64; N];
    c[0] = 1.0;
    let (mut deg, mut l) = (0, 0);
    while l < points.len() {
        if l != skip {
            let mut p = deg + 1;
            loop {
                let shifted = if p > 0 { c[p - 1] } else { 0.0 };
                if p < N {
                    c[p] = shifted - points[l] * c[p];
                }
                if p == 0 {
                    break;
                }
                p -= 1;
            }
            deg += 1;
        }
        l += 1;
    }
    c
}

#[cfg(test)]
impl Transform {
    /// F(m, r) with the points of [`points_for`].
    pub fn standard(m: usize, r: usize) -> Option<Transform> {
        Transform::cook_toom(m, r, points_for(m, r)?).ok()
    }

    /// F(m, r) from `m + r - 2` distinct finite points (plus the point at infinity).
    pub(crate) fn cook_toom(m: usize, r: usize, points: &[f64]) -> Result<Transform, String> {
        if m == 0 || r == 0 {
            return Err("F(m, r) needs m >= 1 and r >= 1".into());
        }
        let n = m + r - 1;
        if points.len() != n - 1 {
            return Err(format!(
                "F({m}, {r}) needs {} finite points, got {}",
                n - 1,
                points.len()
            ));
        }
        for (i, a) in points.iter().enumerate() {
            if !a.is_finite() || points[..i].contains(a) {
                return Err(format!("interpolation point {a} is repeated or not finite"));
            }
        }
        let fin = n - 1;
        let mut at = vec![0.0; m * n];
        let mut g = vec![0.0; n * r];
        let mut bt = vec![0.0; n * n];
        for (i, &a) in points.iter().enumerate() {
            for k in 0..m {
                at[k * n + i] = a.powi(k as i32);
            }
            let f: f64 = points
                .iter()
                .enumerate()
                .filter(|&(l, _)| l != i)
                .map(|(_, &b)| a - b)
                .product();
            for j in 0..r {
                g[i * r + j] = a.powi(j as i32) / f;
            }
            let others: Vec<f64> = points
                .iter()
                .enumerate()
                .filter(|&(l, _)| l != i)
                .map(|(_, &b)| b)
                .collect();
            bt[i * n..(i + 1) * n].copy_from_slice(&poly_from_roots(&others, n));
        }
        at[(m - 1) * n + fin] = 1.0;
        g[fin * r + r - 1] = 1.0;
        bt[fin * n..].copy_from_slice(&poly_from_roots(points, n));
        Ok(Transform { m, r, n, at, bt, g })
    }

    /// The three matrices rounded to f32 (`at`, `bt`, `g`).
    pub fn to_f32(&self) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        (f(&self.at), f(&self.bt), f(&self.g))
    }
}

#[cfg(test)]
/// Coefficients (constant term first, `len` of them) of `prod (x - root)`.
fn poly_from_roots(roots: &[f64], len: usize) -> Vec<f64> {
    let mut c = vec![0.0; len.max(roots.len() + 1)];
    c[0] = 1.0;
    for (deg, &root) in roots.iter().enumerate() {
        // Multiply the degree-`deg` polynomial by (x - root).
        for p in (0..=deg + 1).rev() {
            let shifted = if p > 0 { c[p - 1] } else { 0.0 };
            c[p] = shifted - root * c[p];
        }
    }
    c.truncate(len);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift), values in [-1, 1).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        }
    }

    fn winograd_1d(t: &Transform, d: &[f64], g: &[f64]) -> Vec<f64> {
        let n = t.n;
        let gg: Vec<f64> = (0..n)
            .map(|i| (0..t.r).map(|j| t.g[i * t.r + j] * g[j]).sum())
            .collect();
        let bd: Vec<f64> = (0..n)
            .map(|i| (0..n).map(|j| t.bt[i * n + j] * d[j]).sum())
            .collect();
        (0..t.m)
            .map(|k| (0..n).map(|i| t.at[k * n + i] * gg[i] * bd[i]).sum())
            .collect()
    }

    #[test]
    fn one_dimensional_identity_holds_in_f64() {
        let mut rng = Rng(0x9e3779b97f4a7c15);
        for (m, r) in [(2, 3), (2, 5), (4, 3), (3, 5), (4, 5), (6, 3)] {
            let t = Transform::standard(m, r).unwrap();
            for _ in 0..50 {
                let d: Vec<f64> = (0..t.n).map(|_| rng.next()).collect();
                let g: Vec<f64> = (0..r).map(|_| rng.next()).collect();
                let y = winograd_1d(&t, &d, &g);
                for (k, &yk) in y.iter().enumerate() {
                    let direct: f64 = (0..r).map(|j| g[j] * d[k + j]).sum();
                    assert!(
                        (yk - direct).abs() < 1e-11,
                        "F({m},{r}) y{k}: {yk} vs {direct}"
                    );
                }
            }
        }
    }

    #[test]
    fn other_point_sets_satisfy_the_identity_too() {
        let mut rng = Rng(12345);
        for pts in [
            &[0.0, 1.0, -1.0, 2.0, -2.0][..],
            &[0.0, 1.0, -1.0, 0.5, -0.5][..],
            &[0.0, 0.5, -3.0][..],
        ] {
            // m = 2: n - 1 = r finite points.
            let r = pts.len();
            let t = Transform::cook_toom(2, r, pts).unwrap();
            let d: Vec<f64> = (0..t.n).map(|_| rng.next()).collect();
            let g: Vec<f64> = (0..r).map(|_| rng.next()).collect();
            let y = winograd_1d(&t, &d, &g);
            for (k, &yk) in y.iter().enumerate() {
                let direct: f64 = (0..r).map(|j| g[j] * d[k + j]).sum();
                assert!((yk - direct).abs() < 1e-12, "{pts:?}");
            }
        }
    }

    #[test]
    fn compile_time_matrices_equal_the_runtime_construction() {
        fn flat<const A: usize, const B: usize>(m: &[[f32; B]; A]) -> Vec<f32> {
            m.iter().flatten().copied().collect()
        }
        let f23 = Matrices::<4, 2, 3>::standard();
        let (at, bt, g) = Transform::standard(2, 3).unwrap().to_f32();
        assert_eq!((flat(&f23.at), flat(&f23.bt), flat(&f23.g)), (at, bt, g));
        let f25 = Matrices::<6, 2, 5>::standard();
        let (at, bt, g) = Transform::standard(2, 5).unwrap().to_f32();
        assert_eq!((flat(&f25.at), flat(&f25.bt), flat(&f25.g)), (at, bt, g));
        let f43 = Matrices::<6, 4, 3>::standard();
        let (at, bt, g) = Transform::standard(4, 3).unwrap().to_f32();
        assert_eq!((flat(&f43.at), flat(&f43.bt), flat(&f43.g)), (at, bt, g));
        let f35 = Matrices::<7, 3, 5>::standard();
        let (at, bt, g) = Transform::standard(3, 5).unwrap().to_f32();
        assert_eq!((flat(&f35.at), flat(&f35.bt), flat(&f35.g)), (at, bt, g));
        let f45 = Matrices::<8, 4, 5>::standard();
        let (at, bt, g) = Transform::standard(4, 5).unwrap().to_f32();
        assert_eq!((flat(&f45.at), flat(&f45.bt), flat(&f45.g)), (at, bt, g));
        let f63 = Matrices::<8, 6, 3>::standard();
        let (at, bt, g) = Transform::standard(6, 3).unwrap().to_f32();
        assert_eq!((flat(&f63.at), flat(&f63.bt), flat(&f63.g)), (at, bt, g));
    }

    #[test]
    fn bad_points_are_rejected() {
        assert!(Transform::cook_toom(2, 3, &[0.0, 1.0]).is_err());
        assert!(Transform::cook_toom(2, 3, &[0.0, 1.0, 1.0]).is_err());
        assert!(Transform::cook_toom(2, 3, &[0.0, f64::NAN, 1.0]).is_err());
        assert!(Transform::cook_toom(0, 3, &[]).is_err());
        assert!(Transform::standard(3, 7).is_none());
        assert!(Transform::standard(5, 5).is_none());
    }

    /// One 2-D tile computed in f32 (transforms and products rounded to f32 at every step, as
    /// the routine does), against the f64 direct correlation: the largest error relative to
    /// the sum of |terms| of that output, over `trials` random tiles.
    pub(crate) fn tile_error_f32(t: &Transform, trials: usize) -> (f64, f64) {
        let (at, bt, g) = t.to_f32();
        let (m, r, n) = (t.m, t.r, t.n);
        let mut rng = Rng(0x2545f4914f6cdd1d);
        let (mut worst, mut sum) = (0.0f64, 0.0f64);
        // f32 matrix product helpers: c (p x q) = a (p x s) * b (s x q).
        let mul = |a: &[f32], b: &[f32], p: usize, s: usize, q: usize| -> Vec<f32> {
            let mut c = vec![0f32; p * q];
            for i in 0..p {
                for j in 0..q {
                    let mut acc = 0f32;
                    for k in 0..s {
                        acc += a[i * s + k] * b[k * q + j];
                    }
                    c[i * q + j] = acc;
                }
            }
            c
        };
        let tr = |a: &[f32], p: usize, q: usize| -> Vec<f32> {
            let mut c = vec![0f32; p * q];
            for i in 0..p {
                for j in 0..q {
                    c[j * p + i] = a[i * q + j];
                }
            }
            c
        };
        for _ in 0..trials {
            let d: Vec<f64> = (0..n * n).map(|_| rng.next()).collect();
            let w: Vec<f64> = (0..r * r).map(|_| rng.next()).collect();
            let d32: Vec<f32> = d.iter().map(|&x| x as f32).collect();
            let w32: Vec<f32> = w.iter().map(|&x| x as f32).collect();
            let u = mul(&mul(&g, &w32, n, r, r), &tr(&g, n, r), n, r, n);
            let v = mul(&mul(&bt, &d32, n, n, n), &tr(&bt, n, n), n, n, n);
            let prod: Vec<f32> = u.iter().zip(&v).map(|(a, b)| a * b).collect();
            let y = mul(&mul(&at, &prod, m, n, n), &tr(&at, m, n), m, n, m);
            for i in 0..m {
                for j in 0..m {
                    let (mut exact, mut mag) = (0.0f64, 0.0f64);
                    for ky in 0..r {
                        for kx in 0..r {
                            let term =
                                (d32[(i + ky) * n + j + kx] as f64) * w32[ky * r + kx] as f64;
                            exact += term;
                            mag += term.abs();
                        }
                    }
                    let e = (y[i * m + j] as f64 - exact).abs() / mag;
                    worst = worst.max(e);
                    sum += e;
                }
            }
        }
        (worst, sum / (trials * m * m) as f64)
    }

    #[test]
    fn chosen_points_have_the_lowest_error() {
        // The alternatives tried; the chosen set must have the lowest mean error (the max
        // over random tiles is printed too, but it is a noisy statistic).
        let candidates: [&[f64]; 7] = [
            &[0.0, 1.0, -1.0, 2.0, -2.0],
            &[0.0, 1.0, -1.0, 0.5, -0.5],
            &[0.0, 1.0, -1.0, 2.0, -0.5],
            &[0.0, 1.0, -1.0, 0.5, -2.0],
            &[0.0, 1.0, -1.0, 2.0, 0.5],
            &[0.0, 1.0, -1.0, 0.5, 3.0],
            &[0.0, 1.0, -1.0, 2.0, 3.0],
        ];
        for (m, r) in [(2, 5), (4, 3)] {
            let (cmax, cmean) = tile_error_f32(&Transform::standard(m, r).unwrap(), 20000);
            println!(
                "F({m},{r}) chosen {:?}: max {cmax:.3e} mean {cmean:.3e}",
                points_for(m, r)
            );
            for pts in candidates {
                let (emax, emean) =
                    tile_error_f32(&Transform::cook_toom(m, r, pts).unwrap(), 20000);
                println!("F({m},{r}) {pts:?}: max {emax:.3e} mean {emean:.3e}");
                assert!(cmean <= emean * 1.02, "F({m},{r}): {pts:?} is better");
            }
        }
        // The larger tiles: the chosen sets against their alternatives (printed, for the
        // table in docs/jit.md; run with --nocapture).
        let larger: [(usize, usize, &[&[f64]]); 3] = [
            (
                3,
                5,
                &[
                    &[0.0, 1.0, -1.0, 2.0, -0.5, 0.5],
                    &[0.0, 1.0, -1.0, 2.0, -0.5, -2.0],
                    &[0.0, 1.0, -1.0, 2.0, -2.0, 0.5],
                    &[0.0, 1.0, -1.0, 0.5, -0.5, 2.0],
                ],
            ),
            (
                4,
                5,
                &[
                    &[0.0, 1.0, -1.0, 2.0, -0.5, 0.5, -2.0],
                    &[0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0],
                    &[0.0, 1.0, -1.0, 2.0, -0.5, 0.5, 3.0],
                ],
            ),
            (
                6,
                3,
                &[
                    &[0.0, 1.0, -1.0, 2.0, -0.5, 0.5, -2.0],
                    &[0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0],
                ],
            ),
        ];
        for (m, r, sets) in larger {
            let (cmax, cmean) = tile_error_f32(&Transform::standard(m, r).unwrap(), 20000);
            println!(
                "F({m},{r}) chosen {:?}: max {cmax:.3e} mean {cmean:.3e}",
                points_for(m, r)
            );
            for pts in sets {
                let (emax, emean) =
                    tile_error_f32(&Transform::cook_toom(m, r, pts).unwrap(), 20000);
                println!("F({m},{r}) {pts:?}: max {emax:.3e} mean {emean:.3e}");
            }
        }
        let (f23, _) = tile_error_f32(&Transform::standard(2, 3).unwrap(), 2000);
        println!("F(2,3) {{0, 1, -1}}: max {f23:.3e}");
        assert!(f23 < 1e-6);
    }
}
