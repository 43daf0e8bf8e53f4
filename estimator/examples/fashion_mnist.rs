//! A second model, ported as a TF user would port their own: a Fashion-MNIST CNN with 3x3
//! `same` convolutions, batch normalization, max pooling, a dense 256 layer with dropout,
//! Adam with cosine decay, and accuracy, top-3 and mean loss over the whole test set. It
//! trains, evaluates every test image once, predicts and exports.
//!
//! ```text
//! cargo run --release --example fashion_mnist -- --data-dir DIR [--model-dir DIR]
//!     [--batch-size 64] [--train-steps 2000] [--iterations 50] [--learning-rate 0.001]
//!     [--mode train|evaluate|predict|export|all] [--export-dir DIR]
//!     [--warm-start-from TESSEL_OR_TF_CHECKPOINT] [--random-seed N]
//!     [--checkpoint-format safetensors|tf|both]
//! ```
//! `DIR` holds Fashion-MNIST's IDX files as distributed (`train-images-idx3-ubyte.gz`, ...);
//! `estimator/data/fashion_mnist_slice/` holds the first 512 training and 300 test images.
//! `--mode all` (the default) trains, evaluates the whole test set, predicts it and exports.

#[path = "common/console.rs"]
mod console;

use clap::Parser;
use std::path::{Path, PathBuf};
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::Tensor;
use tessel_estimator::checkpoint::WarmStart;
use tessel_estimator::estimator::{
    require_labels, EvalMetrics, EvalResult, Features, HostTensors, ServingInput,
};
use tessel_estimator::input::{idx_dataset_normalized, Dataset, Value};
use tessel_estimator::losses::{self, Reduction};
use tessel_estimator::metrics::MetricSet;
use tessel_estimator::model::layers::{
    batch_normalization, conv2d, dense, dropout, flatten, max_pooling2d, Activation, BatchNorm,
    Conv2d, Dense, Padding,
};
use tessel_estimator::model::optimizers::Adam;
use tessel_estimator::model::schedules::cosine_decay;
use tessel_estimator::model::{CrossShardOptimizer, Optimizer};
use tessel_estimator::{
    CheckpointFormat, EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuConfig,
    TpuEstimator, TpuEstimatorSpec,
};

#[derive(Parser)]
pub struct Flags {
    /// The directory of Fashion-MNIST's IDX files (plain or `.gz`).
    #[arg(long)]
    pub data_dir: PathBuf,
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    #[arg(long, default_value_t = 2000)]
    pub train_steps: u64,
    #[arg(long, default_value_t = 50)]
    pub iterations: u64,
    #[arg(long, default_value_t = 0.001)]
    pub learning_rate: f64,
    /// train | evaluate | predict | export | all (train, evaluate, predict, export).
    #[arg(long, default_value = "all")]
    pub mode: String,
    /// Where `export` writes (default: MODEL_DIR/export).
    #[arg(long)]
    pub export_dir: Option<PathBuf>,
    /// A tessel or TF checkpoint: training starts from its trainable variables; evaluate,
    /// predict and export on an empty model_dir restore it whole.
    #[arg(long)]
    pub warm_start_from: Option<PathBuf>,
    /// TF's `tf_random_seed`: seeds the initializers and dropout (a run is then reproducible).
    #[arg(long)]
    pub random_seed: Option<i64>,
    /// Checkpoints as tessel's safetensors, TF's tensor bundle (which TF restores), or both.
    #[arg(long, default_value = "safetensors")]
    pub checkpoint_format: CheckpointFormat,
}

/// What a run did, for the caller (the test) to check.
#[derive(Debug, Default)]
pub struct Summary {
    pub global_step: i64,
    pub eval: Option<EvalResult>,
    /// Predicted classes of the whole test set, in order.
    pub predicted: Vec<i32>,
    pub predict_accuracy: Option<f64>,
    pub export: Option<PathBuf>,
}

