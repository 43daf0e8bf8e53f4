//! Batch normalization in training, forward and backward, as the estimator traces it: the
//! fusion pass copies the small per-channel broadcasts (mean, `gamma * rsqrt(var + eps)`,
//! the variance gradient's factor) and the single ops reading them (`x - mean`,
//! `dy * scale`) into their readers, so neither the broadcast scale nor the centred input is
//! stored. Checked against the interpreter, and one thread against two (bitwise), on odd
//! shapes and on one large enough for the reduces to be split over two workers.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Literal, Module, Op};
use tessel_runtime::jit::{compile, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

/// The golden fusion case `batch_norm.hlo`, written for `[4, 6, 6, 8]`, at another shape.
fn module(n: i64, h: i64, c: i64) -> Module {
    let text = include_str!("../../golden/passes/fusion/batch_norm.hlo")
        .replace("f32[4,6,6,8]", &format!("f32[{n},{h},{h},{c}]"))
        .replace("f32[8]", &format!("f32[{c}]"))
        .replace("constant(144)", &format!("constant({})", n * h * h));
    parse_module(&text, None).unwrap()
}

fn args(n: i64, h: i64, c: i64) -> Vec<Literal> {
    vec![
        pseudo_random_f32(&[n, h, h, c], 1, 0),
        pseudo_random_f32(&[c], 2, 0),
        pseudo_random_f32(&[c], 3, 0),
        pseudo_random_f32(&[n, h, h, c], 4, 0),
    ]
}

/// Arrays of the input's shape that the optimized entry computes into memory (array leaves of
/// its instructions, not counting parameters and views of other values).
fn stored_full_size(m: &Module, dims: &[i64]) -> usize {
    let entry = m.entry();
    entry
        .ids()
        .iter()
        .filter(|&&id| {
            !matches!(
                entry.get(id).op,
                Op::Parameter(_) | Op::GetTupleElement { .. } | Op::Tuple
            )
        })
        .map(|&id| {
            let shape = &entry.get(id).shape;
            shape
                .leaves()
                .iter()
                .filter(|a| a.dims.as_slice() == dims)
                .count()
        })
        .sum()
}

fn check(n: i64, h: i64, c: i64) {
    let parsed = module(n, h, c);
    let args = args(n, h, c);
    let want = evaluate(&parsed, &args).unwrap();
    let mut m = parsed.clone();
    optimize(&mut m, &CompileOptions::default()).unwrap();
    // Stored at that shape: the outputs `y` and `dx`, and the gradient reaching `x - mean`
    // (read by the mean's gradient and by `dx`). The centred input and the broadcast scale
    // were stored too before they were copied into their readers (5 arrays).
    // (With one element per channel the simplifier turns the reduces into reshapes, and
    // every `[1, 1, 1, 1]` value counts: only the values are checked there.)
    if n * h * h > 1 {
        assert_eq!(stored_full_size(&m, &[n, h, h, c]), 3, "{n}x{h}x{h}x{c}");
    }
    let mut outputs = Vec::new();
    for threads in [1, 2] {
        let options = JitOptions {
            gemm_threads: threads,
            ..Default::default()
        };
        let got = compile(&parsed, &options).unwrap().run(&args).unwrap();
        for (g, w) in got.leaves().iter().zip(want.leaves()) {
            let scale = (0..w.len())
                .map(|i| w.data.get_f64(i).abs())
                .fold(1.0, f64::max);
            for i in 0..w.len() {
                let (a, b) = (g.data.get_f64(i), w.data.get_f64(i));
                assert!(
                    (a - b).abs() <= 1e-4 * scale,
                    "{n}x{h}x{h}x{c}, {threads} threads, element {i}: jit {a}, interpreter {b}"
                );
            }
        }
        let bits: Vec<Vec<u8>> = got.leaves().iter().map(|a| a.data.to_le_bytes()).collect();
        outputs.push(bits);
    }
    assert!(outputs[0] == outputs[1], "1 and 2 threads differ");
}

#[test]
fn batch_norm_forward_and_backward_store_no_broadcast_on_odd_shapes() {
    check(3, 7, 5);
    check(1, 1, 1);
    check(2, 5, 17);
}

#[test]
fn batch_norm_split_over_two_workers_matches_the_interpreter() {
    // 75,264 elements: the reduces are built in two parts.
    check(16, 14, 24);
}
