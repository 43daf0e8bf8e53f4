//! The `losses` module against TF 2.15's `tf.compat.v1.losses` (values printed by
//! `tests/tf/check_losses.py` and kept in `fixtures/tf_losses.json`), every reduction, its
//! gradients against central differences and against the hand-written loss, and its mistakes
//! as trace errors at the model_fn's line.

use crate::support::{random_array, run, scalar_step, values};
use tessel_compiler::ir::{
    Array, ArrayData, ArrayShape, ElementType, ElementType::F32, ElementType::F64,
};
use tessel_compiler::trace::Tensor;
use tessel_estimator::losses::{
    absolute_difference, huber_loss, mean_squared_error, sigmoid_cross_entropy,
    softmax_cross_entropy, sparse_softmax_cross_entropy, Reduction,
};
use tessel_estimator::model::{Graph, Mode};
use tessel_runtime::session::Device;

fn array(dims: &[i64], ty: ElementType, v: &[f64]) -> Array {
    Array::new(
        ArrayShape::new(ty, dims),
        ArrayData::from_f64_fn(ty, v.len(), |i| v[i]),
    )
}

/// The inputs `check_losses.py` gives TF, as constants of a trace.
struct Inputs {
    logits: Tensor,
    sparse: Tensor,
    onehot: Tensor,
    multi: Tensor,
    w_rows: Tensor,
    w_col: Tensor,
    predictions: Tensor,
    labels: Tensor,
}

fn inputs(g: &mut Graph) -> Inputs {
    let logits = [
        1.0, 2.0, 0.5, 0.0, -1.0, 3.0, 2.5, 0.25, -0.5, -1.5, 1.0, 0.0,
    ];
    let sparse = [1.0, 2.0, 0.0, 0.0];
    let mut onehot = vec![0.0; 12];
    for (row, &c) in sparse.iter().enumerate() {
        onehot[row * 3 + c as usize] = 1.0;
    }
    let multi = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0];
    let w = [1.0, 0.0, 2.0, 0.5];
    let pred = [0.5, 2.0, 1.5, -1.0, 3.0, 0.0, -2.0, 0.25];
    let lab = [1.0, 0.0, 1.0, -0.5, 0.0, 0.0, 0.0, 2.0];
    let mut c = |dims: &[i64], ty, v: &[f64]| g.tracer.constant(array(dims, ty, v));
    Inputs {
        logits: c(&[4, 3], F32, &logits),
        sparse: c(&[4], ElementType::S32, &sparse),
        onehot: c(&[4, 3], F32, &onehot),
        multi: c(&[4, 3], F32, &multi),
        w_rows: c(&[4], F32, &w),
        w_col: c(&[4, 1], F32, &w),
        predictions: c(&[4, 2], F32, &pred),
        labels: c(&[4, 2], F32, &lab),
    }
}

/// The loss `case` of `tf_losses.json` with `weights` (its per-example or per-row weights
/// when `weighted`) and `reduction`.
fn loss(g: &Graph, x: &Inputs, case: &str, weighted: bool, reduction: Reduction) -> Tensor {
    let rows = weighted.then_some(&x.w_rows);
    let col = weighted.then_some(&x.w_col);
    match case {
        "softmax" => softmax_cross_entropy(g, &x.onehot, &x.logits, rows, 0.0, reduction),
        "softmax_smooth" => softmax_cross_entropy(g, &x.onehot, &x.logits, rows, 0.1, reduction),
        "sparse" => sparse_softmax_cross_entropy(g, &x.sparse, &x.logits, rows, reduction),
        "sigmoid" => sigmoid_cross_entropy(g, &x.multi, &x.logits, col, 0.0, reduction),
        "sigmoid_smooth" => sigmoid_cross_entropy(g, &x.multi, &x.logits, col, 0.2, reduction),
        "mse" => mean_squared_error(g, &x.labels, &x.predictions, col, reduction),
        "absolute" => absolute_difference(g, &x.labels, &x.predictions, col, reduction),
        "huber" => huber_loss(g, &x.labels, &x.predictions, col, 1.0, reduction),
        "huber_half" => huber_loss(g, &x.labels, &x.predictions, col, 0.5, reduction),
        other => panic!("no case {other}"),
    }
}

