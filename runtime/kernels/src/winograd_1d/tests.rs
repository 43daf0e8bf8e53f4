//! The 1-D Winograd convolution against the direct sum in f64, on odd lengths, 1 and many
//! channels, valid, same, asymmetric and negative padding, both tiles, reversed and permuted
//! kernels; and the same bits on 1 and 3 threads.

use super::filter_gradient::Winograd1dFilterGradient;
use super::forward::{KernelStrides, Winograd1d, WIDTH};
use crate::gemm::GemmBackend;

fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

struct Case {
    batch: usize,
    len: usize,
    c: usize,
    o: usize,
    pads: (isize, isize),
    m: usize,
    /// Kernel layout: `[tap, c, o]` when false, `[o, c, tap]` when true.
    transposed: bool,
    reversed: bool,
}

/// Runs `case` on `threads` threads; returns the output and the largest error relative to
/// the sum of |terms| of the direct convolution.
fn run(case: &Case, threads: usize) -> (Vec<f32>, f64) {
    let out_len = (case.len as isize + case.pads.0 + case.pads.1 - 4) as usize;
    let x = random(case.batch * case.len * case.c, 1 + case.len as u64);
    let w = random(WIDTH * case.c * case.o, 7 + case.o as u64);
    let strides = if case.transposed {
        KernelStrides {
            tap: 1,
            input: WIDTH as isize,
            output: (WIDTH * case.c) as isize,
            reversed: case.reversed,
        }
    } else {
        KernelStrides {
            tap: (case.c * case.o) as isize,
            input: case.o as isize,
            output: 1,
            reversed: case.reversed,
        }
    };
    let plan = Winograd1d::new(
        case.batch,
        case.len,
        case.c,
        case.o,
        case.pads,
        out_len,
        strides,
        case.m,
        GemmBackend::Gemm,
        threads,
    )
    .expect("plan");
    assert_eq!(plan.tile(), case.m);
    let mut y = vec![f32::NAN; case.batch * out_len * case.o];
    let mut scratch = vec![0u8; plan.scratch_bytes() + 64];
    let block = scratch.as_mut_ptr();
    let aligned = block.wrapping_add(block.align_offset(64));
    unsafe { plan.run(x.as_ptr(), w.as_ptr(), y.as_mut_ptr(), aligned) };
    let weight = |k: usize, c: usize, o: usize| {
        let tap = if case.reversed { WIDTH - 1 - k } else { k };
        let at =
            tap as isize * strides.tap + c as isize * strides.input + o as isize * strides.output;
        w[at as usize] as f64
    };
    let mut worst = 0.0f64;
    for b in 0..case.batch {
        for t in 0..out_len {
            for o in 0..case.o {
                let (mut sum, mut mag) = (0.0f64, 0.0f64);
                for k in 0..WIDTH {
                    let pos = t as isize + k as isize - case.pads.0;
                    if pos < 0 || pos >= case.len as isize {
                        continue;
                    }
                    for c in 0..case.c {
                        let term =
                            x[(b * case.len + pos as usize) * case.c + c] as f64 * weight(k, c, o);
                        sum += term;
                        mag += term.abs();
                    }
                }
                let got = y[(b * out_len + t) * case.o + o] as f64;
                let err = (got - sum).abs();
                assert!(
                    err <= 1e-5 * mag + 1e-30,
                    "b{b} t{t} o{o}: {got} vs {sum} (sum |terms| {mag})"
                );
                if mag > 0.0 {
                    worst = worst.max(err / mag);
                }
            }
        }
    }
    (y, worst)
}

#[test]
fn matches_the_direct_sum_on_any_thread_count() {
    let cases = [
        // The text CNN's shapes, scaled down in batch: valid and same padding.
        Case {
            batch: 2,
            len: 200,
            c: 128,
            o: 128,
            pads: (0, 0),
            m: 4,
            transposed: false,
            reversed: false,
        },
        Case {
            batch: 3,
            len: 37,
            c: 17,
            o: 9,
            pads: (2, 2),
            m: 4,
            transposed: false,
            reversed: false,
        },
        // The data gradient's form: padded by 4, the kernel reversed and transposed.
        Case {
            batch: 2,
            len: 33,
            c: 24,
            o: 40,
            pads: (4, 4),
            m: 4,
            transposed: true,
            reversed: true,
        },
        Case {
            batch: 1,
            len: 5,
            c: 1,
            o: 1,
            pads: (0, 0),
            m: 4,
            transposed: false,
            reversed: false,
        },
        Case {
            batch: 5,
            len: 19,
            c: 1,
            o: 7,
            pads: (3, 1),
            m: 2,
            transposed: true,
            reversed: false,
        },
        Case {
            batch: 2,
            len: 64,
            c: 130,
            o: 3,
            pads: (-1, 2),
            m: 2,
            transposed: false,
            reversed: true,
        },
    ];
    for case in &cases {
        let (one, e1) = run(case, 1);
        let (three, e3) = run(case, 3);
        assert!(
            one.iter()
                .zip(&three)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "1 and 3 threads differ"
        );
        assert!(e1 < 1e-5 && e3 < 1e-5);
    }
}

