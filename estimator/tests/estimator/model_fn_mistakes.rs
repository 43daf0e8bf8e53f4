//! A user's mistakes in a model_fn, its metric_fn or its input_fn: each is an error that
//! says what is wrong (naming the user's line and the names that exist where there are
//! names), found when the model_fn is traced, before anything is compiled; none panics.

use crate::support::random_array;
use crate::support::tiny::temp_dir;
use std::sync::atomic::{AtomicUsize, Ordering};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::estimator::{
    require_labels, EvalMetrics, Features, HostTensors, ServingInput,
};
use tessel_estimator::input::Dataset;
use tessel_estimator::losses::{self, Reduction};
use tessel_estimator::metrics::MetricSet;
use tessel_estimator::model::layers::{max_pooling2d, Padding};
use tessel_estimator::model::optimizers::GradientDescent;
use tessel_estimator::model::{get_variable, Initializer, Optimizer};
use tessel_estimator::{
    EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuEstimator, TpuEstimatorSpec,
};

const THIS_FILE: &str = "tests/estimator/model_fn_mistakes.rs:";

/// One mistake the model_fn below makes (or `None`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mistake {
    None,
    FeatureTypo,
    FeatureIsTheLabels,
    MetricName,
    MetricShapes,
    MetricTensorScalar,
    MetricTensorTwice,
    NoLossInTrain,
    NoTrainOp,
    NoLossInEval,
    LossNotScalar,
    FloatLabels,
    MatmulShapes,
    PoolingRank,
    HostCallNotScalar,
    ParamTypo,
    NoPredictions,
    PredictionNotBatchFirst,
}

/// What the input_fn gets wrong.
#[derive(Clone, Copy, Debug, PartialEq)]
enum InputMistake {
    None,
    LabelsNamedWrong,
    NoLabels,
}

static METRIC_FN_CALLS: AtomicUsize = AtomicUsize::new(0);

/// A linear classifier 4 -> 3 with `mistake` in it.
fn model_fn(
    mistake: Mistake,
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
    use Mistake as M;
    move |g, features, labels, mode, params| {
        let x = match mistake {
            M::FeatureTypo => &features["xx"],
            M::FeatureIsTheLabels => &features["label"],
            _ => &features["x"],
        };
        let rows = if mistake == M::MatmulShapes { 5 } else { 4 };
        let lr = match mistake {
            M::ParamTypo => params["learning_rat"].as_f64(),
            _ => params["learning_rate"].as_f64(),
        };
        let w = get_variable(
            g,
            "kernel",
            &[rows, 3],
            ElementType::F32,
            Initializer::Zeros,
            true,
        )?;
        let x = match mistake {
            M::PoolingRank => max_pooling2d(g, x, [2, 2], [2, 2], Padding::Valid)?,
            _ => x.clone(),
        };
        let logits = x.matmul(&w);
        let mut spec = TpuEstimatorSpec::new(mode);
        if mode == Mode::Predict {
            spec.predictions = match mistake {
                M::NoPredictions => vec![],
                M::PredictionNotBatchFirst => {
                    vec![("mean".into(), logits.reduce_mean(&[0], false))]
                }
                _ => vec![("classes".into(), logits.argmax(1))],
            };
            return Ok(spec);
        }
        let labels = require_labels(labels, mode)?;
        let labels = match mistake {
            M::FloatLabels => labels.cast(ElementType::F32),
            _ => labels.clone(),
        };
        let loss =
            losses::sparse_softmax_cross_entropy(g, &labels, &logits, None, Reduction::default());
        spec.loss = match mistake {
            M::NoLossInTrain | M::NoLossInEval => None,
            M::LossNotScalar => Some(losses::sparse_softmax_cross_entropy(
                g,
                &labels,
                &logits,
                None,
                Reduction::None,
            )),
            _ => Some(loss.clone()),
        };
        if mode == Mode::Train {
            if mistake != M::NoTrainOp {
                let lr = lr.unwrap_or(0.1) as f32;
                spec.train_op = Some(GradientDescent::new(lr).minimize(g, &loss)?);
            }
            if mistake == M::HostCallNotScalar {
                spec.host_call = vec![("lr".into(), logits.reduce_sum(&[1], false))];
            }
            return Ok(spec);
        }
        let mut tensors = vec![
            ("labels", labels.clone()),
            ("classes", logits.argmax(1)),
            ("logits", logits.clone()),
        ];
        match mistake {
            M::MetricTensorScalar => tensors.push(("loss", loss.clone())),
            M::MetricTensorTwice => tensors.push(("classes", logits.argmax(1))),
            _ => {}
        }
        let metric_fn = move |m: &mut MetricSet, t: &HostTensors| {
            if mistake != M::None {
                METRIC_FN_CALLS.fetch_add(1, Ordering::SeqCst);
            }
            match mistake {
                M::MetricName => m.accuracy("accuracy", &t["labels"], &t["class"], None),
                M::MetricShapes => m.accuracy("accuracy", &t["labels"], &t["logits"], None),
                _ => m.accuracy("accuracy", &t["labels"], &t["classes"], None),
            }
        };
        spec.eval_metrics = Some(EvalMetrics::new(metric_fn, tensors));
        Ok(spec)
    }
}

