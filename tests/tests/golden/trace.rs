//! Traced models: they verify, have the expected signatures, and trace errors point at the
//! model's Rust lines.

use std::path::Path;
use tessel_compiler::hlo_text::{parse_module, print_module, PrintOptions};
use tessel_compiler::ir::ElementType::{F32, S32, S64};
use tessel_compiler::ir::Module;
use tessel_compiler::trace::{Dim, Tracer};
use tessel_compiler::verifier::verify;
use tessel_tests::golden::compare;
use tessel_tests::{golden_dir, models};

fn signature(m: &Module) -> String {
    let (params, result) = m.entry_signature();
    let params: Vec<String> = params.iter().map(|s| s.to_text(false)).collect();
    format!("({}) -> {}", params.join(", "), result.to_text(false))
}

fn verified(m: Module) -> Module {
    if let Err(errors) = verify(&m) {
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        panic!(
            "traced module `{}` does not verify:\n{}",
            m.name,
            text.join("\n")
        );
    }
    m
}

#[test]
fn static_mlp_verifies() {
    let m = verified(models::mlp(Dim::Fixed(32), S32).unwrap());
    assert_eq!(
        signature(&m),
        "(f32[128], f32[784,128], f32[10], f32[128,10], f32[32,784], s32[32]) -> (f32[], f32[32,10])"
    );
}

#[test]
fn static_cnn_verifies_with_the_corpus_signature() {
    let m = verified(models::mnist_cnn(Dim::Fixed(8), S32).unwrap());
    assert_eq!(
        signature(&m),
        "(f32[32], f32[5,5,1,32], f32[64], f32[5,5,32,64], f32[128], f32[3136,128], f32[10], \
         f32[128,10], f32[8,784], s32[8], f32[8,128]) -> (f32[], f32[8,10])"
    );
    let p = verified(models::mnist_cnn_predict(16).unwrap());
    assert_eq!(
        signature(&p),
        "(f32[32], f32[5,5,1,32], f32[64], f32[5,5,32,64], f32[128], f32[3136,128], f32[10], \
         f32[128,10], f32[16,784]) -> s32[16]"
    );
}

#[test]
fn dynamic_and_64_bit_traces_are_kept_for_the_legality_check() {
    verified(models::mnist_cnn(Dim::Unknown, S64).unwrap());
    let m = verified(models::mlp(Dim::Unknown, S64).unwrap());
    assert_eq!(
        signature(&m),
        "(f32[128], f32[784,128], f32[10], f32[128,10], f32[?,784], s64[?]) -> (f32[], f32[?,10])"
    );
}

#[test]
fn trace_errors_golden() {
    let err = tessel_tests::broken_model::broken_model().unwrap_err();
    let path = golden_dir().join("trace/broken_model.errors");
    compare(Path::new(&path), &err.to_string()).unwrap_or_else(|e| panic!("{e}"));
}

// ---- numbers: traced ops evaluated by the reference interpreter ----

use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, Literal};
use tessel_compiler::trace::Padding;

fn f32_arg(dims: &[i64], values: Vec<f32>) -> Literal {
    Literal::Array(Array::f32(dims, values))
}

fn s32_arg(dims: &[i64], values: Vec<i32>) -> Literal {
    Literal::Array(Array::new(
        ArrayShape::new(S32, dims),
        ArrayData::S32(values),
    ))
}

fn leaf_values(out: &Literal, i: usize) -> Vec<f64> {
    let a = out.leaves()[i];
    (0..a.len()).map(|k| a.data.get_f64(k)).collect()
}

fn close(actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len(), "{actual:?} vs {expected:?}");
    for (a, e) in actual.iter().zip(expected) {
        assert!(
            (a - e).abs() <= 1e-5 + 1e-4 * e.abs(),
            "{actual:?} vs {expected:?}"
        );
    }
}

#[test]
fn softmax_xent_argmax_and_broadcasting_compute_the_right_numbers() {
    let mut t = Tracer::new("numbers");
    let x = t.parameter("x", &[2, 3], F32);
    let labels = t.parameter("labels", &[2], S32);
    let col = t.parameter("col", &[2, 1], F32);
    let p = x.softmax(-1);
    let xent = x.softmax_cross_entropy_with_logits(&labels.one_hot(3, F32));
    let best = x.argmax(1);
    let outer = &col * &x.reduce_max(&[0], false);
    let mean = x.reduce_mean(&[], false);
    let m = verified(t.finish(&[&p, &xent, &best, &outer, &mean]).unwrap());
    let xs = vec![1.0f32, 2.0, 3.0, 5.0, 5.0, -1.0];
    let out = evaluate(
        &m,
        &[
            f32_arg(&[2, 3], xs.clone()),
            s32_arg(&[2], vec![2, 0]),
            f32_arg(&[2, 1], vec![1.0, -2.0]),
        ],
    )
    .unwrap();
    let softmax = |row: &[f32]| {
        let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect::<Vec<f64>>()
    };
    let (r0, r1) = (softmax(&xs[..3]), softmax(&xs[3..]));
    close(&leaf_values(&out, 0), &[r0.clone(), r1.clone()].concat());
    close(&leaf_values(&out, 1), &[-r0[2].ln(), -r1[0].ln()]);
    // Ties go to the first maximum.
    assert_eq!(leaf_values(&out, 2), vec![2.0, 0.0]);
    close(&leaf_values(&out, 3), &[5.0, 5.0, 3.0, -10.0, -10.0, -6.0]);
    close(&leaf_values(&out, 4), &[15.0 / 6.0]);
}

