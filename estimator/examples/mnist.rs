//! The seed's MNIST program (TPUEstimator's guide), ported line by line: the same model_fn,
//! input_fn, flags and log lines. See `docs/estimator.md` for the side-by-side port.
//!
//! ```text
//! cargo run --release --example mnist -- [--model-dir DIR] [--train-file F --eval-file F]
//!     [--batch-size 128] [--train-steps 2000] [--eval-steps 78] [--iterations 50]
//!     [--num-shards 1] [--learning-rate 0.05] [--use-tpu true]
//!     [--mode train|evaluate|train_and_evaluate|predict|export]   (--eval-steps 0: the whole eval set)
//!     [--warm-start-from TESSEL_OR_TF_CHECKPOINT]
//!     [--predictions-out FILE.safetensors] (predict) [--export-dir DIR] (export)
//! ```
//! With no file flags it reads the MNIST IDX files bundled in `estimator/data/mnist/`.

use clap::Parser;
use std::path::PathBuf;
use std::time::Instant;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::checkpoint::WarmStart;
use tessel_estimator::estimator::{
    require_labels, EvalMetrics, EvalSpec, Features, ServingInput, TrainSpec,
};
use tessel_estimator::input::parse::{
    decode_raw, parse_single_example, FeatureDType, ParseSpec, RawType,
};
use tessel_estimator::input::tfrecord::ReaderOptions;
use tessel_estimator::input::{
    tfrecord_dataset, Dataset, DatasetError, Element, ElementSpec, Value, ValueSpec,
};
use tessel_estimator::losses::{self, Reduction};
use tessel_estimator::model::layers::{
    conv2d, dense, dropout, max_pooling2d, Activation, Conv2d, Dense, Padding,
};
use tessel_estimator::model::optimizers::GradientDescent;
use tessel_estimator::model::schedules::exponential_decay;
use tessel_estimator::model::{CrossShardOptimizer, Optimizer};
use tessel_estimator::{
    mnist_data, EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuConfig, TpuEstimator,
    TpuEstimatorSpec,
};

/// The seed's FLAGS.
#[derive(Parser)]
struct Flags {
    #[arg(long)]
    model_dir: Option<PathBuf>,
    #[arg(long)]
    train_file: Option<PathBuf>,
    #[arg(long)]
    eval_file: Option<PathBuf>,
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    #[arg(long, default_value_t = 2000)]
    train_steps: u64,
    /// Evaluation batches; 0 evaluates the whole eval set once (the last batch padded).
    #[arg(long, default_value_t = 78)]
    eval_steps: u64,
    /// train | evaluate | train_and_evaluate | predict | export (train, then evaluate, when
    /// not given).
    #[arg(long)]
    mode: Option<String>,
    /// `--mode export`: the export's base directory.
    #[arg(long)]
    export_dir: Option<PathBuf>,
    /// `--mode predict`: write `classes` s32[N] and `probabilities` f32[N,10] here.
    #[arg(long)]
    predictions_out: Option<PathBuf>,
    #[arg(long, default_value_t = 50)]
    iterations: u64,
    #[arg(long, default_value_t = 1)]
    num_shards: usize,
    #[arg(long, default_value_t = 0.05)]
    learning_rate: f64,
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    use_tpu: bool,
    /// A tessel or TF checkpoint (a model_dir or a checkpoint path) whose trainable variables
    /// start training, or are evaluated directly when the model_dir has no checkpoint.
    #[arg(long)]
    warm_start_from: Option<PathBuf>,
}

