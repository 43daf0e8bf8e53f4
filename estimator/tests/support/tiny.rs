//! A tiny model for the `estimator_*` tests: a 2-layer MLP with dropout (8 → 16 relu →
//! dropout 0.3 → 3) trained with Adam (so checkpoints hold slots) on 96 synthetic examples
//! whose class is the argmax of a fixed linear map of the features. A train call takes
//! milliseconds on the JIT, so the tests can afford many.
//!
//! `params` knobs: `learning_rate` (f64, default 0.01), `optimizer` ("adam" default, "sgd"),
//! `poison_step` (i64: from that global step on the loss gains a NaN that reaches every
//! gradient, so the variables turn NaN there), `poison_loss_step` (the same NaN in the loss only), `no_cross_shard` (any: a bare Adam),
//! `hidden` (i64, default 16: the first layer's units).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::estimator::{EvalMetrics, Features, HostTensors};
use tessel_estimator::input::{Dataset, DatasetError, Element, ElementSpec, Value, ValueSpec};
use tessel_estimator::metrics::MetricSet;
use tessel_estimator::model::layers::{dense, dropout, Activation, Dense};
use tessel_estimator::model::optimizers::{Adam, GradientDescent};
use tessel_estimator::model::threefry::HostStream;
use tessel_estimator::model::{CrossShardOptimizer, Optimizer};
use tessel_estimator::{
    EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuConfig, TpuEstimator,
    TpuEstimatorSpec,
};

pub const EXAMPLES: usize = 96;
pub const FEATURES: usize = 8;
pub const CLASSES: usize = 3;

/// The synthetic data set: features in [-1, 1), labels the argmax of `x · W` for a fixed W.
pub fn data() -> (Vec<f32>, Vec<i32>) {
    let mut s = HostStream::new([11, 0xDA7A]);
    let w: Vec<f64> = (0..FEATURES * CLASSES)
        .map(|_| 2.0 * s.uniform() - 1.0)
        .collect();
    let mut x = Vec::with_capacity(EXAMPLES * FEATURES);
    let mut y = Vec::with_capacity(EXAMPLES);
    for _ in 0..EXAMPLES {
        let row: Vec<f64> = (0..FEATURES).map(|_| 2.0 * s.uniform() - 1.0).collect();
        let scores: Vec<f64> = (0..CLASSES)
            .map(|c| (0..FEATURES).map(|i| row[i] * w[i * CLASSES + c]).sum())
            .collect();
        let label = (0..CLASSES)
            .max_by(|&a, &b| scores[a].total_cmp(&scores[b]))
            .unwrap();
        x.extend(row.iter().map(|&v| v as f32));
        y.push(label as i32);
    }
    (x, y)
}

/// The unbatched examples as a dataset with components `x` (f32 [8]) and `y` (s32 []).
pub fn examples() -> Dataset {
    let (x, y) = data();
    Dataset::from_tensor_slices(vec![
        (
            "x".into(),
            Array::new(
                ArrayShape::new(ElementType::F32, &[EXAMPLES as i64, FEATURES as i64]),
                ArrayData::F32(x),
            ),
        ),
        (
            "y".into(),
            Array::new(
                ArrayShape::new(ElementType::S32, &[EXAMPLES as i64]),
                ArrayData::S32(y),
            ),
        ),
    ])
    .expect("slices")
}

/// Training input: shuffled (buffer 32, seed 5), repeated forever, batched.
pub fn train_input(params: &Params) -> Result<Input, EstimatorError> {
    let ds = examples()
        .shuffle(32, 5)?
        .repeat(None)
        .batch(params.batch_size() as u64, true)?;
    Ok(Input::new(ds, "y"))
}

/// Evaluation input: the examples in order, batched (no repeat).
pub fn eval_input(params: &Params) -> Result<Input, EstimatorError> {
    let ds = examples().batch(params.batch_size() as u64, true)?;
    Ok(Input::new(ds, "y"))
}

