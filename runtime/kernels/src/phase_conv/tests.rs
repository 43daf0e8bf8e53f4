//! [`PhaseConv`] against the definition of a convolution of a dilated input.

use super::*;
use crate::test_support::{scratch_block, values_within};

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u32) -> Vec<f32> {
    values_within(n, seed, 1.0)
}

/// The convolution by its definition, in f64, on the explicitly dilated input: per output
/// the sum and the sum of the products' magnitudes. The kernel is HWIO, read reversed where
/// asked.
fn reference(
    g: &DilatedInputGeometry,
    reversed: [bool; 2],
    x: &[f32],
    k: &[f32],
) -> Vec<(f64, f64)> {
    let [kh, kw] = g.window;
    let [oh, ow] = g.out_size;
    let (c, o) = (g.channels, g.out_channels);
    let mut out = vec![(0f64, 0f64); g.batch * oh * ow * o];
    for (i, (v, m)) in out.iter_mut().enumerate() {
        let (oc, x0, y0, b) = (i % o, i / o % ow, i / o / ow % oh, i / o / ow / oh);
        for ky in 0..kh {
            for kx in 0..kw {
                let dy = y0 as isize + ky as isize - g.pad_low[0];
                let dx = x0 as isize + kx as isize - g.pad_low[1];
                let (sy, sx) = (g.dilation[0] as isize, g.dilation[1] as isize);
                if dy < 0 || dx < 0 || dy % sy != 0 || dx % sx != 0 {
                    continue;
                }
                let (iy, ix) = ((dy / sy) as usize, (dx / sx) as usize);
                if iy >= g.height || ix >= g.width {
                    continue;
                }
                let ky = if reversed[0] { kh - 1 - ky } else { ky };
                let kx = if reversed[1] { kw - 1 - kx } else { kx };
                for ch in 0..c {
                    let xv = x[((b * g.height + iy) * g.width + ix) * c + ch] as f64;
                    let kv = k[((ky * kw + kx) * c + ch) * o + oc] as f64;
                    *v += xv * kv;
                    *m += (xv * kv).abs();
                }
            }
        }
    }
    out
}

fn run(plan: &PhaseConv, x: &[f32], k: &[f32], out_len: usize) -> Vec<f32> {
    let mut out = vec![f32::NAN; out_len];
    let mut scratch = scratch_block(plan.scratch_bytes());
    unsafe {
        plan.run(
            x.as_ptr(),
            k.as_ptr(),
            out.as_mut_ptr(),
            scratch.as_mut_ptr() as *mut u8,
        )
    };
    out
}