/// Naive NHWC/HWIO convolution with TF SAME padding, stride 1.
fn conv_same(
    x: &[f32],
    (n, h, w, c): (usize, usize, usize, usize),
    k: &[f32],
    (kh, kw, o): (usize, usize, usize),
) -> Vec<f64> {
    let mut out = vec![0.0; n * h * w * o];
    let (ph, pw) = ((kh - 1) / 2, (kw - 1) / 2);
    for b in 0..n {
        for i in 0..h {
            for j in 0..w {
                for f in 0..o {
                    let mut acc = 0.0f64;
                    for di in 0..kh {
                        for dj in 0..kw {
                            let (y, z) = (
                                i as i64 + di as i64 - ph as i64,
                                j as i64 + dj as i64 - pw as i64,
                            );
                            if y < 0 || z < 0 || y >= h as i64 || z >= w as i64 {
                                continue;
                            }
                            for ci in 0..c {
                                let xv = x[((b * h + y as usize) * w + z as usize) * c + ci] as f64;
                                let kv = k[((di * kw + dj) * c + ci) * o + f] as f64;
                                acc += xv * kv;
                            }
                        }
                    }
                    out[((b * h + i) * w + j) * o + f] = acc;
                }
            }
        }
    }
    out
}

#[test]
fn conv2d_and_max_pool_match_a_naive_reference() {
    let mut t = Tracer::new("conv");
    let x = t.parameter("x", &[1, 4, 4, 2], F32);
    let k = t.parameter("k", &[3, 3, 2, 3], F32);
    let y = x.conv2d(&k, [1, 1], Padding::Same);
    let p = y.max_pool([2, 2], [2, 2], Padding::Same);
    let m = verified(t.finish(&[&y, &p]).unwrap());
    let xs: Vec<f32> = (0..32).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let ks: Vec<f32> = (0..54)
        .map(|i| ((i * 5) % 7) as f32 * 0.25 - 0.75)
        .collect();
    let out = evaluate(
        &m,
        &[
            f32_arg(&[1, 4, 4, 2], xs.clone()),
            f32_arg(&[3, 3, 2, 3], ks.clone()),
        ],
    )
    .unwrap();
    let conv = conv_same(&xs, (1, 4, 4, 2), &ks, (3, 3, 3));
    close(&leaf_values(&out, 0), &conv);
    let mut pooled = Vec::new();
    for i in 0..2 {
        for j in 0..2 {
            for f in 0..3 {
                let at = |y: usize, z: usize| conv[(y * 4 + z) * 3 + f];
                let v = [
                    at(2 * i, 2 * j),
                    at(2 * i, 2 * j + 1),
                    at(2 * i + 1, 2 * j),
                    at(2 * i + 1, 2 * j + 1),
                ];
                pooled.push(v.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
            }
        }
    }
    close(&leaf_values(&out, 1), &pooled);
}

// ---- canonical text of traced models ----

/// The canonical text of a traced module; it must parse back to the same text.
fn canonical(m: &Module) -> String {
    let text = print_module(m, &PrintOptions { canonical: true });
    let again = parse_module(&text, Some("canonical"))
        .unwrap_or_else(|e| panic!("canonical text of `{}` does not parse: {e}\n{text}", m.name));
    assert_eq!(
        print_module(&again, &PrintOptions { canonical: true }),
        text
    );
    text
}

#[test]
fn traced_models_in_canonical_text() {
    let cases = [
        (
            "mlp_b32",
            verified(models::mlp(Dim::Fixed(32), S32).unwrap()),
        ),
        (
            "mnist_cnn_b8",
            verified(models::mnist_cnn(Dim::Fixed(8), S32).unwrap()),
        ),
        (
            "mnist_cnn_predict_b16",
            verified(models::mnist_cnn_predict(16).unwrap()),
        ),
    ];
    let mut failures = Vec::new();
    for (name, m) in &cases {
        let path = golden_dir().join(format!("trace/{name}.canonical"));
        if let Err(e) = compare(&path, &canonical(m)) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The inputs of a corpus file in parameter order, and its flattened outputs.
fn corpus_case(name: &str) -> (Vec<Literal>, Vec<Array>) {
    (
        tessel_tests::corpus_args(&format!("{name}.inputs.safetensors")),
        tessel_tests::corpus_arrays(&format!("{name}.outputs.safetensors")),
    )
}

#[test]
fn traced_cnn_predicts_what_jax_predicts() {
    // The traced CNN on the corpus's inputs gives JAX's classes for the same weights.
    let m = models::mnist_cnn_predict(16).unwrap();
    let (inputs, outputs) = corpus_case("mnist_cnn_predict_b16");
    let out = evaluate(&m, &inputs).unwrap();
    let ours = out.leaves()[0];
    assert_eq!(ours.shape, outputs[0].shape);
    assert_eq!(ours.data, outputs[0].data);
}
