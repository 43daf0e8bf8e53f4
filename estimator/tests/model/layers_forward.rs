//! Every layer's forward pass against a reference computed here in Rust, on the interpreter
//! and on the JIT (f32), for small inputs with border windows and both paddings.

use crate::support::{assert_close, random_array, run, scalar_step, values};
use tessel_compiler::ir::{Array, ElementType::F32, Module};
use tessel_compiler::trace::Tensor;
use tessel_estimator::model::layers::{
    average_pooling2d, batch_normalization, conv2d, dense, dropout, flatten, max_pooling2d,
    Activation, BatchNorm, Conv2d, Dense, Padding,
};
use tessel_estimator::model::{Graph, Initializer, Mode};
use tessel_runtime::session::Device;

/// Traces `build` on an input of `x`'s shape; returns the module (outputs: what `build`
/// returns) and its arguments (step 3, x, the variables' initial values).
fn trace(
    x: &Array,
    mode: Mode,
    build: impl FnOnce(&mut Graph, &Tensor) -> Vec<Tensor>,
) -> (Module, Vec<Array>, Vec<(String, Array)>) {
    let mut g = Graph::new("layer", mode, Some(42));
    let input = g.tracer.parameter("x", x.shape.dims.as_slice(), F32);
    let outs = build(&mut g, &input);
    let init = g.variables.initial_values().expect("initial values");
    let named: Vec<(String, Array)> = g
        .variables
        .all()
        .map(|(_, v)| v.name.clone())
        .zip(init.iter().cloned())
        .collect();
    let refs: Vec<&Tensor> = outs.iter().collect();
    let module = g.tracer.finish(&refs).expect("traces");
    let mut args = vec![scalar_step(3), x.clone()];
    args.extend(init);
    (module, args, named)
}

/// Runs on the interpreter and the JIT, checks both against `reference`.
fn check_both(module: &Module, args: &[Array], reference: &[Vec<f64>], tol: f64) {
    for (name, device) in [
        ("interpreter", Device::interpreter()),
        ("jit", Device::jit()),
    ] {
        let out = run(module, &device, args.to_vec());
        assert_eq!(out.len(), reference.len());
        for (i, (o, r)) in out.iter().zip(reference).enumerate() {
            assert_close(&format!("{name} output {i}"), &values(o), r, tol);
        }
    }
}

fn var(named: &[(String, Array)], name: &str) -> Vec<f64> {
    let a = &named.iter().find(|(n, _)| n == name).expect(name).1;
    values(a)
}

/// (out, pad_low) of one dimension, as TF pads.
fn geometry(input: usize, size: usize, stride: usize, padding: Padding) -> (usize, usize) {
    match padding {
        Padding::Valid => ((input - size) / stride + 1, 0),
        Padding::Same => {
            let out = input.div_ceil(stride);
            let total = ((out - 1) * stride + size).saturating_sub(input);
            (out, total / 2)
        }
    }
}

/// NHWC x HWIO convolution plus bias.
fn conv_reference(
    x: &[f64],
    xd: [usize; 4],
    k: &[f64],
    kd: [usize; 4],
    bias: &[f64],
    stride: usize,
    padding: Padding,
) -> Vec<f64> {
    let [n, h, w, c] = xd;
    let [kh, kw, _, f] = kd;
    let (oh, ph) = geometry(h, kh, stride, padding);
    let (ow, pw) = geometry(w, kw, stride, padding);
    let mut out = vec![0.0; n * oh * ow * f];
    for b in 0..n {
        for i in 0..oh {
            for j in 0..ow {
                for o in 0..f {
                    let mut s = bias[o];
                    for di in 0..kh {
                        for dj in 0..kw {
                            let (y, xx) = (
                                (i * stride + di) as i64 - ph as i64,
                                (j * stride + dj) as i64 - pw as i64,
                            );
                            if y < 0 || xx < 0 || y >= h as i64 || xx >= w as i64 {
                                continue;
                            }
                            for ci in 0..c {
                                let xv = x[((b * h + y as usize) * w + xx as usize) * c + ci];
                                s += xv * k[((di * kw + dj) * c + ci) * f + o];
                            }
                        }
                    }
                    out[((b * oh + i) * ow + j) * f + o] = s;
                }
            }
        }
    }
    out
}

/// Max or average pooling (average over the input elements each window covers).
fn pool_reference(
    x: &[f64],
    xd: [usize; 4],
    size: usize,
    stride: usize,
    padding: Padding,
    max: bool,
) -> Vec<f64> {
    let [n, h, w, c] = xd;
    let (oh, ph) = geometry(h, size, stride, padding);
    let (ow, pw) = geometry(w, size, stride, padding);
    let mut out = Vec::new();
    for b in 0..n {
        for i in 0..oh {
            for j in 0..ow {
                for ch in 0..c {
                    let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
                    let mut count = 0.0;
                    for di in 0..size {
                        for dj in 0..size {
                            let (y, xx) = (
                                (i * stride + di) as i64 - ph as i64,
                                (j * stride + dj) as i64 - pw as i64,
                            );
                            if y < 0 || xx < 0 || y >= h as i64 || xx >= w as i64 {
                                continue;
                            }
                            let v = x[((b * h + y as usize) * w + xx as usize) * c + ch];
                            acc = if max { acc.max(v) } else { acc + v };
                            count += 1.0;
                        }
                    }
                    out.push(if max { acc } else { acc / count });
                }
            }
        }
    }
    out
}

