//! `convolution` against a direct formula written from HLO's definition, per output element.

use super::*;
use crate::ir::{ConvDimensionNumbers, Convolution, Window, WindowDim};

/// Parses dim_labels such as `b01f_01io->b01f`.
fn labels(s: &str) -> ConvDimensionNumbers {
    let (ins, out) = s.split_once("->").unwrap();
    let (lhs, rhs) = ins.split_once('_').unwrap();
    let pos = |t: &str, c: char| t.find(c).unwrap() as i64;
    let spatial = |t: &str| -> Vec<i64> {
        let n = t.chars().filter(|c| c.is_ascii_digit()).count();
        (0..n).map(|i| pos(t, char::from(b'0' + i as u8))).collect()
    };
    ConvDimensionNumbers {
        input_batch: pos(lhs, 'b'),
        input_feature: pos(lhs, 'f'),
        input_spatial: spatial(lhs),
        kernel_input_feature: pos(rhs, 'i'),
        kernel_output_feature: pos(rhs, 'o'),
        kernel_spatial: spatial(rhs),
        output_batch: pos(out, 'b'),
        output_feature: pos(out, 'f'),
        output_spatial: spatial(out),
    }
}

/// One spatial dimension: (kernel size, stride, pad low, pad high, lhs dilation, rhs dilation, reversed).
type Spatial = (i64, i64, i64, i64, i64, i64, bool);

fn unravel(mut flat: usize, dims: &[i64]) -> Vec<i64> {
    let mut idx = vec![0i64; dims.len()];
    for d in (0..dims.len()).rev() {
        idx[d] = (flat % dims[d] as usize) as i64;
        flat /= dims[d] as usize;
    }
    idx
}

fn flat(idx: &[i64], dims: &[i64]) -> usize {
    idx.iter()
        .zip(dims)
        .fold(0usize, |acc, (&i, &d)| acc * d as usize + i as usize)
}

/// The output value at every output index, summed in f64 straight from the definition.
fn direct(lhs: &Array, rhs: &Array, c: &Convolution, out_dims: &[i64]) -> Vec<f32> {
    let d = &c.dims;
    let (l, r) = (as_f32(lhs), as_f32(rhs));
    let (ld, rd) = (&lhs.shape.dims, &rhs.shape.dims);
    let n_batch = ld[d.input_batch as usize];
    let kernel_in = rd[d.kernel_input_feature as usize];
    let out_features = rd[d.kernel_output_feature as usize];
    let fg = c.feature_group_count;
    let bg = c.batch_group_count;
    let ksizes: Vec<i64> = d.kernel_spatial.iter().map(|&k| rd[k as usize]).collect();
    let taps: i64 = ksizes.iter().product();
    let total: i64 = out_dims.iter().product();
    (0..total as usize)
        .map(|o_flat| {
            let oi = unravel(o_flat, out_dims);
            let b = oi[d.output_batch as usize];
            let of = oi[d.output_feature as usize];
            let f_group = of / (out_features / fg);
            let b_group = of / (out_features / bg);
            let in_b = b_group * (n_batch / bg) + b;
            let mut sum = 0f64;
            for ci in 0..kernel_in {
                let in_f = f_group * kernel_in + ci;
                'taps: for t in 0..taps {
                    let k = unravel(t as usize, &ksizes);
                    let mut li = vec![0i64; ld.len()];
                    let mut ri = vec![0i64; rd.len()];
                    li[d.input_batch as usize] = in_b;
                    li[d.input_feature as usize] = in_f;
                    ri[d.kernel_input_feature as usize] = ci;
                    ri[d.kernel_output_feature as usize] = of;
                    for s in 0..ksizes.len() {
                        let w = &c.window.dims[s];
                        let o = oi[d.output_spatial[s] as usize];
                        let p = o * w.stride + k[s] * w.window_dilation - w.pad_low;
                        let n = ld[d.input_spatial[s] as usize];
                        if p < 0 || p % w.base_dilation != 0 || p / w.base_dilation >= n {
                            continue 'taps;
                        }
                        li[d.input_spatial[s] as usize] = p / w.base_dilation;
                        ri[d.kernel_spatial[s] as usize] = if w.reversal {
                            ksizes[s] - 1 - k[s]
                        } else {
                            k[s]
                        };
                    }
                    sum += l[flat(&li, ld)] as f64 * r[flat(&ri, rd)] as f64;
                }
            }
            sum as f32
        })
        .collect()
}