fn model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let same_relu = || Conv2d {
        padding: Padding::Same,
        activation: Activation::Relu,
        ..Conv2d::default()
    };
    let x = features["image"].reshape(&[-1, 28, 28, 1]);
    let x = conv2d(g, &x, 32, [5, 5], same_relu())?;
    let x = max_pooling2d(g, &x, [2, 2], [2, 2], Padding::Valid)?;
    let x = conv2d(g, &x, 64, [5, 5], same_relu())?;
    let x = max_pooling2d(g, &x, [2, 2], [2, 2], Padding::Valid)?;
    let relu = Dense {
        activation: Activation::Relu,
        ..Dense::default()
    };
    let x = dense(g, &x.reshape(&[-1, 7 * 7 * 64]), 128, relu)?;
    let x = dropout(g, &x, 0.4, mode == Mode::Train)?;
    let logits = dense(g, &x, 10, Dense::default())?;
    if mode == Mode::Predict {
        let mut spec = TpuEstimatorSpec::new(mode);
        spec.predictions = vec![
            ("classes".into(), logits.argmax(1)),
            ("probabilities".into(), logits.softmax(1)),
        ];
        return Ok(spec);
    }
    let labels = require_labels(labels, mode)?;
    let onehot = labels.one_hot(10, ElementType::F32);
    // In EVAL the mean is over the real examples: the estimator pads the last batch and the
    // losses functions weight by its padding mask.
    let loss = losses::softmax_cross_entropy(g, &onehot, &logits, None, 0.0, Reduction::default());
    let mut spec = TpuEstimatorSpec::new(mode);
    spec.loss = Some(loss.clone());
    if mode == Mode::Eval {
        let metric_fn = |m: &mut tessel_estimator::metrics::MetricSet,
                         t: &tessel_estimator::estimator::HostTensors| {
            m.accuracy("accuracy", &t["labels"], &t["classes"], None)
        };
        spec.eval_metrics = Some(EvalMetrics::new(
            metric_fn,
            vec![("labels", labels.clone()), ("classes", logits.argmax(1))],
        ));
        return Ok(spec);
    }
    let lr = params["learning_rate"].as_f64().unwrap_or(0.05) as f32;
    let lr = exponential_decay(lr, &g.global_step.clone(), 100000, 0.96, false)?;
    spec.host_call = vec![("learning_rate".into(), lr.clone())];
    let optimizer = CrossShardOptimizer::new(GradientDescent::new(lr));
    spec.train_op = Some(optimizer.minimize(g, &loss)?);
    Ok(spec)
}

/// The element every input_fn gives: a normalized image and its label.
fn example_spec() -> ElementSpec {
    ElementSpec {
        components: vec![
            (
                "image".into(),
                ValueSpec::Dense {
                    element_type: ElementType::F32,
                    dims: vec![Some(784)],
                },
            ),
            (
                "label".into(),
                ValueSpec::Dense {
                    element_type: ElementType::S32,
                    dims: vec![],
                },
            ),
        ],
    }
}

/// `tf.cast(decode_raw(image_raw, uint8), float32) * (1. / 255) - 0.5`.
fn normalize(pixels: &[u8]) -> Array {
    let v: Vec<f32> = pixels
        .iter()
        .map(|&p| p as f32 * (1.0 / 255.0) - 0.5)
        .collect();
    Array::new(ArrayShape::new(ElementType::F32, &[784]), ArrayData::F32(v))
}

fn fail(index: u64, message: String) -> DatasetError {
    DatasetError::Function {
        op: "map",
        index,
        message,
    }
}

/// The seed's parser: `parse_single_example` of `image_raw` and `label`, `decode_raw`, normalize.
fn tfrecord_source(path: &PathBuf) -> Result<Dataset, EstimatorError> {
    let spec = ParseSpec::new()
        .fixed("image_raw", &[], FeatureDType::String)?
        .fixed("label", &[], FeatureDType::Int64)?;
    let options = ReaderOptions {
        buffer_size: 8 << 20,
        ..ReaderOptions::default()
    };
    let parser = move |e: Element| -> Result<Element, DatasetError> {
        let Some(Value::Bytes { items, .. }) = e.values.first() else {
            return Err(fail(0, "not a record".into()));
        };
        let f = parse_single_example(&items[0], &spec).map_err(|err| fail(0, err.to_string()))?;
        let (Value::Bytes { items, .. }, label) = (&f.values[0], f.values[1].clone()) else {
            return Err(fail(0, "image_raw".into()));
        };
        let raw =
            decode_raw(&items[0], RawType::U8, true).map_err(|err| fail(0, err.to_string()))?;
        let ArrayData::U8(pixels) = &raw.data else {
            return Err(fail(0, "image_raw".into()));
        };
        Ok(Element {
            values: vec![Value::Dense(normalize(pixels)), label],
        })
    };
    Ok(tfrecord_dataset(std::slice::from_ref(path), options).map(
        |_| Ok(example_spec()),
        2,
        parser,
    )?)
}