const CLASSES: i64 = 10;

pub(crate) fn model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let training = mode == Mode::Train;
    // Bias-free 3x3 convolutions: batch normalization's beta is the bias.
    let same = || Conv2d {
        padding: Padding::Same,
        use_bias: false,
        ..Conv2d::default()
    };
    let mut x = features["image"].clone();
    for filters in [32, 64] {
        x = conv2d(g, &x, filters, [3, 3], same())?;
        x = batch_normalization(g, &x, BatchNorm::default(), training)?.relu();
        x = max_pooling2d(g, &x, [2, 2], [2, 2], Padding::Valid)?;
    }
    let x = flatten(g, &x)?;
    let relu = Dense {
        activation: Activation::Relu,
        ..Dense::default()
    };
    let x = dense(g, &x, 256, relu)?;
    let x = dropout(g, &x, 0.3, training)?;
    let logits = dense(g, &x, CLASSES, Dense::default())?;
    if mode == Mode::Predict {
        let mut spec = TpuEstimatorSpec::new(mode);
        spec.predictions = vec![
            ("classes".into(), logits.argmax(1)),
            ("probabilities".into(), logits.softmax(1)),
        ];
        return Ok(spec);
    }
    let labels = require_labels(labels, mode)?;
    let loss = losses::sparse_softmax_cross_entropy(g, labels, &logits, None, Reduction::default());
    let train_op = match mode {
        Mode::Train => {
            let steps = params["train_steps"].as_i64().unwrap_or(2000);
            let lr = params["learning_rate"].as_f64().unwrap_or(0.001) as f32;
            let lr = cosine_decay(lr, &g.global_step.clone(), steps.max(1), 0.0)?;
            Some(CrossShardOptimizer::new(Adam::new(lr)).minimize(g, &loss)?)
        }
        _ => None,
    };
    let per_example =
        losses::sparse_softmax_cross_entropy(g, labels, &logits, None, Reduction::None);
    let metric_fn = |m: &mut MetricSet, t: &HostTensors| {
        m.accuracy("accuracy", &t["labels"], &t["classes"], None);
        m.top_k_accuracy("top_3", &t["labels"], &t["logits"], 3, None);
        m.mean("mean_loss", &t["per_example_loss"], None);
    };
    let tensors = vec![
        ("labels", labels.clone()),
        ("classes", logits.argmax(1)),
        ("logits", logits.clone()),
        ("per_example_loss", per_example),
    ];
    Ok(TpuEstimatorSpec {
        loss: Some(loss),
        train_op,
        eval_metrics: Some(EvalMetrics::new(metric_fn, tensors)),
        ..TpuEstimatorSpec::new(mode)
    })
}

/// The split's examples: `train-*` or `t10k-*` files of `dir`.
fn examples(dir: &Path, train: bool) -> Result<Dataset, EstimatorError> {
    let prefix = if train { "train" } else { "t10k" };
    let file = |kind: &str| {
        let plain = dir.join(format!("{prefix}-{kind}"));
        let gz = dir.join(format!("{prefix}-{kind}.gz"));
        if plain.is_file() {
            plain
        } else {
            gz
        }
    };
    // TF's `tf.cast(image, tf.float32) / 255.`, `tf.cast(label, tf.int32)`, and a channel.
    let ds = idx_dataset_normalized(
        ("image", file("images-idx3-ubyte")),
        ("label", file("labels-idx1-ubyte")),
    )?;
    Ok(ds.reshape("image", &[28, 28, 1])?)
}

fn input_fn(dir: PathBuf, train: bool) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |params: &Params| {
        let mut ds = examples(&dir, train)?.cache();
        if train {
            ds = ds.shuffle(1024, 7)?.repeat(None);
        }
        // Evaluation keeps the short last batch: the estimator pads it and masks the padding.
        let ds = ds.batch(params.batch_size() as u64, train)?.prefetch(2);
        Ok(Input::new(ds, "label"))
    }
}