const CASES: [&str; 9] = [
    "softmax",
    "softmax_smooth",
    "sparse",
    "sigmoid",
    "sigmoid_smooth",
    "mse",
    "absolute",
    "huber",
    "huber_half",
];

const REDUCTIONS: [(&str, Reduction); 5] = [
    ("none", Reduction::None),
    ("sum", Reduction::Sum),
    ("mean", Reduction::Mean),
    ("sum_over_batch_size", Reduction::SumOverBatchSize),
    ("sum_by_nonzero_weights", Reduction::SumByNonzeroWeights),
];

#[test]
fn every_loss_and_reduction_equals_tf() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/tf_losses.json"
    ))
    .unwrap();
    let tf: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut g = Graph::new("losses", Mode::Train, Some(1));
    let x = inputs(&mut g);
    let mut keys = Vec::new();
    let mut outs = Vec::new();
    for case in CASES {
        for (rname, r) in REDUCTIONS {
            keys.push(format!("{case}/{rname}"));
            outs.push(loss(&g, &x, case, true, r));
        }
        keys.push(format!("{case}/default_unweighted"));
        outs.push(loss(&g, &x, case, false, Reduction::default()));
    }
    let refs: Vec<&Tensor> = outs.iter().collect();
    let module = g.tracer.finish(&refs).expect("traces");
    for device in [Device::interpreter(), Device::jit()] {
        let got = run(&module, &device, vec![scalar_step(0)]);
        for (key, a) in keys.iter().zip(&got) {
            let want: Vec<f64> = tf[key]
                .as_array()
                .unwrap_or_else(|| panic!("{key} in the fixture"))
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let have = values(a);
            assert_eq!(have.len(), want.len(), "{key}: element count");
            for (h, w) in have.iter().zip(&want) {
                assert!(
                    (h - w).abs() <= 2e-6 * w.abs().max(1.0),
                    "{key}: tessel {have:?} vs TF {want:?}"
                );
            }
        }
    }
}

/// `d loss / d x` by autodiff against central differences, in f64, for every loss with
/// weights that include a zero, under each reduction.
#[test]
fn gradients_match_finite_differences() {
    let logits0 = random_array(&[4, 3], F64, 21);
    let targets = random_array(&[4, 3], F64, 22);
    for case in ["softmax", "sparse", "sigmoid", "mse", "absolute", "huber"] {
        for (rname, r) in REDUCTIONS {
            let mut g = Graph::new("grad", Mode::Train, Some(1));
            let x = g.tracer.parameter("x", &[4, 3], F64);
            let probs = g.tracer.constant(array(
                &[4, 3],
                F64,
                &[0.2, 0.5, 0.3, 0.0, 0.0, 1.0, 0.6, 0.4, 0.0, 0.1, 0.1, 0.8],
            ));
            let sparse = g
                .tracer
                .constant(array(&[4], ElementType::S32, &[1.0, 2.0, 0.0, 0.0]));
            let targets = g.tracer.constant(targets.clone());
            let w_rows = g.tracer.constant(array(&[4], F64, &[1.0, 0.0, 2.0, 0.5]));
            let w_col = g
                .tracer
                .constant(array(&[4, 1], F64, &[1.0, 0.0, 2.0, 0.5]));
            let l = match case {
                "softmax" => softmax_cross_entropy(&g, &probs, &x, Some(&w_rows), 0.1, r),
                "sparse" => sparse_softmax_cross_entropy(&g, &sparse, &x, Some(&w_rows), r),
                "sigmoid" => sigmoid_cross_entropy(&g, &probs, &x, Some(&w_col), 0.0, r),
                "mse" => mean_squared_error(&g, &targets, &x, Some(&w_col), r),
                "absolute" => absolute_difference(&g, &targets, &x, Some(&w_col), r),
                _ => huber_loss(&g, &targets, &x, Some(&w_col), 0.3, r),
            };
            // Reduction::None: a fixed weighting of the unreduced losses.
            let l = if r == Reduction::None {
                let r =
                    g.tracer
                        .constant(random_array(l.shape().unwrap().dims.as_slice(), F64, 23));
                (&l * &r).reduce_sum(&[], false)
            } else {
                l
            };
            let grads = g.tracer.grad(&l, &[&x]);
            let module = g.tracer.finish(&[&l, &grads[0]]).expect("traces");
            let at = |x: Array| run(&module, &Device::interpreter(), vec![scalar_step(0), x]);
            let analytic = values(&at(logits0.clone())[1]);
            for k in 0..12 {
                let eps = 1e-6;
                let shifted = |d: f64| {
                    let mut v = values(&logits0);
                    v[k] += d;
                    values(&at(array(&[4, 3], F64, &v))[0])[0]
                };
                let numeric = (shifted(eps) - shifted(-eps)) / (2.0 * eps);
                assert!(
                    (numeric - analytic[k]).abs() <= 1e-6 * numeric.abs().max(1.0),
                    "{case}/{rname}: d loss / d x[{k}]: analytic {} vs numeric {numeric}",
                    analytic[k]
                );
            }
        }
    }
}