fn dataset(n: i64) -> Dataset {
    let labels: Vec<i32> = (0..n as i32).map(|i| i % 3).collect();
    Dataset::from_tensor_slices(vec![
        ("x".into(), random_array(&[n, 4], ElementType::F32, 3)),
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

fn input_fn(
    train: bool,
    mistake: InputMistake,
) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |params: &Params| {
        let mut ds = dataset(40);
        if train {
            ds = ds.repeat(None);
        }
        let ds = ds.batch(params.batch_size() as u64, train)?;
        Ok(match mistake {
            InputMistake::None => Input::new(ds, "label"),
            InputMistake::LabelsNamedWrong => Input::new(ds, "labels"),
            InputMistake::NoLabels => Input::features_only(ds),
        })
    }
}

/// Runs `mode` with the mistakes; the error's text.
fn error_of(mode: Mode, mistake: Mistake, input: InputMistake) -> String {
    let dir = temp_dir(&format!("mistakes_{mode:?}_{mistake:?}_{input:?}"));
    let config = RunConfig {
        model_dir: Some(dir.to_path_buf()),
        ..RunConfig::default()
    };
    let est = TpuEstimator::new(
        model_fn(mistake),
        config,
        Params::new().with("learning_rate", 0.1),
        true,
        16,
        Some(16),
        Some(16),
    )
    .unwrap()
    .quiet();
    let result = match mode {
        Mode::Train => est.train(input_fn(true, input), Some(2), None).map(|_| ()),
        Mode::Eval => est.evaluate(input_fn(false, input), None).map(|_| ()),
        Mode::Predict => est.predict(input_fn(false, input), None).map(|_| ()),
    };
    match result {
        Ok(()) => panic!("{mode:?} with {mistake:?} / {input:?} succeeded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_mistake_is_a_clear_error_before_compiling() {
    use InputMistake as I;
    use Mistake as M;
    let table: Vec<(Mode, Mistake, InputMistake, Vec<&str>)> = vec![
        (
            Mode::Train,
            M::FeatureTypo,
            I::None,
            vec!["no feature `xx`; its features are `x`", THIS_FILE],
        ),
        (
            Mode::Eval,
            M::FeatureIsTheLabels,
            I::None,
            vec![
                "no feature `label`",
                "`label` is the labels component: the model_fn gets it as `labels`",
                THIS_FILE,
            ],
        ),
        (
            Mode::Eval,
            M::MetricName,
            I::None,
            vec![
                "the metric_fn asks for `class` (at estimator/tests/estimator/model_fn_mistakes.rs:",
                "the eval_metrics tensors are `labels`, `classes`, `logits`",
            ],
        ),
        (
            Mode::Eval,
            M::MetricShapes,
            I::None,
            vec![
                "the metric_fn failed: metric `accuracy` (at estimator/tests/estimator/model_fn_mistakes.rs:",
                "shapes [16] and [16, 3] are incompatible",
            ],
        ),
        (
            Mode::Eval,
            M::MetricTensorScalar,
            I::None,
            vec![
                "eval_metrics tensor `loss` is f32[] (made at estimator/tests/estimator/model_fn_mistakes.rs:",
                "must be batch-first: [16, ..]",
            ],
        ),
        (
            Mode::Eval,
            M::MetricTensorTwice,
            I::None,
            vec!["two eval_metrics tensors are named `classes`"],
        ),
        (
            Mode::Train,
            M::NoLossInTrain,
            I::None,
            vec!["in TRAIN mode the spec needs a loss", "spec sets train_op"],
        ),
        (
            Mode::Train,
            M::NoTrainOp,
            I::None,
            vec!["in TRAIN mode the spec needs a train_op", "spec sets loss"],
        ),
        (
            Mode::Eval,
            M::NoLossInEval,
            I::None,
            vec!["in EVAL mode the spec needs a loss", "spec sets eval_metrics"],
        ),
        (
            Mode::Eval,
            M::LossNotScalar,
            I::None,
            vec![
                "the loss must be a float scalar, but it is f32[16] (made at estimator/tests/estimator/model_fn_mistakes.rs:",
            ],
        ),
        (
            Mode::Train,
            M::FloatLabels,
            I::None,
            vec!["labels must be integer class ids, got f32[16]", THIS_FILE],
        ),
        (
            Mode::Train,
            M::MatmulShapes,
            I::None,
            vec!["matmul: cannot multiply f32[16,4] by f32[5,3]", THIS_FILE],
        ),
        (
            Mode::Eval,
            M::PoolingRank,
            I::None,
            vec!["max_pooling2d `max_pooling2d`: needs an NHWC input of rank 4, got an input of shape [16,4]"],
        ),
        (
            Mode::Train,
            M::HostCallNotScalar,
            I::None,
            vec!["host_call `lr` is f32[16] (made at estimator/tests/estimator/model_fn_mistakes.rs:", "must be a scalar"],
        ),
        (
            Mode::Train,
            M::ParamTypo,
            I::None,
            vec![
                "params has no key `learning_rat` (at estimator/tests/estimator/model_fn_mistakes.rs:",
                "its keys are `batch_size`, `learning_rate`",
            ],
        ),
        (
            Mode::Predict,
            M::NoPredictions,
            I::None,
            vec!["in PREDICT mode the spec needs predictions", "spec sets nothing"],
        ),
        (
            Mode::Predict,
            M::PredictionNotBatchFirst,
            I::None,
            vec![
                "prediction `mean` is f32[3] (made at estimator/tests/estimator/model_fn_mistakes.rs:",
                "must be batch-first: [16, ..]",
            ],
        ),
        (
            Mode::Train,
            M::None,
            I::LabelsNamedWrong,
            vec!["no component `labels` for the labels; its components are `x`, `label`"],
        ),
        (
            Mode::Train,
            M::None,
            I::NoLabels,
            vec![
                "the model_fn needs labels in TRAIN mode (at estimator/tests/estimator/model_fn_mistakes.rs:",
                "Input::new(dataset, \"label\")",
            ],
        ),
    ];
    assert!(table.len() >= 12);
    for (mode, mistake, input, wanted) in table {
        METRIC_FN_CALLS.store(0, Ordering::SeqCst);
        let e = error_of(mode, mistake, input);
        for w in wanted {
            assert!(
                e.contains(w),
                "{mode:?} {mistake:?} {input:?}: `{w}` not in:\n{e}"
            );
        }
        assert!(
            !e.contains("failed: the metric_fn failed"),
            "a doubled prefix: {e}"
        );
        // Found while tracing: the metric_fn ran at most once (its check), on no batch.
        assert!(
            METRIC_FN_CALLS.load(Ordering::SeqCst) <= 1,
            "{mistake:?} ran the metric_fn on batches"
        );
    }
}

/// The same model_fn without a mistake runs every mode (the table's errors are the mistakes').
#[test]
fn without_a_mistake_every_mode_runs() {
    let dir = temp_dir("mistakes_none");
    let config = RunConfig {
        model_dir: Some(dir.to_path_buf()),
        ..RunConfig::default()
    };
    let est = TpuEstimator::new(
        model_fn(Mistake::None),
        config,
        Params::new().with("learning_rate", 0.1),
        true,
        16,
        Some(16),
        Some(16),
    )
    .unwrap()
    .quiet();
    est.train(input_fn(true, InputMistake::None), Some(2), None)
        .unwrap();
    let r = est
        .evaluate(input_fn(false, InputMistake::None), None)
        .unwrap();
    assert_eq!(r.examples, 40);
    let n = est
        .predict(input_fn(false, InputMistake::None), None)
        .unwrap()
        .count();
    assert_eq!(n, 40);
}

/// The export traces the model_fn on its own: an absent params key is its error too.
#[test]
fn export_reports_an_absent_params_key() {
    let dir = temp_dir("mistakes_export");
    let make = |mistake| {
        let config = RunConfig {
            model_dir: Some(dir.to_path_buf()),
            ..RunConfig::default()
        };
        TpuEstimator::new(
            model_fn(mistake),
            config,
            Params::new().with("learning_rate", 0.1),
            true,
            16,
            Some(16),
            Some(16),
        )
        .unwrap()
        .quiet()
    };
    make(Mistake::None)
        .train(input_fn(true, InputMistake::None), Some(1), None)
        .unwrap();
    let serving = ServingInput::new().feature("x", ElementType::F32, &[4]);
    let e = make(Mistake::ParamTypo)
        .export(dir.join("export"), &serving)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "params has no key `learning_rat` (at estimator/tests/estimator/model_fn_mistakes.rs:"
        ),
        "{e}"
    );
}