fn nonzero_bias() -> Initializer {
    Initializer::RandomUniform {
        min: -0.5,
        max: 0.5,
    }
}

#[test]
fn conv2d_same_and_valid_strided_match_the_reference() {
    let x = random_array(&[2, 6, 5, 3], F32, 1);
    let (module, args, named) = trace(&x, Mode::Eval, |g, x| {
        let a = conv2d(
            g,
            x,
            4,
            [3, 3],
            Conv2d {
                padding: Padding::Same,
                bias_initializer: nonzero_bias(),
                ..Conv2d::default()
            },
        )
        .unwrap();
        let b = conv2d(
            g,
            x,
            2,
            [2, 3],
            Conv2d {
                strides: [2, 2],
                activation: Activation::Relu,
                bias_initializer: nonzero_bias(),
                ..Conv2d::default()
            },
        )
        .unwrap();
        vec![a, b]
    });
    let xv = values(&x);
    let a = conv_reference(
        &xv,
        [2, 6, 5, 3],
        &var(&named, "conv2d/kernel"),
        [3, 3, 3, 4],
        &var(&named, "conv2d/bias"),
        1,
        Padding::Same,
    );
    let b: Vec<f64> = conv_reference(
        &xv,
        [2, 6, 5, 3],
        &var(&named, "conv2d_1/kernel"),
        [2, 3, 3, 2],
        &var(&named, "conv2d_1/bias"),
        2,
        Padding::Valid,
    )
    .into_iter()
    .map(|v| v.max(0.0))
    .collect();
    check_both(&module, &args, &[a, b], 1e-5);
}

#[test]
fn dense_matches_the_reference_for_rank_2_and_3() {
    let x = random_array(&[3, 2, 7], F32, 2);
    let (module, args, named) = trace(&x, Mode::Eval, |g, x| {
        let opts = || Dense {
            bias_initializer: nonzero_bias(),
            activation: Activation::Tanh,
            ..Dense::default()
        };
        let a = dense(g, &x.reshape(&[6, 7]), 5, opts()).unwrap();
        let b = dense(
            g,
            x,
            4,
            Dense {
                use_bias: false,
                ..Dense::default()
            },
        )
        .unwrap();
        vec![a, b]
    });
    let xv = values(&x);
    let (k0, b0, k1) = (
        var(&named, "dense/kernel"),
        var(&named, "dense/bias"),
        var(&named, "dense_1/kernel"),
    );
    assert!(named.iter().all(|(n, _)| n != "dense_1/bias"));
    let mut a = Vec::new();
    let mut b = Vec::new();
    for r in 0..6 {
        for o in 0..5 {
            a.push((b0[o] + (0..7).map(|i| xv[r * 7 + i] * k0[i * 5 + o]).sum::<f64>()).tanh());
        }
        for o in 0..4 {
            b.push((0..7).map(|i| xv[r * 7 + i] * k1[i * 4 + o]).sum::<f64>());
        }
    }
    check_both(&module, &args, &[a, b], 1e-5);
}

#[test]
fn pooling_matches_the_reference_with_same_border_windows() {
    let x = random_array(&[2, 5, 7, 3], F32, 3);
    let (module, args, _) = trace(&x, Mode::Eval, |g, x| {
        vec![
            max_pooling2d(g, x, [3, 3], [2, 2], Padding::Same).unwrap(),
            average_pooling2d(g, x, [3, 3], [2, 2], Padding::Same).unwrap(),
            average_pooling2d(g, x, [2, 2], [2, 2], Padding::Valid).unwrap(),
            max_pooling2d(g, x, [2, 2], [1, 1], Padding::Valid).unwrap(),
        ]
    });
    let xv = values(&x);
    let d = [2, 5, 7, 3];
    let refs = [
        pool_reference(&xv, d, 3, 2, Padding::Same, true),
        pool_reference(&xv, d, 3, 2, Padding::Same, false),
        pool_reference(&xv, d, 2, 2, Padding::Valid, false),
        pool_reference(&xv, d, 2, 1, Padding::Valid, true),
    ];
    check_both(&module, &args, &refs, 1e-6);
}

#[test]
fn flatten_keeps_the_batch() {
    let x = random_array(&[2, 3, 4, 5], F32, 4);
    let (module, args, _) = trace(&x, Mode::Eval, |g, x| {
        let y = flatten(g, x).unwrap();
        assert_eq!(y.shape().unwrap().dims.as_slice(), &[2, 60]);
        vec![y]
    });
    check_both(&module, &args, &[values(&x)], 0.0);
}