/// The same elements from the bundled IDX files.
fn idx_source(train: bool) -> Result<Dataset, EstimatorError> {
    let split =
        mnist_data::load(&mnist_data::bundled_dir(), train).map_err(EstimatorError::Input)?;
    let n = split.labels.shape.dims[0];
    let images = Array::new(
        ArrayShape::new(ElementType::U8, &[n, 784]),
        split.images.data,
    );
    let dataset = Dataset::from_tensor_slices(vec![
        ("image".into(), images),
        ("label".into(), split.labels),
    ])?;
    let to_example = |e: Element| -> Result<Element, DatasetError> {
        let (Value::Dense(image), Value::Dense(label)) = (&e.values[0], &e.values[1]) else {
            return Err(fail(0, "not dense".into()));
        };
        let ArrayData::U8(pixels) = &image.data else {
            return Err(fail(0, "image is not u8".into()));
        };
        let label = Array::new(
            ArrayShape::new(ElementType::S32, &[]),
            ArrayData::S32(vec![label.data.get_f64(0) as i32]),
        );
        Ok(Element {
            values: vec![Value::Dense(normalize(pixels)), Value::Dense(label)],
        })
    };
    Ok(dataset.map(|_| Ok(example_spec()), 2, to_example)?)
}

/// The seed's input_fn: parse, cache, repeat when training, batch with drop_remainder, prefetch.
fn input_fn(
    file: Option<PathBuf>,
    train: bool,
) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |params: &Params| {
        let source = match &file {
            Some(path) => tfrecord_source(path)?,
            None => idx_source(train)?,
        };
        let mut ds = source.cache();
        if train {
            ds = ds.repeat(None);
        }
        // Evaluation keeps the short last batch: the estimator pads and masks it.
        let ds = ds.batch(params.batch_size() as u64, train)?.prefetch(4);
        Ok(Input::new(ds, "label"))
    }
}