/// The guide's hand-written loss and `sparse_softmax_cross_entropy` with TF's defaults give
/// the same loss and the same gradient (f32, the training step's case).
#[test]
fn sparse_cross_entropy_equals_the_hand_written_loss() {
    let mut g = Graph::new("same", Mode::Train, Some(1));
    let logits = g.tracer.parameter("logits", &[8, 10], F32);
    let labels = g.tracer.parameter("labels", &[8], ElementType::S32);
    let ours = sparse_softmax_cross_entropy(&g, &labels, &logits, None, Reduction::default());
    let hand = logits
        .softmax_cross_entropy_with_logits(&labels.one_hot(10, F32))
        .reduce_mean(&[], false);
    let grads = g.tracer.grad(&ours, &[&logits]);
    let hand_grads = g.tracer.grad(&hand, &[&logits]);
    let module = g
        .tracer
        .finish(&[&ours, &hand, &grads[0], &hand_grads[0]])
        .expect("traces");
    let labels = array(
        &[8],
        ElementType::S32,
        &[3.0, 1.0, 9.0, 0.0, 5.0, 5.0, 2.0, 7.0],
    );
    let out = run(
        &module,
        &Device::interpreter(),
        vec![scalar_step(0), random_array(&[8, 10], F32, 5), labels],
    );
    assert_eq!(values(&out[0]), values(&out[1]));
    assert_eq!(values(&out[2]), values(&out[3]));
}

/// Mistakes are trace errors at the caller's line, worded as TF's where TF has a message.
#[test]
fn mistakes_are_trace_errors_at_the_callers_line() {
    let mut g = Graph::new("mistakes", Mode::Train, Some(1));
    let x = inputs(&mut g);
    let three = g.tracer.constant(array(&[3], F32, &[1.0, 1.0, 1.0]));
    let first_line = line!();
    let a = sparse_softmax_cross_entropy(&g, &x.sparse, &x.logits, Some(&three), Reduction::Sum);
    let b = sparse_softmax_cross_entropy(&g, &x.logits, &x.logits, None, Reduction::Sum);
    let c = mean_squared_error(&g, &x.labels, &x.logits, None, Reduction::Sum);
    let d = softmax_cross_entropy(&g, &x.onehot, &x.sparse, None, 0.0, Reduction::Sum);
    let e = huber_loss(&g, &x.labels, &x.predictions, None, -1.0, Reduction::Sum);
    let f = softmax_cross_entropy(&g, &x.onehot, &x.logits, None, 1.5, Reduction::Sum);
    let last_line = line!();
    let err = g.tracer.finish(&[&a, &b, &c, &d, &e, &f]).unwrap_err();
    let text = err.to_string();
    let expected = [
        "weights can not be broadcast to values. values.shape=f32[4]. weights.shape=f32[3].",
        "labels must be integer class ids, got f32[4,3]",
        "labels f32[4,2] and predictions f32[4,3] must have the same shape",
        "logits must be floating point, got s32[4]",
        "delta must be positive, got -1",
        "label_smoothing must be in [0, 1], got 1.5",
    ];
    assert_eq!(err.issues.len(), expected.len(), "{text}");
    let mut previous = first_line;
    for (i, (issue, want)) in err.issues.iter().zip(expected).enumerate() {
        assert!(issue.message.contains(want), "{i}: {text}");
        // Each at its own call in this function, in order.
        assert!(
            issue.location.file.ends_with("tests/model/losses.rs"),
            "{text}"
        );
        assert!(issue.location.line > previous, "{i}: {text}");
        assert!(issue.location.line < last_line, "{i}: {text}");
        previous = issue.location.line;
    }
}
