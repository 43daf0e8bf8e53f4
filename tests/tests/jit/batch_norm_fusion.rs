//! Batch normalization in training, forward and backward, as the estimator traces it: the
//! fusion pass copies the small per-channel broadcasts (mean, `gamma * rsqrt(var + eps)`,
//! the variance gradient's factor) and the single ops reading them (`x - mean`,
//! `dy * scale`) into their readers, so neither the broadcast scale nor the centred input is
//! stored. Checked against the interpreter, and one thread against two (bitwise), on odd
//! shapes and on one large enough for the reduces to be split over two workers.
//!
//! When `dy` is computed (a ReLU gradient), the loop computing it also folds both gradient
//! sums, of `dy` and of `dy * (x - mean)`: one pass instead of a second one reading `dy` back.
//! With the mean's gradient split in two sums, as the estimator traces it, that loop folds
//! `-(dy * scale)` too, and the variance term `2 * c * (x - mean)` (a chain of three cheap
//! ops over `x`) is computed by its two readers instead of stored. The mean's gradient sums
//! `-(dy * scale)` and `-(t + t)`, `t = broadcast(c) * (x - mean)`, are per-channel multiples
//! of `sum(dy)` and `sum(x - mean)`: the first is taken from `sum(dy)`, the second joins the
//! variance's pass, and no pass reads `x` for it after the one computing `dy`.
//!
//! When a convolution reads the ReLU after a normalization and a residual add, the ReLU's
//! gradient mask reads the stored ReLU, so normalization, residual add and ReLU are one pass
//! writing `relu(z)` alone (`z` was stored too, and read back).

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

/// The golden case `batch_norm_relu_grad.hlo`: `dy` is a ReLU gradient, at another shape.
fn relu_grad_module(n: i64, h: i64, c: i64) -> Module {
    let text = include_str!("../../golden/passes/fusion/batch_norm_relu_grad.hlo")
        .replace("[4,6,6,8]", &format!("[{n},{h},{h},{c}]"))
        .replace("f32[8]", &format!("f32[{c}]"))
        .replace("constant(144)", &format!("constant({})", n * h * h));
    parse_module(&text, None).unwrap()
}

/// The golden case `batch_norm_split_mean_grad.hlo`: the mean's gradient as the estimator's
/// trace has it, two sums (of `-(dy * scale)` and of the variance term's negation), at
/// another shape.
fn split_mean_grad_module(n: i64, h: i64, c: i64) -> Module {
    let text = include_str!("../../golden/passes/fusion/batch_norm_split_mean_grad.hlo")
        .replace("[4,6,6,8]", &format!("[{n},{h},{h},{c}]"))
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
    let mut m = parsed.clone();
    optimize(&mut m, &CompileOptions::default()).unwrap();
    // Stored at that shape: the outputs `y` and `dx`, and the gradient reaching `x - mean`
    // (read by the mean's gradient and by `dx`). The centred input and the broadcast scale
    // were stored too before they were copied into their readers (5 arrays).
    // (With one element per channel the simplifier turns the reduces into reshapes, and
    // every `[1, 1, 1, 1]` value counts: only the values are checked there.)
    if n * h * h > 1 {
        assert_eq!(stored_full_size(&m, &[n, h, h, c]), 3, "{n}x{h}x{h}x{c}");
        // `dy` is an input here: the variance's sum and `sum(dy * (x - mean))` read `x` in
        // one pass (sibling reduce fusions), not two.
        assert_eq!(most_reduces_in_one_fusion(&m), 2, "{n}x{h}x{h}x{c}");
    }
    check_values(&parsed, &args, &format!("{n}x{h}x{h}x{c}"));
}