/// Builds the convolution, infers its output dims from the definition, and checks the
/// interpreter against [`direct`].
#[allow(clippy::too_many_arguments)]
fn check(
    dim_labels: &str,
    batch: i64,
    features: i64,
    in_spatial: &[i64],
    kernel_in: i64,
    out_features: i64,
    spatial: &[Spatial],
    fg: i64,
    bg: i64,
) {
    let d = labels(dim_labels);
    let ns = in_spatial.len();
    let mut ldims = vec![0i64; ns + 2];
    ldims[d.input_batch as usize] = batch;
    ldims[d.input_feature as usize] = features;
    let mut rdims = vec![0i64; ns + 2];
    rdims[d.kernel_input_feature as usize] = kernel_in;
    rdims[d.kernel_output_feature as usize] = out_features;
    let mut odims = vec![0i64; ns + 2];
    odims[d.output_batch as usize] = batch / bg;
    odims[d.output_feature as usize] = out_features;
    let mut window = Window::default();
    for (s, &(k, stride, lo, hi, lhs_dil, rhs_dil, rev)) in spatial.iter().enumerate() {
        ldims[d.input_spatial[s] as usize] = in_spatial[s];
        rdims[d.kernel_spatial[s] as usize] = k;
        let dilated = (in_spatial[s] - 1) * lhs_dil + 1 + lo + hi;
        let span = (k - 1) * rhs_dil + 1;
        odims[d.output_spatial[s] as usize] = (dilated - span) / stride + 1;
        window.dims.push(WindowDim {
            size: k,
            stride,
            pad_low: lo,
            pad_high: hi,
            window_dilation: rhs_dil,
            base_dilation: lhs_dil,
            reversal: rev,
        });
    }
    let conv = Convolution {
        window,
        dims: d,
        feature_group_count: fg,
        batch_group_count: bg,
    };
    let lhs = pseudo_random(&ldims, 11);
    let rhs = pseudo_random(&rdims, 12);
    let got = apply(
        Op::Convolution(conv.clone()),
        Shape::array(ElementType::F32, &odims),
        &[lhs.clone(), rhs.clone()],
    )
    .unwrap_or_else(|e| panic!("{dim_labels}: {e}"));
    assert_close(as_f32(&got), &direct(&lhs, &rhs, &conv, &odims));
}

const PLAIN: Spatial = (3, 1, 0, 0, 1, 1, false);

#[test]
fn nhwc_with_stride_padding_and_kernel_dilation() {
    check(
        "b01f_01io->b01f",
        2,
        3,
        &[7, 6],
        3,
        4,
        &[(3, 2, 1, 2, 1, 2, false), (2, 1, 0, 1, 1, 1, false)],
        1,
        1,
    );
}

#[test]
fn nchw_with_base_dilation_negative_padding_and_reversal() {
    check(
        "bf01_oi01->bf01",
        2,
        2,
        &[5, 4],
        2,
        3,
        &[(3, 1, -1, 2, 2, 1, true), (2, 2, 1, 1, 3, 1, false)],
        1,
        1,
    );
}

#[test]
fn weight_gradient_layout_as_jax_emits_it() {
    // The shape of the CNN's kernel gradient: f01b_i01o->01bf with a window as large as the image.
    check(
        "f01b_i01o->01bf",
        1,
        4,
        &[6, 6],
        4,
        3,
        &[(6, 1, 2, 2, 1, 1, false), (6, 1, 2, 2, 1, 1, false)],
        1,
        1,
    );
}

#[test]
fn feature_groups() {
    check(
        "b01f_01io->b01f",
        2,
        6,
        &[5, 5],
        2,
        6,
        &[PLAIN, PLAIN],
        3,
        1,
    );
    // Depthwise: one input feature per group, two outputs each.
    check(
        "b0f_0io->b0f",
        1,
        4,
        &[6],
        1,
        8,
        &[(2, 1, 1, 0, 1, 1, false)],
        4,
        1,
    );
}

#[test]
fn batch_groups() {
    check(
        "b01f_01io->b01f",
        4,
        3,
        &[5, 4],
        3,
        4,
        &[PLAIN, (2, 1, 0, 0, 1, 1, false)],
        1,
        2,
    );
    check(
        "fb0_i0o->b0f",
        6,
        2,
        &[7],
        2,
        6,
        &[(3, 2, 1, 1, 1, 2, false)],
        1,
        6,
    );
}

#[test]
fn one_and_three_spatial_dimensions() {
    check(
        "bf0_oi0->bf0",
        3,
        2,
        &[9],
        2,
        2,
        &[(4, 3, 2, 0, 2, 1, false)],
        1,
        1,
    );
    check(
        "b012f_012io->b012f",
        1,
        2,
        &[4, 3, 5],
        2,
        2,
        &[
            (2, 1, 0, 0, 1, 1, false),
            (2, 2, 1, 1, 1, 1, true),
            (3, 1, 1, 1, 1, 2, false),
        ],
        1,
        1,
    );
}

#[test]
fn mismatched_window_is_an_error() {
    let conv = Convolution {
        window: Window {
            dims: vec![WindowDim::new(2)],
        },
        dims: labels("b0f_0io->b0f"),
        feature_group_count: 1,
        batch_group_count: 1,
    };
    let e = apply(
        Op::Convolution(conv),
        Shape::array(ElementType::F32, &[1, 3, 1]),
        &[pseudo_random(&[1, 4, 1], 1), pseudo_random(&[3, 1, 1], 2)],
    )
    .unwrap_err();
    assert!(e.message.contains("convolution"), "{e}");
}
