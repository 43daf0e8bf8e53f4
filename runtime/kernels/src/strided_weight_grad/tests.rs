//! [`StridedWeightGradient`] against the definition of a strided convolution's weight gradient.

use super::*;
use crate::test_support::{scratch_block, values_within};

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u32) -> Vec<f32> {
    values_within(n, seed, 1.0)
}

/// The geometry of a forward convolution of `[n, h, w, c]` by a `k` window at `stride` with
/// `padding`, `o` output channels; the high padding cropped by the rows the last window
/// position does not reach, as XLA writes the gradient.
fn geometry(
    [n, h, w, c]: [usize; 4],
    k: [usize; 2],
    stride: [usize; 2],
    mut padding: [(isize, isize); 2],
    o: usize,
) -> StridedWeightGradGeometry {
    let grad: [usize; 2] = std::array::from_fn(|i| {
        let padded = [h, w][i] as isize + padding[i].0 + padding[i].1;
        let s = stride[i] as isize;
        padding[i].1 -= (padded - k[i] as isize) % s;
        ((padded - k[i] as isize) / s + 1) as usize
    });
    StridedWeightGradGeometry {
        images: n,
        height: h,
        width: w,
        channels: c,
        out_channels: o,
        window: k,
        stride,
        padding,
        grad,
    }
}

/// The weight gradient by its definition, in f64, `[ky, kx, b, o]`: per element the sum and
/// the sum of the products' magnitudes.
fn reference(g: &StridedWeightGradGeometry, x: &[f32], dy: &[f32]) -> Vec<(f64, f64)> {
    let [kh, kw] = g.window;
    let [gh, gw] = g.grad;
    let (b, o) = (g.channels, g.out_channels);
    let mut out = vec![(0f64, 0f64); kh * kw * b * o];
    for (i, (v, m)) in out.iter_mut().enumerate() {
        let (oc, ch, kx, ky) = (i % o, i / o % b, i / o / b % kw, i / o / b / kw);
        for f in 0..g.images {
            for y in 0..gh {
                for xx in 0..gw {
                    let iy = (g.stride[0] * y + ky) as isize - g.padding[0].0;
                    let ix = (g.stride[1] * xx + kx) as isize - g.padding[1].0;
                    if iy < 0 || ix < 0 || iy >= g.height as isize || ix >= g.width as isize {
                        continue;
                    }
                    let a = x[((f * g.height + iy as usize) * g.width + ix as usize) * b + ch];
                    let d = dy[((f * gh + y) * gw + xx) * o + oc];
                    let t = a as f64 * d as f64;
                    *v += t;
                    *m += t.abs();
                }
            }
        }
    }
    out
}

/// Runs `plan` with the weight gradient stored `[ky, kx, b, o]` row-major.
fn run(plan: &StridedWeightGradient, x: &[f32], dy: &[f32], len: usize) -> Vec<f32> {
    let mut dw = vec![f32::NAN; len];
    let mut scratch = scratch_block(plan.scratch_bytes());
    unsafe {
        plan.run(
            x.as_ptr(),
            dy.as_ptr(),
            dw.as_mut_ptr(),
            scratch.as_mut_ptr() as *mut u8,
        )
    };
    dw
}

/// Shapes with odd sizes, strides 2 and 3, 1 channel and many, channel tails, padding on
/// either side or cropping, and ResNet-20's 1x1 shortcut (whose weight gradient JAX writes
/// as a 2x2 window).
fn cases() -> Vec<StridedWeightGradGeometry> {
    vec![
        geometry([2, 9, 11, 3], [3, 3], [2, 2], [(0, 1), (0, 1)], 13),
        geometry([3, 8, 8, 16], [3, 3], [2, 2], [(1, 1), (1, 1)], 32),
        geometry([1, 7, 10, 1], [3, 2], [2, 3], [(1, 0), (0, 2)], 1),
        geometry([2, 6, 6, 40], [2, 2], [2, 2], [(0, 0), (0, 0)], 72),
        geometry([2, 13, 5, 5], [5, 3], [3, 2], [(2, 2), (1, -1)], 8),
        geometry([3, 16, 16, 16], [1, 1], [2, 2], [(0, 0), (0, 0)], 32),
        geometry([5, 4, 4, 64], [3, 3], [1, 1], [(1, 1), (1, 1)], 64),
    ]
}

/// Every instruction set, 1 and 3 workers: within 1e-5 of the sum of |terms| of the f64
/// definition, and the same bits on any number of workers.
#[test]
fn matches_the_definition_on_any_thread_count() {
    for g in cases() {
        let (b, o) = (g.channels, g.out_channels);
        let x = values(g.images * g.height * g.width * b, 1);
        let dy = values(g.images * g.grad[0] * g.grad[1] * o, 2);
        let want = reference(&g, &x, &dy);
        let strides = [g.window[1] * b * o, b * o, o, 1];
        for isa in Isa::available() {
            let one = StridedWeightGradient::new(&g, strides, 1)
                .expect("planned")
                .with_isa(isa);
            let got = run(&one, &x, &dy, want.len());
            for (i, (&v, &(w, m))) in got.iter().zip(&want).enumerate() {
                let err = (v as f64 - w).abs();
                assert!(
                    err <= 1e-5 * m.max(1e-30),
                    "{g:?} {isa:?} [{i}]: {v} vs {w}"
                );
            }
            let three = StridedWeightGradient::new(&g, strides, 3)
                .expect("planned")
                .with_isa(isa);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&run(&three, &x, &dy, want.len())),
                "{g:?} {isa:?}"
            );
        }
    }
}

/// The output strides place each element: `[o, b, ky, kx]` (JAX's `fb01`) holds the same
/// values as `[ky, kx, b, o]`.
#[test]
fn writes_through_the_output_strides() {
    let g = geometry([2, 9, 9, 3], [3, 3], [2, 2], [(0, 1), (0, 1)], 10);
    let (b, o) = (g.channels, g.out_channels);
    let x = values(g.images * g.height * g.width * b, 3);
    let dy = values(g.images * g.grad[0] * g.grad[1] * o, 4);
    let len = 9 * b * o;
    let hwio = StridedWeightGradient::new(&g, [3 * b * o, b * o, o, 1], 2).expect("planned");
    let oihw = StridedWeightGradient::new(&g, [3, 1, 9, 9 * b], 2).expect("planned");
    let a = run(&hwio, &x, &dy, len);
    let t = run(&oihw, &x, &dy, len);
    for ky in 0..3 {
        for kx in 0..3 {
            for ch in 0..b {
                for oc in 0..o {
                    let v = a[((ky * 3 + kx) * b + ch) * o + oc];
                    let w = t[((oc * b + ch) * 3 + ky) * 3 + kx];
                    assert_eq!(v.to_bits(), w.to_bits(), "[{ky}, {kx}, {ch}, {oc}]");
                }
            }
        }
    }
}

/// A window that does not fit the gradient's size, or a zero size, is an error, not a panic.
#[test]
fn refuses_inconsistent_geometry() {
    let mut g = geometry([2, 9, 9, 3], [3, 3], [2, 2], [(0, 1), (0, 1)], 10);
    g.window = [2, 3];
    let strides = [1, 1, 1, 1];
    assert!(matches!(
        StridedWeightGradient::new(&g, strides, 1),
        Err(KernelError::Invalid(_))
    ));
    let mut g = geometry([2, 9, 9, 3], [3, 3], [2, 2], [(0, 1), (0, 1)], 10);
    g.channels = 0;
    assert!(matches!(
        StridedWeightGradient::new(&g, strides, 1),
        Err(KernelError::Declined { .. })
    ));
}