/// The JIT's outputs against the interpreter's, on 1 and 2 threads, and bitwise equal on both.
fn check_values(parsed: &Module, args: &[Literal], case: &str) {
    let want = evaluate(parsed, args).unwrap();
    let mut outputs = Vec::new();
    for threads in [1, 2] {
        let options = JitOptions {
            gemm_threads: threads,
            ..Default::default()
        };
        let got = compile(parsed, &options).unwrap().run(args).unwrap();
        for (g, w) in got.leaves().iter().zip(want.leaves()) {
            let scale = (0..w.len())
                .map(|i| w.data.get_f64(i).abs())
                .fold(1.0, f64::max);
            for i in 0..w.len() {
                let (a, b) = (g.data.get_f64(i), w.data.get_f64(i));
                assert!(
                    (a - b).abs() <= 1e-4 * scale,
                    "{case}, {threads} threads, element {i}: jit {a}, interpreter {b}"
                );
            }
        }
        let bits: Vec<Vec<u8>> = got.leaves().iter().map(|a| a.data.to_le_bytes()).collect();
        outputs.push(bits);
    }
    assert!(outputs[0] == outputs[1], "{case}: 1 and 2 threads differ");
}

/// Kernels of the optimized entry (not tuples or their elements) that read entry parameter
/// `number`.
fn kernels_reading_parameter(m: &Module, number: u32) -> usize {
    let entry = m.entry();
    let Some(p) = entry.parameter(number) else {
        return 0;
    };
    entry
        .ids()
        .iter()
        .filter(|&&id| {
            !matches!(entry.get(id).op, Op::Tuple | Op::GetTupleElement { .. })
                && entry.get(id).operands().contains(&p)
        })
        .count()
}

/// The most reduces among the outputs of one fusion of the optimized entry.
fn most_reduces_in_one_fusion(m: &Module) -> usize {
    let entry = m.entry();
    entry
        .ids()
        .iter()
        .filter_map(|&id| match entry.get(id).op {
            Op::Fusion { calls, .. } => Some(m.computation(calls)),
            _ => None,
        })
        .map(|f| {
            let root = f.get(f.root());
            let outs = match root.op {
                Op::Tuple => root.operands().to_vec(),
                _ => vec![f.root()],
            };
            outs.iter()
                .filter(|&&o| matches!(f.get(o).op, Op::Reduce { .. }))
                .count()
        })
        .max()
        .unwrap_or(0)
}