#[test]
fn declines_what_it_does_not_implement() {
    let ks = KernelStrides {
        tap: 1,
        input: 5,
        output: 5,
        reversed: false,
    };
    let plan = |len, pads, out_len, m| {
        Winograd1d::new(1, len, 1, 1, pads, out_len, ks, m, GemmBackend::Gemm, 1)
    };
    assert!(plan(10, (0, 0), 6, 4).is_ok());
    assert!(plan(10, (0, 0), 7, 4).is_err(), "wrong output length");
    assert!(plan(10, (0, 0), 6, 3).is_err(), "no F(3, 5) here");
    assert!(plan(3, (0, 0), 0, 4).is_err(), "empty output");
}

/// The weight gradient of `case`'s forward convolution (its kernel layout is the output's),
/// against the direct sum over batch and positions in f64; returns dW and the largest error
/// relative to the sum of |terms|.
fn run_filter_gradient(case: &Case, threads: usize) -> (Vec<f32>, f64) {
    let out_len = (case.len as isize + case.pads.0 + case.pads.1 - 4) as usize;
    let x = random(case.batch * case.len * case.c, 3 + case.len as u64);
    let dy = random(case.batch * out_len * case.o, 5 + case.o as u64);
    let strides = if case.transposed {
        [1, WIDTH as isize, (WIDTH * case.c) as isize]
    } else {
        [(case.c * case.o) as isize, case.o as isize, 1]
    };
    let plan = Winograd1dFilterGradient::new(
        case.batch,
        case.len,
        case.c,
        case.o,
        case.pads,
        out_len,
        strides,
        case.m,
        GemmBackend::Gemm,
        threads,
    )
    .expect("plan");
    assert_eq!(plan.tile(), case.m);
    let mut dw = vec![f32::NAN; WIDTH * case.c * case.o];
    let mut scratch = vec![0u8; plan.scratch_bytes() + 64];
    let block = scratch.as_mut_ptr();
    let aligned = block.wrapping_add(block.align_offset(64));
    unsafe { plan.run(x.as_ptr(), dy.as_ptr(), dw.as_mut_ptr(), aligned) };
    let mut worst = 0.0f64;
    for k in 0..WIDTH {
        for c in 0..case.c {
            for o in 0..case.o {
                let (mut sum, mut mag) = (0.0f64, 0.0f64);
                for b in 0..case.batch {
                    for t in 0..out_len {
                        let pos = t as isize + k as isize - case.pads.0;
                        if pos < 0 || pos >= case.len as isize {
                            continue;
                        }
                        let term = x[(b * case.len + pos as usize) * case.c + c] as f64
                            * dy[(b * out_len + t) * case.o + o] as f64;
                        sum += term;
                        mag += term.abs();
                    }
                }
                let at =
                    k as isize * strides[0] + c as isize * strides[1] + o as isize * strides[2];
                let got = dw[at as usize] as f64;
                let err = (got - sum).abs();
                assert!(
                    err <= 1e-5 * mag + 1e-30,
                    "k{k} c{c} o{o}: {got} vs {sum} (sum |terms| {mag})"
                );
                if mag > 0.0 {
                    worst = worst.max(err / mag);
                }
            }
        }
    }
    (dw, worst)
}

#[test]
fn filter_gradient_matches_the_direct_sum_on_any_thread_count() {
    let cases = [
        Case {
            batch: 2,
            len: 200,
            c: 128,
            o: 64,
            pads: (0, 0),
            m: 4,
            transposed: false,
            reversed: false,
        },
        // 392 tiles: eight shares of 49, each of a full block and a block of one.
        Case {
            batch: 8,
            len: 200,
            c: 16,
            o: 8,
            pads: (0, 0),
            m: 4,
            transposed: false,
            reversed: false,
        },
        Case {
            batch: 3,
            len: 37,
            c: 17,
            o: 9,
            pads: (2, 2),
            m: 4,
            transposed: true,
            reversed: false,
        },
        Case {
            batch: 1,
            len: 5,
            c: 1,
            o: 1,
            pads: (0, 0),
            m: 4,
            transposed: false,
            reversed: false,
        },
        Case {
            batch: 5,
            len: 19,
            c: 1,
            o: 7,
            pads: (3, 1),
            m: 2,
            transposed: false,
            reversed: false,
        },
        Case {
            batch: 2,
            len: 30,
            c: 33,
            o: 3,
            pads: (-1, 2),
            m: 2,
            transposed: true,
            reversed: false,
        },
    ];
    for case in &cases {
        let (one, e1) = run_filter_gradient(case, 1);
        let (three, e3) = run_filter_gradient(case, 3);
        assert!(
            one.iter()
                .zip(&three)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "1 and 3 threads differ"
        );
        assert!(e1 < 1e-5 && e3 < 1e-5);
    }
}
