//! Whole-set evaluation, `Some(n)`, the new metrics and `train_and_evaluate`, on a tiny
//! linear classifier over synthetic data, checked against a host computation over exactly
//! the real examples.

use crate::support::random_array;
use crate::support::tiny::{temp_dir, TestDir};
use std::sync::{Arc, Mutex};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::estimator::{
    require_labels, ContinuousEval, EvalMetrics, EvalSpec, Features, HostTensors, TrainSpec,
};
use tessel_estimator::input::Dataset;
use tessel_estimator::losses::{self, Reduction};
use tessel_estimator::metrics::{Auc, Metric, MetricSet, TopKAccuracy};
use tessel_estimator::model::optimizers::GradientDescent;
use tessel_estimator::model::{get_variable, CrossShardOptimizer, Initializer, Optimizer};
use tessel_estimator::{
    EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuConfig, TpuEstimator,
    TpuEstimatorSpec,
};

const CLASSES: i64 = 3;
const FEATURES: i64 = 4;

fn kernel() -> Array {
    random_array(&[FEATURES, CLASSES], ElementType::F32, 7)
}

/// Synthetic examples: `x` `[n, 4]`, an `id` per example, labels in 0..3.
fn data(n: i64) -> (Array, Vec<i32>) {
    let x = random_array(&[n, FEATURES], ElementType::F32, 11);
    let noise = random_array(&[n], ElementType::F32, 12);
    let labels = (0..n as usize)
        .map(|i| {
            let v = x.data.get_f64(i * 4) + x.data.get_f64(i * 4 + 1) + 0.5 * noise.data.get_f64(i);
            if v < -0.4 {
                0
            } else if v < 0.4 {
                1
            } else {
                2
            }
        })
        .collect();
    (x, labels)
}

fn dataset(n: i64) -> Dataset {
    let (x, labels) = data(n);
    let ids: Vec<f32> = (0..n).map(|i| i as f32).collect();
    Dataset::from_tensor_slices(vec![
        ("x".into(), x),
        (
            "id".into(),
            Array::new(ArrayShape::new(ElementType::F32, &[n]), ArrayData::F32(ids)),
        ),
        (
            "label".into(),
            Array::new(
                ArrayShape::new(ElementType::S32, &[n]),
                ArrayData::S32(labels),
            ),
        ),
    ])
    .unwrap()
}

/// The ids the metric_fn saw with mask 1, in order.
type Seen = Arc<Mutex<Vec<f64>>>;

/// Logits `x · kernel + bias`; the EVAL loss is the mask-weighted mean cross-entropy.
fn model_fn(
    seen: Seen,
) -> impl Fn(
    &mut Graph,
    &Features,
    Option<&Tensor>,
    Mode,
    &Params,
) -> Result<TpuEstimatorSpec, EstimatorError>
       + Send
       + Sync
       + 'static {
    move |g, features, labels, mode, _params| {
        let w = get_variable(
            g,
            "kernel",
            &[FEATURES, CLASSES],
            ElementType::F32,
            Initializer::Value(kernel()),
            true,
        )?;
        let logits = features["x"].matmul(&w);
        let labels = labels.expect("labels");
        let xent =
            logits.softmax_cross_entropy_with_logits(&labels.one_hot(CLASSES, ElementType::F32));
        let loss = match features.mask() {
            Some(mask) => {
                let real = mask.reduce_sum(&[], false);
                (&xent * mask).reduce_sum(&[], false) / real.maximum(&real.scalar_like(1.0))
            }
            None => xent.reduce_mean(&[], false),
        };
        let mut spec = TpuEstimatorSpec::new(mode);
        spec.loss = Some(loss.clone());
        if mode == Mode::Eval {
            let seen = Arc::clone(&seen);
            let metric_fn = move |m: &mut MetricSet, t: &HostTensors| {
                let mask = t.mask().expect("evaluate gives a mask");
                let ids = &t["id"];
                let mut s = seen.lock().unwrap();
                for i in 0..mask.len() {
                    if mask.data.get_f64(i) == 1.0 {
                        s.push(ids.data.get_f64(i));
                    }
                }
                m.accuracy("accuracy", &t["labels"], &t["classes"], Some(mask));
                m.top_k_accuracy("top2", &t["labels"], &t["logits"], 2, Some(mask));
                m.mean("logit_mean", &t["logits"], Some(mask));
            };
            spec.eval_metrics = Some(EvalMetrics::new(
                metric_fn,
                vec![
                    ("labels", labels.clone()),
                    ("classes", logits.argmax(1)),
                    ("logits", logits.clone()),
                    ("id", features["id"].clone()),
                ],
            ));
            return Ok(spec);
        }
        let opt = CrossShardOptimizer::new(GradientDescent::new(0.5));
        spec.train_op = Some(opt.minimize(g, &loss)?);
        Ok(spec)
    }
}