/// Training input whose map fails on element `fail_at` (0-based, counting from the start of
/// this pipeline's first pass: the batch `fail_at / batch_size` cannot be made).
pub fn failing_input(fail_at: u64) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |params: &Params| {
        let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let ds = examples()
            .repeat(None)
            .map(
                |s: &ElementSpec| Ok(s.clone()),
                0,
                move |e: Element| {
                    let i = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i == fail_at {
                        return Err(DatasetError::Function {
                            op: "map",
                            index: i,
                            message: "injected failure".into(),
                        });
                    }
                    Ok(e)
                },
            )?
            .batch(params.batch_size() as u64, true)?;
        Ok(Input::new(ds, "y"))
    }
}

/// The spec of an example serialized as a record: 8 little-endian f32 then an i32 label.
pub fn record_spec() -> ElementSpec {
    ElementSpec {
        components: vec![
            (
                "x".into(),
                ValueSpec::Dense {
                    element_type: ElementType::F32,
                    dims: vec![Some(FEATURES as i64)],
                },
            ),
            (
                "y".into(),
                ValueSpec::Dense {
                    element_type: ElementType::S32,
                    dims: vec![],
                },
            ),
        ],
    }
}

/// Writes the examples to a TFRecord file (one record per example) with the crate's writer.
pub fn write_records(path: &Path) {
    use tessel_estimator::input::tfrecord::{Compression, RecordFileWriter};
    let (x, y) = data();
    let mut w = RecordFileWriter::create(path, Compression::None).expect("creates");
    for (row, label) in x.chunks(FEATURES).zip(&y) {
        let mut bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
        bytes.extend(label.to_le_bytes());
        w.write(&bytes).expect("writes");
    }
    w.commit().expect("commits");
}

/// Training input reading `path`'s records (see [`write_records`]), repeated, batched.
pub fn record_input(path: PathBuf) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |params: &Params| {
        let parse = |e: Element| -> Result<Element, DatasetError> {
            let bad = |m: &str| DatasetError::Function {
                op: "map",
                index: 0,
                message: m.to_string(),
            };
            let Some(Value::Bytes { items, .. }) = e.values.first() else {
                return Err(bad("not a record"));
            };
            let b = &items[0];
            if b.len() != 4 * FEATURES + 4 {
                return Err(bad("record of the wrong length"));
            }
            let f = |i: usize| [b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]];
            let x: Vec<f32> = (0..FEATURES).map(|i| f32::from_le_bytes(f(i))).collect();
            let y = i32::from_le_bytes(f(FEATURES));
            Ok(Element::new(vec![
                Value::Dense(Array::new(
                    ArrayShape::new(ElementType::F32, &[FEATURES as i64]),
                    ArrayData::F32(x),
                )),
                Value::Dense(Array::new(
                    ArrayShape::new(ElementType::S32, &[]),
                    ArrayData::S32(vec![y]),
                )),
            ]))
        };
        let ds = tessel_estimator::input::tfrecord_dataset(
            std::slice::from_ref(&path),
            Default::default(),
        )
        .map(|_| Ok(record_spec()), 0, parse)?
        .repeat(None)
        .batch(params.batch_size() as u64, true)?;
        Ok(Input::new(ds, "y"))
    }
}