/// Data gradients of strided convolutions (3x3 and 1x1 at stride 2, as XLA writes them for
/// TF's `same` padding and for `valid`), odd sizes, stride 3, uneven strides, 1 channel and
/// many, a reversed kernel, negative padding: on every instruction set, every output matches
/// the definition, and 1, 2 and 3 threads give the same bits.
#[test]
fn matches_the_definition_on_one_and_more_threads() {
    // (batch, h, w, c, window, o, out_size, dilation, pad_low, reversed)
    type Case = (
        usize,
        usize,
        usize,
        usize,
        [usize; 2],
        usize,
        [usize; 2],
        [usize; 2],
        [isize; 2],
        [bool; 2],
    );
    let cases: [Case; 8] = [
        // ResNet's stride-2 3x3 data gradient (`same`, even input): pad 2_1.
        (
            2,
            8,
            8,
            32,
            [3, 3],
            16,
            [16, 16],
            [2, 2],
            [2, 2],
            [false, false],
        ),
        // Its 1x1 shortcut: pad 0_1, three phases with no tap.
        (
            3,
            8,
            8,
            32,
            [1, 1],
            16,
            [16, 16],
            [2, 2],
            [0, 0],
            [false, false],
        ),
        // Odd output (`valid` stride-2 forward of 15x15): pad 2_2, reversed kernel.
        (
            2,
            7,
            7,
            5,
            [3, 3],
            3,
            [15, 15],
            [2, 2],
            [2, 2],
            [true, true],
        ),
        // One input channel, one output channel, odd sizes.
        (
            1,
            5,
            6,
            1,
            [3, 3],
            1,
            [11, 12],
            [2, 2],
            [1, 2],
            [false, true],
        ),
        // Stride 3 with a 5x4 window, many channels.
        (
            1,
            4,
            5,
            67,
            [5, 4],
            9,
            [12, 14],
            [3, 3],
            [4, 3],
            [true, false],
        ),
        // Dilated in one dimension only.
        (
            2,
            6,
            5,
            4,
            [3, 3],
            7,
            [12, 5],
            [2, 1],
            [2, 1],
            [false, false],
        ),
        // Negative padding crops the dilated input.
        (
            1,
            9,
            9,
            3,
            [3, 3],
            4,
            [14, 15],
            [2, 2],
            [-1, 0],
            [false, false],
        ),
        // More outputs than the dilated input reaches (the high padding is wide).
        (1, 3, 3, 2, [2, 2], 3, [9, 9], [2, 2], [1, 1], [true, true]),
    ];
    for (batch, h, w, c, window, o, out_size, dilation, pad_low, reversed) in cases {
        let g = DilatedInputGeometry {
            batch,
            height: h,
            width: w,
            channels: c,
            window,
            out_channels: o,
            out_size,
            dilation,
            pad_low,
        };
        let x = values(batch * h * w * c, 1);
        let k = values(window[0] * window[1] * c * o, 2);
        let layout = KernelLayout {
            strides: [window[1] * c * o, c * o, o, 1],
            reversed,
        };
        let want = reference(&g, reversed, &x, &k);
        let out_len = batch * out_size[0] * out_size[1] * o;
        let plan = |threads| PhaseConv::new(g, layout, threads).unwrap();
        let one = run(&plan(1), &x, &k, out_len);
        for (i, (&got, &(v, m))) in one.iter().zip(&want).enumerate() {
            assert!(
                (got as f64 - v).abs() <= 1e-5 * m.max(1e-3),
                "{g:?} output {i}: {got} vs {v}"
            );
        }
        for threads in [2, 3] {
            let got = run(&plan(threads), &x, &k, out_len);
            assert!(
                one.iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{g:?}: {threads} threads differ from one"
            );
        }
    }
}

/// The kernel in another layout (`[in, out, kh, kw]`, as XLA's data gradient reads the
/// transposed forward kernel) gives the same result as the same values in HWIO.
#[test]
fn reads_the_kernel_in_any_layout() {
    let g = DilatedInputGeometry {
        batch: 2,
        height: 5,
        width: 5,
        channels: 6,
        window: [3, 3],
        out_channels: 4,
        out_size: [10, 10],
        dilation: [2, 2],
        pad_low: [2, 2],
    };
    let (c, o) = (6, 4);
    let x = values(2 * 5 * 5 * c, 3);
    let hwio = values(9 * c * o, 4);
    let mut iohw = vec![0f32; hwio.len()];
    for ky in 0..3 {
        for kx in 0..3 {
            for ci in 0..c {
                for oi in 0..o {
                    iohw[((ci * o + oi) * 3 + ky) * 3 + kx] =
                        hwio[((ky * 3 + kx) * c + ci) * o + oi];
                }
            }
        }
    }
    let plain = KernelLayout {
        strides: [3 * c * o, c * o, o, 1],
        reversed: [false, false],
    };
    let transposed = KernelLayout {
        strides: [3, 1, o * 9, 9],
        reversed: [false, false],
    };
    let out_len = 2 * 10 * 10 * o;
    let a = run(&PhaseConv::new(g, plain, 2).unwrap(), &x, &hwio, out_len);
    let b = run(
        &PhaseConv::new(g, transposed, 2).unwrap(),
        &x,
        &iohw,
        out_len,
    );
    assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
}

/// An undilated input and an empty geometry are declined, not planned.
#[test]
fn declines_undilated_and_empty_inputs() {
    let g = DilatedInputGeometry {
        batch: 1,
        height: 4,
        width: 4,
        channels: 2,
        window: [3, 3],
        out_channels: 2,
        out_size: [4, 4],
        dilation: [1, 1],
        pad_low: [1, 1],
    };
    let layout = KernelLayout {
        strides: [12, 4, 2, 1],
        reversed: [false, false],
    };
    assert!(matches!(
        PhaseConv::new(g, layout, 1),
        Err(KernelError::Declined { .. })
    ));
    let empty = DilatedInputGeometry {
        channels: 0,
        dilation: [2, 2],
        ..g
    };
    assert!(matches!(
        PhaseConv::new(empty, layout, 1),
        Err(KernelError::Declined { .. })
    ));
}
