//! A checkpoint path in evaluate, predict and export is a restore: every variable (batch
//! normalization's moving statistics too) and the global step, from a TF or a tessel
//! checkpoint. Warm starting a training keeps TF's default (trainable variables only) and
//! says which variables it leaves at their initial values.

use crate::support::random_array;
use crate::support::tiny::temp_dir;
use std::path::PathBuf;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::checkpoint::WarmStart;
use tessel_estimator::estimator::{
    require_labels, EvalMetrics, ExportedModel, Features, HostTensors, ServingInput,
};
use tessel_estimator::input::Dataset;
use tessel_estimator::losses::{self, Reduction};
use tessel_estimator::metrics::MetricSet;
use tessel_estimator::model::layers::{batch_normalization, dense, BatchNorm, Dense};
use tessel_estimator::model::optimizers::GradientDescent;
use tessel_estimator::model::Optimizer;
use tessel_estimator::{
    EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuConfig, TpuEstimator,
    TpuEstimatorSpec,
};

/// `tests/tf/make_tf_bn_ckpt_fixture.py`'s checkpoint (global step 42).
fn tf_model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf_bn_ckpt")
}

// The fixture's values (the script's VALUES).
const GAMMA: [f64; 4] = [1.5, 0.5, 2.0, 1.0];
const BETA: [f64; 4] = [0.1, -0.2, 0.3, 0.0];
const MOVING_MEAN: [f64; 4] = [0.5, -1.0, 2.0, 0.25];
const MOVING_VARIANCE: [f64; 4] = [4.0, 0.25, 1.0, 9.0];
const KERNEL: [[f64; 3]; 4] = [
    [0.5, -0.25, 1.0],
    [0.0, 0.75, -0.5],
    [1.25, 0.5, 0.0],
    [-1.0, 0.25, 0.5],
];
const BIAS: [f64; 3] = [0.1, 0.0, -0.1];
/// TF's logits of the example [1, 2, 3, 4] from the fixture (the script prints them).
const TF_LOGITS_1234: [f64; 3] = [1.9612972736358643, 3.438758611679077, -0.39709070324897766];

/// batch_normalization (inference in EVAL and PREDICT), then dense 4 -> 3.
fn model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    _params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let h = batch_normalization(g, &features["x"], BatchNorm::default(), mode == Mode::Train)?;
    let logits = dense(g, &h, 3, Dense::default())?;
    if mode == Mode::Predict {
        let mut spec = TpuEstimatorSpec::new(mode);
        spec.predictions = vec![("logits".into(), logits)];
        return Ok(spec);
    }
    let labels = require_labels(labels, mode)?;
    let loss = losses::sparse_softmax_cross_entropy(g, labels, &logits, None, Reduction::default());
    let train_op = match mode {
        Mode::Train => Some(GradientDescent::new(0.1).minimize(g, &loss)?),
        _ => None,
    };
    let metric_fn = |m: &mut MetricSet, t: &HostTensors| {
        m.accuracy("accuracy", &t["labels"], &t["classes"], None)
    };
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

const N: i64 = 10;

/// `x` `[10, 4]` whose first row is [1, 2, 3, 4]; labels `i % 3`.
fn examples() -> (Vec<[f64; 4]>, Vec<i32>) {
    let r = random_array(&[N, 4], ElementType::F32, 17);
    let rows = (0..N as usize)
        .map(|i| match i {
            0 => [1.0, 2.0, 3.0, 4.0],
            _ => [0, 1, 2, 3].map(|k| 3.0 * r.data.get_f64(i * 4 + k)),
        })
        .collect();
    (rows, (0..N as i32).map(|i| i % 3).collect())
}

fn input_fn(train: bool) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |params: &Params| {
        let (rows, labels) = examples();
        let x: Vec<f32> = rows.iter().flatten().map(|&v| v as f32).collect();
        let mut ds = Dataset::from_tensor_slices(vec![
            (
                "x".into(),
                Array::new(
                    ArrayShape::new(ElementType::F32, &[N, 4]),
                    ArrayData::F32(x),
                ),
            ),
            (
                "label".into(),
                Array::new(
                    ArrayShape::new(ElementType::S32, &[N]),
                    ArrayData::S32(labels),
                ),
            ),
        ])?;
        if train {
            ds = ds.repeat(None);
        }
        Ok(Input::new(
            ds.batch(params.batch_size() as u64, train)?,
            "label",
        ))
    }
}

/// The fixture's logits of `x` (batch normalization in inference, TF's epsilon 1e-3).
fn host_logits(x: &[f64; 4]) -> [f64; 3] {
    let h: Vec<f64> = (0..4)
        .map(|k| GAMMA[k] * (x[k] - MOVING_MEAN[k]) / (MOVING_VARIANCE[k] + 1e-3).sqrt() + BETA[k])
        .collect();
    [0, 1, 2].map(|c| BIAS[c] + (0..4).map(|k| h[k] * KERNEL[k][c]).sum::<f64>())
}