/// The tiny model_fn. TRAIN: Adam (or SGD) wrapped in CrossShardOptimizer, host_call
/// `learning_rate` and `batch_accuracy`. EVAL: accuracy and mean of the labels (a metric
/// checkable on the host).
pub fn model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let relu = Dense {
        activation: Activation::Relu,
        ..Dense::default()
    };
    let hidden = params.get("hidden").and_then(|p| p.as_i64()).unwrap_or(16);
    let h = dense(g, &features["x"], hidden, relu)?;
    let h = dropout(g, &h, 0.3, mode == Mode::Train)?;
    let logits = dense(g, &h, CLASSES as i64, Dense::default())?;
    let labels = labels.ok_or_else(|| EstimatorError::ModelFn("no PREDICT".into()))?;
    let onehot = labels.one_hot(CLASSES as i64, ElementType::F32);
    let mut loss = logits
        .softmax_cross_entropy_with_logits(&onehot)
        .reduce_mean(&[], false);
    let classes = logits.argmax(1);
    let mut spec = TpuEstimatorSpec::new(mode);
    if mode == Mode::Eval {
        spec.loss = Some(loss);
        let metric_fn = |m: &mut MetricSet, t: &HostTensors| {
            m.accuracy("accuracy", &t["labels"], &t["classes"], None);
            m.mean("label_mean", &t["labels_f"], None);
        };
        spec.eval_metrics = Some(EvalMetrics::new(
            metric_fn,
            vec![
                ("labels", labels.clone()),
                ("classes", classes),
                ("labels_f", labels.cast(ElementType::F32)),
            ],
        ));
        return Ok(spec);
    }
    if let Some(at) = params.get("poison_step").and_then(|p| p.as_i64()) {
        // s = at - 0.5 - step is negative from global step `at` on, so log(s) is NaN there
        // and, times the logits' mean, makes every variable's gradient NaN.
        let step = g.global_step.cast(ElementType::F32);
        let s = (step * -1.0) + (at as f32 - 0.5);
        loss = loss + s.log() * logits.reduce_mean(&[], false);
    }
    if let Some(at) = params.get("poison_loss_step").and_then(|p| p.as_i64()) {
        // The same NaN added to the loss alone: no variable's gradient depends on it.
        let step = g.global_step.cast(ElementType::F32);
        let s = (step * -1.0) + (at as f32 - 0.5);
        loss = loss + s.log();
    }
    spec.loss = Some(loss.clone());
    let lr = params
        .get("learning_rate")
        .and_then(|p| p.as_f64())
        .unwrap_or(0.01) as f32;
    let hit = classes
        .cast(ElementType::F32)
        .equal(&labels.cast(ElementType::F32))
        .cast(ElementType::F32)
        .reduce_mean(&[], false);
    let lr_t = g.tracer.scalar(lr as f64, ElementType::F32);
    spec.host_call = vec![
        ("learning_rate".into(), lr_t),
        ("batch_accuracy".into(), hit),
    ];
    let sgd = params.get("optimizer").and_then(|p| p.as_str()) == Some("sgd");
    let no_cross = params.get("no_cross_shard").is_some();
    spec.train_op = Some(match (sgd, no_cross) {
        (true, false) => CrossShardOptimizer::new(GradientDescent::new(lr)).minimize(g, &loss)?,
        (false, false) => CrossShardOptimizer::new(Adam::new(lr)).minimize(g, &loss)?,
        (_, true) => Adam::new(lr).minimize(g, &loss)?,
    });
    Ok(spec)
}

/// A RunConfig for the tiny model in `dir`: seed 7, checkpoints every `ckpt_steps`.
pub fn config(dir: &Path, iterations_per_loop: u64, ckpt_steps: u64) -> RunConfig {
    RunConfig {
        model_dir: Some(dir.to_path_buf()),
        save_checkpoints_steps: Some(ckpt_steps),
        tpu_config: TpuConfig {
            iterations_per_loop,
            ..TpuConfig::default()
        },
        tf_random_seed: Some(7),
        ..RunConfig::default()
    }
}

/// A quiet estimator for the tiny model, global train batch 8, eval batch 8.
pub fn estimator(config: RunConfig, params: Params) -> TpuEstimator {
    let shards = config.num_shards();
    TpuEstimator::new(model_fn, config, params, shards > 1, 8, Some(8), None)
        .expect("the estimator is valid")
        .quiet()
}

/// A fresh empty directory under the system temp dir for one test, removed when the test
/// ends (kept when it fails, to look at). Derefs to its path.
pub struct TestDir(PathBuf);

impl std::ops::Deref for TestDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn temp_dir(name: &str) -> TestDir {
    let dir = std::env::temp_dir().join(format!(
        "tessel_esttest_{name}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TestDir(dir)
}

/// The files in `dir` (names only, sorted).
pub fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The checkpoint files (`model.ckpt-N.safetensors`) in `dir`, by step.
pub fn checkpoint_steps(dir: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = files(dir)
        .iter()
        .filter_map(|f| {
            f.strip_prefix("model.ckpt-")?
                .strip_suffix(".safetensors")?
                .parse()
                .ok()
        })
        .collect();
    v.sort();
    v
}

pub fn ckpt_bytes(dir: &Path, step: i64) -> Vec<u8> {
    std::fs::read(dir.join(format!("model.ckpt-{step}.safetensors")))
        .unwrap_or_else(|e| panic!("model.ckpt-{step} in {}: {e}", dir.display()))
}