fn check_relu_grad(n: i64, h: i64, c: i64) {
    let parsed = relu_grad_module(n, h, c);
    let mut args = args(n, h, c);
    args.push(pseudo_random_f32(&[n, h, h, c], 5, 0));
    let mut m = parsed.clone();
    optimize(&mut m, &CompileOptions::default()).unwrap();
    if n * h * h > 1 {
        // `dy` stored with both of its sums: `sum(dy)` and `sum(dy * (x - mean))`.
        assert_eq!(most_reduces_in_one_fusion(&m), 2, "{n}x{h}x{h}x{c}");
    }
    check_values(&parsed, &args, &format!("relu gradient {n}x{h}x{h}x{c}"));
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

#[test]
fn batch_norm_gradient_sums_share_the_pass_computing_dy() {
    check_relu_grad(3, 7, 5);
    check_relu_grad(2, 5, 17);
    check_relu_grad(1, 1, 1);
}

#[test]
fn batch_norm_gradient_sums_split_over_two_workers_match_the_interpreter() {
    // 75,264 elements: both reduces are built in two parts and combined.
    check_relu_grad(16, 14, 24);
}

fn check_split_mean_grad(n: i64, h: i64, c: i64) {
    let parsed = split_mean_grad_module(n, h, c);
    let mut args = args(n, h, c);
    args.push(pseudo_random_f32(&[n, h, h, c], 5, 0));
    let mut m = parsed.clone();
    optimize(&mut m, &CompileOptions::default()).unwrap();
    if n * h * h > 1 {
        let case = format!("{n}x{h}x{h}x{c}");
        // The pass computing `dy` folds its sums `dy` and `dy * (x - mean)`; `-(dy * scale)`
        // is `-(scale * sum(dy))` (it was a third sum there, and before that a pass reading
        // `dy` back). The variance's pass folds `sum(x - mean)` too.
        assert_eq!(most_reduces_in_one_fusion(&m), 2, "{case}");
        // Kernels reading `x`: `sum(x)`, the variance's pass, the pass computing `dy`, and
        // `dx` with `y`. The variance term's sum `sum(-(t + t))` read it in a pass of its own
        // after the one computing `dy` (5 kernels): it is `-(c * s + c * s)` with
        // `s = sum(x - mean)` now.
        assert_eq!(kernels_reading_parameter(&m, 0), 4, "{case}");
        // Stored at that shape: `y`, `dy` and `dx`. The variance term `2 * c * (x - mean)` is
        // computed from `x` by its two readers (it was stored too: 4 arrays).
        assert_eq!(stored_full_size(&m, &[n, h, h, c]), 3, "{case}");
    }
    check_values(
        &parsed,
        &args,
        &format!("split mean gradient {n}x{h}x{h}x{c}"),
    );
}

#[test]
fn batch_norm_mean_gradient_sums_and_variance_term_need_no_extra_pass() {
    check_split_mean_grad(3, 7, 5);
    check_split_mean_grad(2, 5, 17);
    check_split_mean_grad(1, 1, 1);
    // 75,264 elements: the three reduces are built in two parts and combined.
    check_split_mean_grad(16, 14, 24);
}

/// A ResNet-20 block's second half at `[n, h, h, c]`: `z = x * scale + beta + relu(shortcut)`,
/// `relu(z)` read by a 3x3 convolution, and the ReLU's gradient of `dy`, masked by `z > 0`.
fn residual_relu_module(n: i64, h: i64, c: i64) -> Module {
    let a = format!("f32[{n},{h},{h},{c}]");
    let text = format!(
        "HloModule residual_relu

ENTRY main {{
  x = {a} parameter(0)
  scale = f32[{c}] parameter(1)
  beta = f32[{c}] parameter(2)
  w = f32[3,3,{c},{c}] parameter(3)
  dy = {a} parameter(4)
  shortcut = {a} parameter(5)
  zero = f32[] constant(0)
  zeros = {a} broadcast(zero), dimensions={{}}
  scale_b = {a} broadcast(scale), dimensions={{3}}
  beta_b = {a} broadcast(beta), dimensions={{3}}
  scaled = {a} multiply(x, scale_b)
  y = {a} add(scaled, beta_b)
  shortcut_relu = {a} maximum(shortcut, zeros)
  z = {a} add(y, shortcut_relu)
  relu = {a} maximum(z, zeros)
  next = {a} convolution(relu, w), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
  pos = pred[{n},{h},{h},{c}] compare(z, zeros), direction=GT
  grad = {a} select(pos, dy, zeros)
  ROOT r = ({a}, {a}) tuple(next, grad)
}}
"
    );
    parse_module(&text, None).unwrap()
}

fn check_residual_relu(n: i64, h: i64, c: i64) {
    let parsed = residual_relu_module(n, h, c);
    let args = vec![
        pseudo_random_f32(&[n, h, h, c], 1, 0),
        pseudo_random_f32(&[c], 2, 0),
        pseudo_random_f32(&[c], 3, 0),
        pseudo_random_f32(&[3, 3, c, c], 4, 0),
        pseudo_random_f32(&[n, h, h, c], 5, 0),
        pseudo_random_f32(&[n, h, h, c], 6, 0),
    ];
    let mut m = parsed.clone();
    optimize(&mut m, &CompileOptions::default()).unwrap();
    let case = format!("residual ReLU {n}x{h}x{h}x{c}");
    // Stored at that shape: `relu(z)`, the convolution's output and the gradient. `z` was
    // stored too (4 arrays), because the mask read it.
    assert_eq!(stored_full_size(&m, &[n, h, h, c]), 3, "{case}");
    check_values(&parsed, &args, &case);
}

#[test]
fn a_relu_read_by_a_convolution_is_stored_once_with_its_mask_read_from_it() {
    check_residual_relu(2, 5, 3);
    check_residual_relu(1, 7, 1);
    check_residual_relu(3, 6, 17);
    // 75,264 elements: the loops are split over two workers.
    check_residual_relu(16, 14, 24);
}