fn estimator(name: &str) -> (TpuEstimator, crate::support::tiny::TestDir) {
    let dir = temp_dir(name);
    let config = RunConfig {
        model_dir: Some(dir.to_path_buf()),
        tf_random_seed: Some(3),
        tpu_config: TpuConfig {
            iterations_per_loop: 2,
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    let est = TpuEstimator::new(model_fn, config, Params::new(), true, 4, Some(4), Some(4))
        .unwrap()
        .quiet();
    (est, dir)
}

#[test]
fn evaluate_predict_and_export_restore_a_tf_checkpoint_whole() {
    let (est, _dir) = estimator("restore_tf");
    let est = est.with_warm_start(WarmStart::new(tf_model_dir()));
    // Evaluate: the moving statistics and the step come from the checkpoint.
    let r = est.evaluate(input_fn(false), None).unwrap();
    assert_eq!(r.global_step, 42);
    assert_eq!(r.examples, N as u64);
    let (rows, labels) = examples();
    let loss: f64 = rows
        .iter()
        .zip(&labels)
        .map(|(x, &y)| {
            let l = host_logits(x);
            let max = l.iter().cloned().fold(f64::MIN, f64::max);
            max + l.iter().map(|v| (v - max).exp()).sum::<f64>().ln() - l[y as usize]
        })
        .sum::<f64>()
        / N as f64;
    assert!((r.loss - loss).abs() < 1e-5, "loss {} vs {loss}", r.loss);
    assert!(
        r.log
            .iter()
            .any(|l| l.starts_with("Restoring parameters from")
                && l.ends_with("tf_bn_ckpt/model.ckpt-42")),
        "{:?}",
        r.log
    );
    // Predict: every row as TF computes it.
    let predictions: Vec<_> = est
        .predict(input_fn(false), None)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(predictions.len(), N as usize);
    for (i, p) in predictions.iter().enumerate() {
        for (c, want) in host_logits(&rows[i]).into_iter().enumerate() {
            let got = p["logits"].data.get_f64(c);
            assert!((got - want).abs() < 1e-5, "row {i}: {got} vs {want}");
        }
    }
    for (c, tf) in TF_LOGITS_1234.into_iter().enumerate() {
        let got = predictions[0]["logits"].data.get_f64(c);
        assert!((got - tf).abs() < 1e-5, "{got} vs TF's {tf}");
    }
    // Export: the same values, and the checkpoint's step.
    let base = temp_dir("restore_tf_export");
    let export = est
        .export(
            &base,
            &ServingInput::new().feature("x", ElementType::F32, &[4]),
        )
        .unwrap();
    let batch: Vec<f32> = rows.iter().take(4).flatten().map(|&v| v as f32).collect();
    let out = ExportedModel::load(&export)
        .unwrap()
        .run(&[(
            "x".to_string(),
            Array::new(
                ArrayShape::new(ElementType::F32, &[4, 4]),
                ArrayData::F32(batch),
            ),
        )])
        .unwrap();
    for (c, tf) in TF_LOGITS_1234.into_iter().enumerate() {
        let got = out[0].1.data.get_f64(c);
        assert!((got - tf).abs() < 1e-5, "export: {got} vs TF's {tf}");
    }
    let signature = std::fs::read_to_string(export.join("signature.json")).unwrap();
    assert!(signature.contains("moving_mean"), "{signature}");
}

#[test]
fn a_tessel_checkpoint_path_restores_like_its_model_dir() {
    // Train a model_dir 3 steps (the moving statistics move), evaluate it in place, then
    // from an empty model_dir given its path.
    let (trained, trained_dir) = estimator("restore_tessel_src");
    trained.train(input_fn(true), Some(3), None).unwrap();
    let in_place = trained.evaluate(input_fn(false), None).unwrap();
    let (est, _dir) = estimator("restore_tessel_dst");
    let est = est.with_warm_start(WarmStart::new(trained_dir.to_path_buf()));
    let restored = est.evaluate(input_fn(false), None).unwrap();
    assert_eq!(restored.global_step, 3);
    assert_eq!(restored.loss, in_place.loss);
    assert_eq!(restored.metrics, in_place.metrics);
}

#[test]
fn warm_starting_a_training_says_what_it_leaves_at_initial_values() {
    let (est, _dir) = estimator("warm_note");
    let est = est.with_warm_start(WarmStart::new(tf_model_dir()));
    let r = est.train(input_fn(true), Some(1), None).unwrap();
    // TF's default: the step is not taken.
    assert_eq!(r.global_step, 1);
    let note = r
        .log
        .iter()
        .find(|l| l.starts_with("Warm-starting only trainable variables"))
        .unwrap_or_else(|| panic!("no note in {:?}", r.log));
    assert!(
        note.contains(
            "2 non-trainable variable(s) keep their initial values: batch_normalization/moving_mean, batch_normalization/moving_variance"
        ),
        "{note}"
    );
    assert!(note.contains("WarmStart::all_variables()"), "{note}");
    // Taking every variable leaves nothing behind, and says nothing.
    let (est, _dir) = estimator("warm_note_all");
    let est = est.with_warm_start(WarmStart::new(tf_model_dir()).all_variables());
    let r = est.train(input_fn(true), Some(1), None).unwrap();
    assert!(
        !r.log.iter().any(|l| l.starts_with("Warm-starting only")),
        "{:?}",
        r.log
    );
}