/// (y, new moving mean, new moving variance) of batch norm over all axes but the last,
/// with gamma 1, beta 0, moving statistics 0 and 1, momentum 0.99, epsilon 1e-3.
fn batch_norm_reference(x: &[f64], channels: usize, unbiased: bool) -> [Vec<f64>; 3] {
    let n = x.len() / channels;
    let mut mean = vec![0.0; channels];
    let mut var = vec![0.0; channels];
    for (i, v) in x.iter().enumerate() {
        mean[i % channels] += v / n as f64;
    }
    for (i, v) in x.iter().enumerate() {
        var[i % channels] += (v - mean[i % channels]).powi(2) / n as f64;
    }
    let y = x
        .iter()
        .enumerate()
        .map(|(i, v)| (v - mean[i % channels]) / (var[i % channels] + 1e-3).sqrt())
        .collect();
    let correction = if unbiased {
        n as f64 / (n as f64 - 1.0)
    } else {
        1.0
    };
    let mm = mean.iter().map(|m| 0.0 - (0.0 - m) * 0.01).collect();
    let mv = var
        .iter()
        .map(|v| 1.0 - (1.0 - v * correction) * 0.01)
        .collect();
    [y, mm, mv]
}

#[test]
fn batch_normalization_training_uses_batch_statistics_and_updates_the_moving_ones() {
    for dims in [vec![4i64, 3, 3, 2], vec![6, 3]] {
        let x = random_array(&dims, F32, 5);
        let mut ids = Vec::new();
        let (module, args, named) = trace(&x, Mode::Train, |g, x| {
            let y = batch_normalization(g, x, BatchNorm::default(), true).unwrap();
            for n in [
                "batch_normalization/moving_mean",
                "batch_normalization/moving_variance",
            ] {
                ids.push(g.variables.find(n).unwrap());
            }
            let after: Vec<Tensor> = ids.iter().map(|&id| g.value_after_step(id)).collect();
            vec![y, after[0].clone(), after[1].clone()]
        });
        let names: Vec<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "batch_normalization/gamma",
                "batch_normalization/beta",
                "batch_normalization/moving_mean",
                "batch_normalization/moving_variance"
            ]
        );
        let channels = *dims.last().unwrap() as usize;
        let reference = batch_norm_reference(&values(&x), channels, dims.len() == 4);
        check_both(&module, &args, &reference, 2e-5);
    }
}

#[test]
fn batch_normalization_in_evaluation_uses_the_moving_statistics() {
    let x = random_array(&[2, 3, 3, 4], F32, 6);
    let (module, mut args, _) = trace(&x, Mode::Eval, |g, x| {
        vec![batch_normalization(
            g,
            x,
            BatchNorm {
                axis: 3,
                ..BatchNorm::default()
            },
            false,
        )
        .unwrap()]
    });
    // gamma, beta, moving mean, moving variance: set them to non-trivial values.
    let params = [
        [2.0f32, 1.0, 0.5, 3.0],
        [0.1, -0.2, 0.3, 0.0],
        [0.5, -0.5, 0.0, 1.0],
        [4.0, 1.0, 0.25, 2.0],
    ];
    for (i, p) in params.iter().enumerate() {
        args[2 + i] = Array::f32(&[4], p.to_vec());
    }
    let y: Vec<f64> = values(&x)
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let c = i % 4;
            let p = |k: usize| params[k][c] as f64;
            (v - p(2)) / (p(3) + 1e-3).sqrt() * p(0) + p(1)
        })
        .collect();
    check_both(&module, &args, &[y], 1e-5);
}

#[test]
fn dropout_is_the_identity_unless_training_and_scales_kept_elements() {
    let x = random_array(&[64, 32], F32, 7);
    let (module, args, _) = trace(&x, Mode::Train, |g, x| {
        vec![
            dropout(g, x, 0.4, false).unwrap(),
            dropout(g, x, 0.4, true).unwrap(),
        ]
    });
    let interp = run(&module, &Device::interpreter(), args.clone());
    let jit = run(&module, &Device::jit(), args);
    assert_eq!(values(&interp[0]), values(&x));
    // The mask is bitwise the same on both backends.
    assert_eq!(interp[1], jit[1]);
    let xv = values(&x);
    let y = values(&interp[1]);
    let mut kept = 0;
    for (a, b) in xv.iter().zip(&y) {
        if *b != 0.0 {
            kept += 1;
            assert!((b - a / 0.6).abs() < 1e-6 * a.abs().max(1.0), "{a} {b}");
        }
    }
    // 2048 elements kept with p = 0.6: sd ~ 22.
    assert!((kept as f64 - 0.6 * 2048.0).abs() < 110.0, "{kept}");
}