fn main() {
    let flags = Flags::parse();
    if let Err(e) = run(&flags) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(flags: &Flags) -> Result<(), EstimatorError> {
    let config = RunConfig {
        model_dir: flags.model_dir.clone(),
        save_checkpoints_steps: Some(1_000_000_000),
        tpu_config: TpuConfig {
            iterations_per_loop: flags.iterations,
            num_shards: Some(flags.num_shards),
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    let params = Params::new().with("learning_rate", flags.learning_rate);
    let estimator = TpuEstimator::new(
        model_fn,
        config,
        params,
        flags.use_tpu,
        flags.batch_size,
        Some(flags.batch_size),
        Some(flags.batch_size),
    )?;
    let estimator = match &flags.warm_start_from {
        Some(from) => estimator.with_warm_start(WarmStart::new(from)),
        None => estimator,
    };
    match flags.mode.as_deref() {
        Some("predict") => return predict(&estimator, flags),
        Some("export") => return export(&estimator, flags),
        _ => {}
    }
    let eval_steps = (flags.eval_steps > 0).then_some(flags.eval_steps);
    let train_input = || input_fn(flags.train_file.clone(), true);
    let eval_input = || input_fn(flags.eval_file.clone(), false);
    let mode = flags.mode.as_deref().unwrap_or("train+evaluate");
    let (do_train, do_eval) = match mode {
        "train" => (true, false),
        "evaluate" => (false, true),
        "train+evaluate" => (true, true),
        "train_and_evaluate" => {
            let eval = estimator.train_and_evaluate(
                &TrainSpec {
                    input_fn: train_input(),
                    max_steps: flags.train_steps,
                },
                &EvalSpec {
                    input_fn: eval_input(),
                    steps: eval_steps,
                    every_n_steps: Some(flags.iterations.max(1) * 10),
                },
            )?;
            println!(
                "tessel global_step={} examples={} accuracy={:.4} loss={:.4} model_dir={}",
                eval.global_step,
                eval.examples,
                eval.metric("accuracy").unwrap_or(f64::NAN),
                eval.loss,
                estimator.model_dir().display()
            );
            return Ok(());
        }
        other => {
            return Err(EstimatorError::Value(format!(
                "unknown --mode {other}: train, evaluate, train_and_evaluate, predict or export"
            )))
        }
    };
    let t0 = Instant::now();
    let trained = if do_train {
        Some(estimator.train(train_input(), None, Some(flags.train_steps))?)
    } else {
        None
    };
    let train_wall = t0.elapsed().as_secs_f64();
    if !do_eval {
        println!(
            "tessel train_wall_s={train_wall:.1} model_dir={}",
            estimator.model_dir().display()
        );
        return Ok(());
    }
    let t0 = Instant::now();
    let eval = estimator.evaluate(eval_input(), eval_steps)?;
    let eval_wall = t0.elapsed().as_secs_f64();
    let Some(trained) = trained else {
        println!(
            "tessel eval_wall_s={eval_wall:.1} global_step={} examples={} accuracy={:.4} loss={:.4} model_dir={}",
            eval.global_step,
            eval.examples,
            eval.metric("accuracy").unwrap_or(f64::NAN),
            eval.loss,
            estimator.model_dir().display()
        );
        return Ok(());
    };
    println!(
        "tessel train_wall_s={train_wall:.1} ms_per_step={:.2} loop_steps_per_sec={:.1} compile_s={:.2} checkpoint_ms={:.1} eval_wall_s={eval_wall:.1} examples={} accuracy={:.4} loss={:.4} model_dir={}",
        1000.0 * train_wall / flags.train_steps as f64,
        trained.steps_per_sec,
        trained.compile_secs,
        1000.0 * trained.checkpoint_secs / trained.checkpoints.max(1) as f64,
        eval.examples,
        eval.metric("accuracy").unwrap_or(f64::NAN),
        eval.loss,
        estimator.model_dir().display()
    );
    Ok(())
}

/// `--mode predict`: every example of the eval set (the last batch padded, its padding
/// stripped), accuracy from the classes, examples/s, and `--predictions-out`.
fn predict(estimator: &TpuEstimator, flags: &Flags) -> Result<(), EstimatorError> {
    let file = flags.eval_file.clone();
    let source = move || match &file {
        Some(path) => tfrecord_source(path),
        None => idx_source(false),
    };
    let labels: Vec<i32> = source()?
        .iter()
        .map(|e| match e.map(|e| e.values.into_iter().nth(1)) {
            Ok(Some(Value::Dense(a))) => Ok(a.data.get_f64(0) as i32),
            Ok(_) => Err(EstimatorError::Input("an example without a label".into())),
            Err(e) => Err(EstimatorError::Input(e.to_string())),
        })
        .collect::<Result<_, _>>()?;
    let input = move |params: &Params| {
        let ds = source()?
            .cache()
            .batch(params.batch_size() as u64, false)?
            .prefetch(4);
        Ok(Input::new(ds, "label"))
    };
    // The rate excludes the setup (trace, restore, compile: TF's graph build and session
    // creation): it runs from predict()'s return to the last example.
    let t0 = Instant::now();
    let predictions = estimator.predict(input, None)?;
    let ready = Instant::now();
    let mut classes = Vec::new();
    let mut probabilities = Vec::new();
    for p in predictions {
        let p = p?;
        classes.push(p["classes"].data.get_f64(0) as i32);
        let row = &p["probabilities"];
        probabilities.extend((0..row.len()).map(|i| row.data.get_f64(i) as f32));
    }
    let n = classes.len();
    let correct = classes.iter().zip(&labels).filter(|(c, l)| c == l).count();
    println!(
        "tessel predict examples={n} accuracy={:.4} setup_s={:.2} predict_s={:.2} examples_per_sec={:.0} wall_examples_per_sec={:.0}",
        correct as f64 / n.max(1) as f64,
        (ready - t0).as_secs_f64(),
        ready.elapsed().as_secs_f64(),
        n as f64 / ready.elapsed().as_secs_f64(),
        n as f64 / t0.elapsed().as_secs_f64(),
    );
    if let Some(out) = &flags.predictions_out {
        let tensors = vec![
            (
                "classes".to_string(),
                Array::new(
                    ArrayShape::new(ElementType::S32, &[n as i64]),
                    ArrayData::S32(classes),
                ),
            ),
            (
                "probabilities".to_string(),
                Array::new(
                    ArrayShape::new(ElementType::F32, &[n as i64, 10]),
                    ArrayData::F32(probabilities),
                ),
            ),
        ];
        tessel_runtime::host_io::write_safetensors(out, &tensors).map_err(|e| {
            EstimatorError::Write {
                what: out.display().to_string(),
                message: e.to_string(),
            }
        })?;
        println!("wrote {}", out.display());
    }
    Ok(())
}

/// `--mode export --export-dir DIR`: the serving input is `image` f32[batch, 784], normalized
/// as in training.
fn export(estimator: &TpuEstimator, flags: &Flags) -> Result<(), EstimatorError> {
    let base = flags
        .export_dir
        .clone()
        .ok_or_else(|| EstimatorError::Value("--mode export needs --export-dir".into()))?;
    let serving = ServingInput::new().feature("image", ElementType::F32, &[784]);
    let path = estimator.export(&base, &serving)?;
    println!("exported {}", path.display());
    Ok(())
}
