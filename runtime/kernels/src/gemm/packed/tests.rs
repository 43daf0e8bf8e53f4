//! The packed product against a direct sum and against an in-order fused multiply-add chain,
//! on odd shapes, every operand layout, strided and transposed `c`, and several threads.

use super::*;

fn values(len: usize, seed: u32) -> Vec<f32> {
    crate::test_support::values_within(len, seed, 1.0)
}

fn has_avx2() -> bool {
    Isa::available().contains(&Isa::Avx2Fma)
}

/// One product's operands and the layout of each: `a` and `b` stored transposed or not, `c`
/// row-major with two floats of padding per row, or stored transposed.
struct Case {
    m: usize,
    n: usize,
    k: usize,
    a_t: bool,
    b_t: bool,
    c_t: bool,
}

impl Case {
    fn strides(&self) -> [isize; 6] {
        let (m, n, k) = (self.m as isize, self.n as isize, self.k as isize);
        let (rsa, csa) = if self.a_t { (1, m) } else { (k, 1) };
        let (rsb, csb) = if self.b_t { (1, k) } else { (n, 1) };
        let (rsc, csc) = if self.c_t { (1, m) } else { (n + 2, 1) };
        [rsa, csa, rsb, csb, rsc, csc]
    }

    fn c_len(&self) -> usize {
        if self.c_t {
            self.m * self.n
        } else {
            self.m * (self.n + 2)
        }
    }

    /// `c` after the packed product on `threads` threads, from `c0`.
    fn run(&self, a: &[f32], b: &[f32], c0: &[f32], threads: usize, accumulate: bool) -> Vec<f32> {
        let [rsa, csa, rsb, csb, rsc, csc] = self.strides();
        let mut c = c0.to_vec();
        unsafe {
            sgemm(
                threads,
                self.m,
                self.n,
                self.k,
                a.as_ptr(),
                rsa,
                csa,
                b.as_ptr(),
                rsb,
                csb,
                c.as_mut_ptr(),
                rsc,
                csc,
                accumulate,
            )
        };
        c
    }
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    // One register block; edges in both dimensions; several blocks of `k` (KC = 256), an
    // uneven last one; shapes large enough to be cut among threads in either dimension.
    for (m, n, k) in [
        (6, 16, 1),
        (7, 17, 5),
        (13, 40, 300),
        (128, 130, 513),
        (300, 70, 257),
        (64, 520, 200),
        (250, 250, 600),
    ] {
        for layout in 0..8 {
            v.push(Case {
                m,
                n,
                k,
                a_t: layout & 1 != 0,
                b_t: layout & 2 != 0,
                c_t: layout & 4 != 0,
            });
        }
    }
    v
}

/// Every layout, storing and accumulating, on 1 to 3 threads: within rounding of a direct
/// sum in f64, bitwise the same on any number of threads, and the padding of `c` untouched.
#[test]
fn matches_a_direct_sum_on_every_layout_and_any_thread_count() {
    if !has_avx2() {
        return;
    }
    for case in cases() {
        let (m, n, k) = (case.m, case.n, case.k);
        let [rsa, csa, rsb, csb, rsc, csc] = case.strides();
        let (a, b) = (values(m * k, 1), values(k * n, 2));
        let c0 = values(case.c_len(), 3);
        for accumulate in [false, true] {
            let one = case.run(&a, &b, &c0, 1, accumulate);
            for i in 0..m {
                for j in 0..n {
                    let at = |s: isize, t: isize, x: usize, y: usize| {
                        (x as isize * s + y as isize * t) as usize
                    };
                    let sum: f64 = (0..k)
                        .map(|p| a[at(rsa, csa, i, p)] as f64 * b[at(rsb, csb, p, j)] as f64)
                        .sum();
                    let cij = at(rsc, csc, i, j);
                    let want = sum + if accumulate { c0[cij] as f64 } else { 0.0 };
                    assert!(
                        (one[cij] as f64 - want).abs() <= 1e-5 * k as f64,
                        "{m}x{n}x{k} a_t {} b_t {} c_t {} acc {accumulate} [{i},{j}]: {} vs {want}",
                        case.a_t,
                        case.b_t,
                        case.c_t,
                        one[cij]
                    );
                }
            }
            if !case.c_t {
                for i in 0..m {
                    let pad = i * (n + 2) + n;
                    assert_eq!(&one[pad..pad + 2], &c0[pad..pad + 2], "padding of row {i}");
                }
            }
            for threads in [2, 3] {
                let got = case.run(&a, &b, &c0, threads, accumulate);
                assert!(
                    one.iter()
                        .zip(&got)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{m}x{n}x{k} on {threads} threads differs from one thread"
                );
            }
        }
    }
}

/// Each element is one fused multiply-add chain over `k` in order, from zero or from `c`,
/// across blocks of `k` and register blocks cut by the edge of `c`.
#[test]
fn every_element_is_an_in_order_fused_chain() {
    if !has_avx2() {
        return;
    }
    for (m, n, k) in [(13, 40, 300), (128, 130, 513), (250, 250, 600)] {
        let case = Case {
            m,
            n,
            k,
            a_t: false,
            b_t: false,
            c_t: false,
        };
        let (a, b) = (values(m * k, 4), values(k * n, 5));
        let c0 = values(case.c_len(), 6);
        for accumulate in [false, true] {
            let c = case.run(&a, &b, &c0, 2, accumulate);
            for i in 0..m {
                for j in 0..n {
                    let start = if accumulate { c0[i * (n + 2) + j] } else { 0.0 };
                    let want = (0..k).fold(start, |s, p| a[i * k + p].mul_add(b[p * n + j], s));
                    assert_eq!(
                        c[i * (n + 2) + j].to_bits(),
                        want.to_bits(),
                        "{m}x{n}x{k} [{i}][{j}] accumulate {accumulate}"
                    );
                }
            }
        }
    }
}

/// The packed product takes the dense layers' products and declines narrow, deep or small
/// ones, and everything on a machine without AVX2 or with AVX-512.
#[test]
fn serves_wide_shallow_products_on_avx2_machines_only() {
    let here =
        Isa::detect() == Isa::Avx2Fma && std::env::var("TESSEL_PACKED_GEMM").as_deref() != Ok("0");
    assert_eq!(serves(256, 1024, 1024), here);
    assert_eq!(serves(1024, 1024, 256), here);
    assert!(
        !serves(100_000, 64, 576),
        "a convolution's few output channels"
    );
    assert!(!serves(128, 128, 3136), "deeper than MAX_DEPTH");
    assert!(!serves(128, 128, 8), "too small to split");
    assert!(
        !serves(4096, 4096, 1024),
        "the whole-packed operand over MAX_SHARED"
    );
    assert_eq!(depth_blocks(1024), (4, 256));
    assert_eq!(depth_blocks(784), (4, 196));
    assert_eq!(depth_blocks(257), (2, 129));
}