/// The estimator under test, with its model_dir (removed when the test passes).
fn estimator(seen: Seen, shards: usize, ipl: u64, eval_batch: usize) -> (TpuEstimator, TestDir) {
    let dir = temp_dir(&format!(
        "evalwhole_{}_{shards}_{ipl}_{eval_batch}",
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    let config = RunConfig {
        model_dir: Some(dir.to_path_buf()),
        save_checkpoints_steps: Some(5),
        tpu_config: TpuConfig {
            iterations_per_loop: ipl,
            num_shards: Some(shards),
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    let estimator = TpuEstimator::new(
        model_fn(seen),
        config,
        Params::new(),
        true,
        8 * shards,
        Some(eval_batch),
        None,
    )
    .unwrap()
    .quiet();
    (estimator, dir)
}

static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The loss, accuracy, top-2 and mean logit over examples `0..n` with the initial kernel.
fn host_reference(n: i64) -> (f64, f64, f64, f64) {
    let (x, labels) = data(n);
    let w = kernel();
    let (mut loss, mut correct, mut top2, mut logit_sum) = (0.0, 0.0, 0.0, 0.0);
    for (i, &label) in labels.iter().enumerate() {
        let logits: Vec<f64> = (0..CLASSES as usize)
            .map(|c| {
                (0..FEATURES as usize)
                    .map(|k| x.data.get_f64(i * 4 + k) * w.data.get_f64(k * 3 + c))
                    .sum()
            })
            .collect();
        let max = logits.iter().cloned().fold(f64::MIN, f64::max);
        let lse = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
        let y = label as usize;
        loss += lse - logits[y];
        let argmax = (0..3).fold(0, |b, c| if logits[c] > logits[b] { c } else { b });
        correct += (argmax == y) as u8 as f64;
        top2 += (logits.iter().filter(|&&l| l > logits[y]).count() < 2) as u8 as f64;
        logit_sum += logits.iter().sum::<f64>();
    }
    let n = n as f64;
    (loss / n, correct / n, top2 / n, logit_sum / (3.0 * n))
}

fn input_fn(n: i64, repeat: bool) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |params: &Params| {
        let mut ds = dataset(n);
        if repeat {
            ds = ds.repeat(None);
        }
        // One pass: no drop_remainder, the estimator pads the short last batch (a repeated
        // input, for training, has full batches only).
        Ok(Input::new(
            ds.batch(params.batch_size() as u64, repeat)?,
            "label",
        ))
    }
}

fn check_whole_set(n: i64, shards: usize, ipl: u64, eval_batch: usize) {
    let seen: Seen = Arc::default();
    let (est, _dir) = estimator(Arc::clone(&seen), shards, ipl, eval_batch);
    let r = est.evaluate(input_fn(n, false), None).unwrap();
    assert_eq!(r.examples, n as u64, "examples");
    let mut ids = seen.lock().unwrap().clone();
    ids.sort_by(f64::total_cmp);
    let expected: Vec<f64> = (0..n).map(|i| i as f64).collect();
    assert_eq!(ids, expected, "every example exactly once");
    let (loss, accuracy, top2, mean) = host_reference(n);
    let close = |what: &str, a: f64, b: f64| {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "{what}: {a} vs host {b}"
        );
    };
    close("loss", r.loss, loss);
    close("accuracy", r.metric("accuracy").unwrap(), accuracy);
    close("top2", r.metric("top2").unwrap(), top2);
    close("logit_mean", r.metric("logit_mean").unwrap(), mean);
    // Steps logged: ceil(batches / shards), known from the dataset's cardinality.
    let per_shard = (eval_batch / shards) as i64;
    let steps = ((n + per_shard - 1) / per_shard + shards as i64 - 1) / shards as i64;
    let last = format!("Evaluation [{steps}/{steps}]");
    assert_eq!(
        r.log.iter().rfind(|l| l.starts_with("Evaluation [")),
        Some(&last),
        "{:?}",
        r.log
    );
}

#[test]
fn whole_set_one_shard_counts_every_example_once() {
    // 1000 / 64 = 15.6 batches; loops of 4, 4, 4, 4 (the last one short by input's end).
    check_whole_set(1000, 1, 4, 64);
}

#[test]
fn whole_set_two_shards_pads_the_idle_shard() {
    // 1000 / 32 per shard = 31.25 batches: 32 per-shard batches, 16 steps; with loops of 5
    // the last loop is 1 step, and in it shard 1 gets an all-padding batch.
    check_whole_set(1000, 2, 5, 64);
    // An odd number of per-shard batches: 999 / 16 = 62.4 -> 63 batches, 32 steps.
    check_whole_set(999, 2, 3, 32);
}

#[test]
fn whole_set_smaller_than_one_batch() {
    check_whole_set(5, 2, 3, 32);
}

/// The porting table's model_fn as `docs/estimator.md` writes it: the loss from `losses`, the
/// metric_fn's weights `None`, the spec written as the table writes it. No mask anywhere in
/// user code, and the whole-set figures are exact.
fn ported_model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    _params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let w = get_variable(
        g,
        "kernel",
        &[FEATURES, CLASSES],
        ElementType::F32,
        Initializer::Value(kernel()),
        true,
    )?;
    let logits = features["x"].matmul(&w);
    let labels = require_labels(labels, mode)?;
    let onehot = labels.one_hot(CLASSES, ElementType::F32);
    let loss = losses::softmax_cross_entropy(g, &onehot, &logits, None, 0.0, Reduction::default());
    let train_op = match mode {
        Mode::Train => {
            Some(CrossShardOptimizer::new(GradientDescent::new(0.5)).minimize(g, &loss)?)
        }
        _ => None,
    };
    let metric_fn = |m: &mut MetricSet, t: &HostTensors| {
        m.accuracy("accuracy", &t["labels"], &t["classes"], None)
    };
    // The porting table's row, verbatim.
    Ok(TpuEstimatorSpec {
        loss: Some(loss),
        train_op,
        eval_metrics: Some(EvalMetrics::new(
            metric_fn,
            vec![("labels", labels.clone()), ("classes", logits.argmax(1))],
        )),
        ..TpuEstimatorSpec::new(mode)
    })
}

fn ported_estimator(shards: usize, eval_batch: usize) -> (TpuEstimator, TestDir) {
    let dir = temp_dir(&format!(
        "evalported_{}",
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    let config = RunConfig {
        model_dir: Some(dir.to_path_buf()),
        tpu_config: TpuConfig {
            iterations_per_loop: 3,
            num_shards: Some(shards),
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    let est = TpuEstimator::new(
        ported_model_fn,
        config,
        Params::new(),
        true,
        8 * shards,
        Some(eval_batch),
        None,
    )
    .unwrap()
    .quiet();
    (est, dir)
}

#[test]
fn the_porting_tables_model_fn_as_written_is_exact_on_the_whole_set() {
    // 1000 at 64 (the last batch 40 real, 24 padding); 999 on 2 shards of 16 (an idle shard).
    for (n, shards, batch) in [(1000, 1, 64), (999, 2, 32)] {
        let (est, _dir) = ported_estimator(shards, batch);
        let r = est.evaluate(input_fn(n, false), None).unwrap();
        let (loss, accuracy, _, _) = host_reference(n);
        assert_eq!(r.examples, n as u64);
        assert!((r.loss - loss).abs() <= 1e-5, "loss {} vs {loss}", r.loss);
        let a = r.metric("accuracy").unwrap();
        assert!((a - accuracy).abs() <= 1e-9, "accuracy {a} vs {accuracy}");
        // It trains too (the same model_fn in TRAIN).
        est.train(input_fn(n, true), Some(2), None).unwrap();
    }
}

#[test]
fn an_empty_eval_input_is_an_error() {
    let (est, _dir) = ported_estimator(1, 64);
    let empty = |params: &Params| -> Result<Input, EstimatorError> {
        let ds = dataset(10)
            .skip(10)
            .batch(params.batch_size() as u64, false)?;
        Ok(Input::new(ds, "label"))
    };
    for steps in [None, Some(5)] {
        let e = est.evaluate(empty, steps).unwrap_err().to_string();
        assert!(e.contains("no examples to evaluate"), "{e}");
    }
}

#[test]
fn evaluation_logs_at_tfs_cadence() {
    // 1000 examples at 8: 125 steps, a line every 12 and at 125 (TF's _StopAfterNEvalsHook).
    let (est, _dir) = ported_estimator(1, 8);
    let r = est.evaluate(input_fn(1000, false), None).unwrap();
    let lines: Vec<&String> = r
        .log
        .iter()
        .filter(|l| l.starts_with("Evaluation ["))
        .collect();
    let expected: Vec<String> = (1..=10)
        .map(|k| format!("Evaluation [{}/125]", 12 * k))
        .chain(std::iter::once("Evaluation [125/125]".to_string()))
        .collect();
    assert_eq!(lines, expected.iter().collect::<Vec<_>>());
}

#[test]
fn some_steps_stops_after_n_batches() {
    let seen: Seen = Arc::default();
    let (est, _dir) = estimator(Arc::clone(&seen), 2, 3, 32);
    let r = est.evaluate(input_fn(100, true), Some(7)).unwrap();
    assert_eq!(r.examples, 7 * 32);
    assert!(r.log.iter().any(|l| l == "Evaluation [7/7]"));
    // The repeated input wraps: the first 224 ids of 0..100 repeated.
    let mut ids = seen.lock().unwrap().clone();
    ids.sort_by(f64::total_cmp);
    let mut expected: Vec<f64> = (0..224).map(|i| (i % 100) as f64).collect();
    expected.sort_by(f64::total_cmp);
    assert_eq!(ids, expected);
    // Some(n) on an input that ends first stops at its end, counting real examples.
    let r = est.evaluate(input_fn(100, false), Some(50)).unwrap();
    assert_eq!(r.examples, 100);
    assert!((r.loss - host_reference(100).0).abs() < 1e-5);
    assert!(est.evaluate(input_fn(100, false), Some(0)).is_err());
    // The whole set of an input that never ends is refused, not run forever.
    let e = est
        .evaluate(input_fn(100, true), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("repeats forever"), "{e}");
}

#[test]
fn a_padded_batch_with_mask_input_is_used_as_is() {
    let seen: Seen = Arc::default();
    let (est, _dir) = estimator(Arc::clone(&seen), 1, 4, 64);
    let input = |params: &Params| -> Result<Input, EstimatorError> {
        let ds = dataset(300).padded_batch_with_mask(params.batch_size() as u64, "weights")?;
        Ok(Input::new(ds, "label").with_mask("weights"))
    };
    let r = est.evaluate(input, None).unwrap();
    assert_eq!(r.examples, 300);
    assert!((r.loss - host_reference(300).0).abs() < 1e-5);
    assert!((r.metric("accuracy").unwrap() - host_reference(300).1).abs() < 1e-9);
}

#[test]
fn a_wrong_batch_dimension_is_an_error() {
    let (est, _dir) = estimator(Arc::default(), 1, 4, 64);
    let input = |_: &Params| -> Result<Input, EstimatorError> {
        Ok(Input::new(dataset(300).batch(10, true)?, "label"))
    };
    let e = est.evaluate(input, None).unwrap_err().to_string();
    assert!(e.contains("params['batch_size'] = 64"), "{e}");
}

#[test]
fn auc_matches_hand_values() {
    let f32s = |v: &[f32]| {
        Array::new(
            ArrayShape::new(ElementType::F32, &[v.len() as i64]),
            ArrayData::F32(v.to_vec()),
        )
    };
    let labels = f32s(&[0.0, 0.0, 1.0, 1.0]);
    let predictions = f32s(&[0.1, 0.4, 0.35, 0.8]);
    // Of the 4 (positive, negative) pairs, 3 are ordered right: AUC 0.75.
    let mut auc = Auc::new(200);
    auc.update(&labels, &predictions, None).unwrap();
    assert!((auc.result() - 0.75).abs() < 1e-6, "{}", auc.result());
    // Weight 0 on the negative at 0.4: every remaining pair is ordered right.
    let mut auc = Auc::new(200);
    auc.update(&labels, &predictions, Some(&f32s(&[1.0, 0.0, 1.0, 1.0])))
        .unwrap();
    assert!((auc.result() - 1.0).abs() < 1e-6, "{}", auc.result());
    // Streaming over two batches equals one batch.
    let mut two = Auc::new(200);
    two.update(&f32s(&[0.0, 0.0]), &f32s(&[0.1, 0.4]), None)
        .unwrap();
    two.update(&f32s(&[1.0, 1.0]), &f32s(&[0.35, 0.8]), None)
        .unwrap();
    assert!((two.result() - 0.75).abs() < 1e-6);
    // With 3 thresholds (-eps, 0.5, 1+eps) and the negative at 0.6 (exact AUC still 0.75),
    // the ROC has the points (1,1), (0.5,0.5), (0,0): 0.5.
    let mut coarse = Auc::new(3);
    coarse
        .update(&labels, &f32s(&[0.1, 0.6, 0.35, 0.8]), None)
        .unwrap();
    assert!((coarse.result() - 0.5).abs() < 1e-6, "{}", coarse.result());
    assert!(Auc::new(200)
        .update(&labels, &f32s(&[0.1, 1.5, 0.2, 0.3]), None)
        .is_err());
}

#[test]
fn top_k_matches_hand_values() {
    let scores = Array::new(
        ArrayShape::new(ElementType::F32, &[3, 3]),
        ArrayData::F32(vec![0.1, 0.5, 0.4, 0.3, 0.3, 0.4, 0.9, 0.05, 0.05]),
    );
    let labels = Array::new(
        ArrayShape::new(ElementType::S32, &[3]),
        ArrayData::S32(vec![1, 0, 1]),
    );
    let at = |k: usize, w: Option<&Array>| {
        let mut m = TopKAccuracy::new(k);
        m.update(&labels, &scores, w).unwrap();
        m.result()
    };
    // k=1: only row 0's label has the top score.
    assert!((at(1, None) - 1.0 / 3.0).abs() < 1e-12);
    // k=2: row 1 (one higher) and row 2 (one higher, a tie not counted) join.
    assert_eq!(at(2, None), 1.0);
    let w = Array::new(
        ArrayShape::new(ElementType::F32, &[3]),
        ArrayData::F32(vec![0.0, 1.0, 1.0]),
    );
    assert_eq!(at(1, Some(&w)), 0.0);
}

#[test]
fn train_and_evaluate_writes_eval_events_at_each_chunk() {
    let seen: Seen = Arc::default();
    let (est, _dir) = estimator(Arc::clone(&seen), 1, 5, 64);
    let train = TrainSpec {
        input_fn: input_fn(200, true),
        max_steps: 20,
    };
    let eval = EvalSpec {
        input_fn: input_fn(200, false),
        steps: None,
        every_n_steps: Some(10),
        continuous: ContinuousEval::default(),
    };
    let r = est.train_and_evaluate(&train, &eval).unwrap().unwrap();
    assert_eq!(r.global_step, 20);
    assert_eq!(r.examples, 200);
    let mut steps = Vec::new();
    let mut losses = Vec::new();
    for entry in std::fs::read_dir(est.model_dir().join("eval")).unwrap() {
        for event in tessel_estimator::summary::read_events(entry.unwrap().path()).unwrap() {
            if let Some(tessel_estimator::summary::EventKind::Summary(s)) = &event.what {
                for v in &s.value {
                    if v.tag == "loss" {
                        steps.push(event.step);
                        losses.push((event.step, v.simple_value.unwrap()));
                    }
                }
            }
        }
    }
    steps.sort();
    assert_eq!(steps, vec![10, 20]);
    losses.sort_by_key(|l| l.0);
    assert!(
        losses[1].1 < losses[0].1,
        "training lowers the eval loss: {losses:?}"
    );
    assert!((losses[1].1 as f64 - r.loss).abs() < 1e-5);
    // Again at max_steps: nothing to train, one evaluation of the final checkpoint.
    let again = est.train_and_evaluate(&train, &eval).unwrap().unwrap();
    assert_eq!(again.global_step, 20);
}

/// The data of `tests/tf/check_eval_metrics.py`, from the same formulas.
/// Predictions, labels, weights, scores `[n, 5]`, classes.
type TfCase = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<i32>);

fn tf_case() -> TfCase {
    let frac = |v: f64| v.fract();
    let n = 1000;
    let pred: Vec<f32> = (0..n)
        .map(|k| frac((k as f64).sin().abs() * 43758.5453) as f32)
        .collect();
    let labels = (0..n)
        .map(|k| ((k * 7 % 3 == 0) != (pred[k] < 0.3)) as u8 as f32)
        .collect();
    let weights = (0..n)
        .map(|k| if k % 10 == 9 { 0.0 } else { 1.0 })
        .collect();
    let scores = (0..n)
        .flat_map(|k| (0..5).map(move |c| frac(((k * 5 + c) as f64).sin().abs() * 9973.1) as f32))
        .collect();
    let classes = (0..n).map(|k| (k % 5) as i32).collect();
    (pred, labels, weights, scores, classes)
}

#[test]
fn auc_and_top_k_match_tf() {
    // Printed by tests/tf/check_eval_metrics.py with TF 2.15 (tf.compat.v1.metrics).
    const TF_AUC200: f64 = 0.375147372;
    const TF_AUC7: f64 = 0.373253912;
    const TF_TOP2: f64 = 0.398888886;
    let (pred, labels, weights, scores, classes) = tf_case();
    let f32s = |v: &[f32], dims: &[i64]| {
        Array::new(
            ArrayShape::new(ElementType::F32, dims),
            ArrayData::F32(v.to_vec()),
        )
    };
    let mut set = MetricSet::new();
    for (lo, hi) in [(0usize, 600usize), (600, 1000)] {
        let n = (hi - lo) as i64;
        let l = f32s(&labels[lo..hi], &[n]);
        let p = f32s(&pred[lo..hi], &[n]);
        let w = f32s(&weights[lo..hi], &[n]);
        set.auc("auc200", &l, &p, Some(&w), 200);
        set.auc("auc7", &l, &p, Some(&w), 7);
        let s = f32s(&scores[lo * 5..hi * 5], &[n, 5]);
        let c = Array::new(
            ArrayShape::new(ElementType::S32, &[n]),
            ArrayData::S32(classes[lo..hi].to_vec()),
        );
        set.top_k_accuracy("top2", &c, &s, 2, Some(&w));
    }
    assert_eq!(set.error(), None);
    let r = set.results();
    // TF accumulates in f32: agreement to f32 precision.
    for ((name, v), tf) in r.iter().zip([TF_AUC200, TF_AUC7, TF_TOP2]) {
        assert!((v - tf).abs() < 2e-6, "{name}: {v} vs TF {tf}");
    }
}