pub fn run(flags: &Flags) -> Result<Summary, EstimatorError> {
    let config = RunConfig {
        model_dir: flags.model_dir.clone(),
        tf_random_seed: flags.random_seed,
        checkpoint_format: flags.checkpoint_format,
        tpu_config: TpuConfig {
            iterations_per_loop: flags.iterations,
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    let params = Params::new()
        .with("learning_rate", flags.learning_rate)
        .with("train_steps", flags.train_steps as i64);
    let b = flags.batch_size;
    let mut estimator = TpuEstimator::new(model_fn, config, params, true, b, Some(b), Some(b))?
        .with_progress(console::progress_bar());
    if let Some(from) = &flags.warm_start_from {
        estimator = estimator.with_warm_start(WarmStart::new(from));
    }
    let all = flags.mode == "all";
    let wants = |mode: &str| all || flags.mode == mode;
    if !["train", "evaluate", "predict", "export", "all"].contains(&flags.mode.as_str()) {
        return Err(EstimatorError::Value(format!(
            "unknown --mode {}: train, evaluate, predict, export or all",
            flags.mode
        )));
    }
    let mut summary = Summary::default();
    if wants("train") {
        let r = estimator.train(
            input_fn(flags.data_dir.clone(), true),
            None,
            Some(flags.train_steps),
        )?;
        summary.global_step = r.global_step;
        println!(
            "fashion_mnist train global_step={} loss={:.4} steps_per_sec={:.1}",
            r.global_step,
            r.final_loss.unwrap_or(f64::NAN),
            r.steps_per_sec
        );
    }
    if wants("evaluate") {
        let r = estimator.evaluate(input_fn(flags.data_dir.clone(), false), None)?;
        println!(
            "fashion_mnist evaluate global_step={} examples={} accuracy={:.4} top_3={:.4} mean_loss={:.4} loss={:.4}",
            r.global_step,
            r.examples,
            r.metric("accuracy").unwrap_or(f64::NAN),
            r.metric("top_3").unwrap_or(f64::NAN),
            r.metric("mean_loss").unwrap_or(f64::NAN),
            r.loss
        );
        summary.global_step = r.global_step;
        summary.eval = Some(r);
    }
    if wants("predict") {
        let labels: Vec<i32> = examples(&flags.data_dir, false)?
            .iter()
            .map(|e| {
                let e = e.map_err(|e| EstimatorError::Input(e.to_string()))?;
                match e.values.get(1) {
                    Some(Value::Dense(a)) => Ok(a.data.get_f64(0) as i32),
                    _ => Err(EstimatorError::Input("an example without a label".into())),
                }
            })
            .collect::<Result<_, _>>()?;
        for p in estimator.predict(input_fn(flags.data_dir.clone(), false), Some(&["classes"]))? {
            summary.predicted.push(p?["classes"].data.get_f64(0) as i32);
        }
        let n = summary.predicted.len();
        let correct = summary
            .predicted
            .iter()
            .zip(&labels)
            .filter(|(p, l)| p == l)
            .count();
        let accuracy = correct as f64 / n.max(1) as f64;
        println!("fashion_mnist predict examples={n} accuracy={accuracy:.4}");
        summary.predict_accuracy = Some(accuracy);
    }
    if wants("export") {
        let base = flags
            .export_dir
            .clone()
            .unwrap_or_else(|| estimator.model_dir().join("export"));
        let serving = ServingInput::new().feature("image", ElementType::F32, &[28, 28, 1]);
        let path = estimator.export(&base, &serving)?;
        println!("fashion_mnist exported {}", path.display());
        summary.export = Some(path);
    }
    Ok(summary)
}

#[allow(dead_code)] // the test includes this file as a module and calls `run`
fn main() {
    let flags = Flags::parse();
    console::install_logger();
    if let Err(e) = run(&flags) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
