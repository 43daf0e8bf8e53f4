//! The guide's MNIST program (TPUEstimator's guide), ported line by line: the same model_fn,
//! input_fn, flags and log lines. See `docs/estimator.md` for the side-by-side port.
//!
//! ```text
//! cargo run --release --example mnist -- [--model-dir DIR] [--train-file F --eval-file F]
//!     [--batch-size 128] [--train-steps 2000] [--eval-steps 78] [--iterations 50]
//!     [--num-shards 1] [--learning-rate 0.05] [--use-tpu true]
//!     [--mode train|evaluate|train_and_evaluate|predict|export]   (--eval-steps 0: the whole eval set)
//!     [--warm-start-from TESSEL_OR_TF_CHECKPOINT] [--checkpoint-format safetensors|tf|both]
//!     [--predictions-out FILE.safetensors] (predict) [--export-dir DIR] (export)
//!     [--save-checkpoints-steps N | --save-checkpoints-secs 600] [--keep-checkpoint-max 5]
//!     [--fall-back-to-intact-checkpoint] [--random-seed N] [--early-stopping-steps N]
//!     [--trace-dir DIR] [--fast-allreduce]   (several hosts: MPI's own all-reduce)
//!     [--eval-start-delay-secs 120] [--eval-throttle-secs 600] [--eval-poll-secs 1]
//!     [--eval-timeout-secs S]   (the TF_CONFIG evaluator task's waiting)
//! ```
//! With no file flags it reads the MNIST IDX files bundled in `estimator/data/mnist/`.
//! `TF_CONFIG` is honoured as TF's programs honour it: with `--mode train_and_evaluate`, the
//! chief and the workers train and the `evaluator` task evaluates each new checkpoint.
//!
//! Signals: while training or evaluating, the first Ctrl-C (SIGINT) or SIGTERM stops after
//! the running loop (training saves a checkpoint first) and exits with 130 or 143; a second
//! one, or one in any other phase, exits at once. SIGTERM is how a scheduler or a preemptible
//! VM stops a job: the rerun of the same command resumes from the checkpoint saved.

#[path = "common/console.rs"]
mod console;
#[path = "common/mnist_data.rs"]
mod mnist_data;

use clap::Parser;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::checkpoint::WarmStart;
use tessel_estimator::estimator::tf_config::TaskType;
use tessel_estimator::estimator::{
    require_labels, ContinuousEval, EvalMetrics, EvalSpec, Features, ServingInput, TrainSpec,
};
use tessel_estimator::hooks::{stop_if_no_decrease_hook, Hook, ProfilerHook};
use tessel_estimator::input::parse::{FeatureDType, ParseSpec, RawType};
use tessel_estimator::input::tfrecord::ReaderOptions;
use tessel_estimator::input::{idx_dataset_normalized, tfrecord_dataset, Dataset, Value};
use tessel_estimator::losses::{self, Reduction};
use tessel_estimator::model::layers::{
    conv2d, dense, dropout, max_pooling2d, Activation, Conv2d, Dense, Padding,
};
use tessel_estimator::model::optimizers::GradientDescent;
use tessel_estimator::model::schedules::exponential_decay;
use tessel_estimator::model::{CrossShardOptimizer, Optimizer};
use tessel_estimator::{
    CheckpointFormat, EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuConfig,
    TpuEstimator, TpuEstimatorSpec,
};

/// The guide's FLAGS.
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
    /// Save a checkpoint every N steps (at the end of the loop that reaches it).
    #[arg(long, conflicts_with = "save_checkpoints_secs")]
    save_checkpoints_steps: Option<u64>,
    /// Save a checkpoint every N seconds: TF's default, 600, when neither is given.
    #[arg(long)]
    save_checkpoints_secs: Option<u64>,
    /// Keep at most N checkpoints; 0 keeps all.
    #[arg(long, default_value_t = 5)]
    keep_checkpoint_max: usize,
    /// When the latest checkpoint is damaged, resume from the newest intact one instead of
    /// stopping with an error that lists them.
    #[arg(long)]
    fall_back_to_intact_checkpoint: bool,
    /// TF's `tf_random_seed`: seeds the initializers and dropout, so a run and its resumes
    /// are bitwise reproducible.
    #[arg(long)]
    random_seed: Option<i64>,
    /// Checkpoints as tessel's safetensors, TF's tensor bundle (which TF restores), or both.
    #[arg(long, default_value = "safetensors")]
    checkpoint_format: CheckpointFormat,
    /// Early stopping (TF's `stop_if_no_decrease_hook`): training evaluates in process every
    /// `--iterations` x 10 steps and stops when the eval loss has not decreased for N steps.
    #[arg(long)]
    early_stopping_steps: Option<u64>,
    /// Write a trace of 3 training loops (from the second on) to DIR/timeline-<step>.json
    /// (Perfetto, chrome://tracing) and DIR/plugins/profile/ (TensorBoard), with TF's
    /// `ProfilerHook`.
    #[arg(long)]
    trace_dir: Option<PathBuf>,
    /// On several hosts (mpirun): the gradients' sums over the hosts use MPI's own
    /// all-reduce (`RunConfig::fast_allreduce`: faster, not bitwise the one-process result).
    #[arg(long)]
    fast_allreduce: bool,
    /// The TF_CONFIG evaluator task: seconds before it first looks for a checkpoint (TF's
    /// `start_delay_secs`).
    #[arg(long, default_value_t = 120.0)]
    eval_start_delay_secs: f64,
    /// The evaluator task: seconds at least between the starts of two evaluations (TF's
    /// `throttle_secs`).
    #[arg(long, default_value_t = 600.0)]
    eval_throttle_secs: f64,
    /// The evaluator task: how often it looks for a new checkpoint.
    #[arg(long, default_value_t = 1.0)]
    eval_poll_secs: f64,
    /// The evaluator task: end when no new checkpoint came for this long (default: wait until
    /// the `--train-steps` checkpoint).
    #[arg(long)]
    eval_timeout_secs: Option<f64>,
}

/// The evaluator task's waiting, from the flags.
fn continuous_eval(flags: &Flags) -> Result<ContinuousEval, EstimatorError> {
    let secs = |flag: &str, v: f64| {
        Duration::try_from_secs_f64(v).map_err(|_| {
            EstimatorError::Value(format!(
                "--{flag} must be a number of seconds >= 0, given: {v}"
            ))
        })
    };
    Ok(ContinuousEval {
        name: None,
        start_delay: secs("eval-start-delay-secs", flags.eval_start_delay_secs)?,
        throttle: secs("eval-throttle-secs", flags.eval_throttle_secs)?,
        poll_interval: secs("eval-poll-secs", flags.eval_poll_secs)?,
        timeout: flags
            .eval_timeout_secs
            .map(|t| secs("eval-timeout-secs", t))
            .transpose()?,
    })
}

pub(crate) fn model_fn(
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

/// The guide's parser: `parse_single_example` of `image_raw` and `label`, then
/// `tf.cast(decode_raw(image_raw, uint8), float32) * (1. / 255) - 0.5` with `set_shape([784])`.
fn tfrecord_source(path: &Path) -> Result<Dataset, EstimatorError> {
    let spec = ParseSpec::new()
        .fixed("image_raw", &[], FeatureDType::String)?
        .fixed("label", &[], FeatureDType::Int64)?;
    let options = ReaderOptions {
        buffer_size: 8 << 20,
        ..ReaderOptions::default()
    };
    Ok(tfrecord_dataset(&[path], options)
        .parse_example(spec, 2)?
        .decode_raw("image_raw", "image", RawType::U8, &[784])?
        .cast("image", ElementType::F32)?
        .scale("image", 1.0 / 255.0, -0.5)?)
}

/// The same elements from the bundled IDX files (MD5-checked): images in [0, 1], flattened
/// and shifted to [-0.5, 0.5) as the parser does.
fn idx_source(train: bool) -> Result<Dataset, EstimatorError> {
    let dir = mnist_data::bundled_dir();
    let [images, labels] = if train { [0, 1] } else { [2, 3] }.map(|i| mnist_data::FILES[i]);
    for (name, md5) in [images, labels] {
        mnist_data::check_md5(&dir.join(name), md5).map_err(EstimatorError::Input)?;
    }
    let ds = idx_dataset_normalized(("image", dir.join(images.0)), ("label", dir.join(labels.0)))?;
    Ok(ds.reshape("image", &[784])?.scale("image", 1.0, -0.5)?)
}

/// The guide's input_fn: parse, cache, repeat when training, batch with drop_remainder, prefetch.
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
        let mut ds = ds.batch(params.batch_size() as u64, train)?;
        // On several hosts each trains on its slice of every global batch (TF's PER_HOST_V1:
        // batch_size is the per-host batch, the host's index is params["context"]).
        if params.num_hosts() > 1 {
            ds = ds.shard(params.num_hosts() as u64, params.host_index() as u64)?;
        }
        let ds = ds.prefetch(4);
        Ok(Input::new(ds, "label"))
    }
}

fn main() {
    let flags = Flags::parse();
    console::install_logger();
    let signals = StopSignals::default();
    let job = job::Job::join();
    if let Err(e) = job.as_ref().map_err(Clone::clone).and_then(|_| {
        run(&flags, &signals).map_err(|e| {
            match &e {
                EstimatorError::Interrupted { step } if signals.terminated() => eprintln!(
                    "WARNING: stopped by SIGTERM (preemption) at step {step}: its checkpoint is saved, and running the same command again resumes from it."
                ),
                _ => eprintln!("{}error: {e}", job::prefix()),
            }
            (e.to_string(), signals.exit_code(&e))
        })
    }) {
        if let Ok(job) = &job {
            job.finish(Some(&e.0));
        } else {
            eprintln!("error: {}", e.0);
        }
        std::process::exit(e.1);
    }
    if let Ok(job) = &job {
        job.finish(None);
    }
}

/// The MPI job this process runs in (`--features mpi`, started by `mpirun`): each process
/// trains its block of the shards, and the chief (host 0) alone writes the model_dir and
/// evaluates, predicts or exports.
mod job {
    pub struct Job {
        #[cfg(feature = "mpi")]
        world: Option<&'static tessel_runtime::session::MpiWorld>,
    }

    impl Job {
        /// Joins the job this process was started in, if any.
        pub fn join() -> Result<Job, (String, i32)> {
            #[cfg(feature = "mpi")]
            {
                use tessel_runtime::session::{timeout_from_env, MpiWorld};
                let world = timeout_from_env()
                    .and_then(MpiWorld::init_from_env)
                    .map_err(|e| (e, 1))?;
                Ok(Job { world })
            }
            #[cfg(not(feature = "mpi"))]
            Ok(Job {})
        }

        /// Leaves the job; after a failure every other host stops with it.
        pub fn finish(&self, failure: Option<&str>) {
            #[cfg(feature = "mpi")]
            if let Some(world) = self.world {
                world.finish(failure);
            }
            let _ = failure;
        }
    }

    /// "host h: " on several hosts, so their lines can be told apart.
    pub fn prefix() -> String {
        match tessel_runtime::session::job_hosts() {
            Some((host, _)) => format!("host {host}: "),
            None => String::new(),
        }
    }

    /// Whether several hosts run this program.
    pub fn several() -> bool {
        tessel_runtime::session::job_hosts().is_some()
    }
}

/// Ctrl-C and SIGTERM for this program. While training or evaluating (`in_loop`), the first
/// one raises the estimator's stop flag; a second one, or one in any other phase, exits at
/// once: 130 for Ctrl-C, 143 for SIGTERM, as a shell reports a process those signals ended.
#[derive(Default)]
struct StopSignals {
    in_loop: Arc<AtomicBool>,
    terminated: Arc<AtomicBool>,
}

impl StopSignals {
    fn install(&self, stop: Arc<AtomicBool>) -> std::io::Result<()> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
        let in_loop = Arc::clone(&self.in_loop);
        let terminated = Arc::clone(&self.terminated);
        std::thread::spawn(move || {
            for signal in signals.forever() {
                let code = if signal == SIGTERM {
                    terminated.store(true, Ordering::SeqCst);
                    143
                } else {
                    130
                };
                let first = !stop.swap(true, Ordering::SeqCst);
                if in_loop.load(Ordering::SeqCst) && first {
                    eprintln!(
                        "Stopping after the running loop (press Ctrl-C again to exit at once)."
                    );
                    continue;
                }
                std::process::exit(code);
            }
        });
        Ok(())
    }

    /// Runs `f` as a phase the first signal stops gracefully.
    fn stoppable<T>(&self, f: impl FnOnce() -> T) -> T {
        self.in_loop.store(true, Ordering::SeqCst);
        let out = f();
        self.in_loop.store(false, Ordering::SeqCst);
        out
    }

    fn terminated(&self) -> bool {
        self.terminated.load(Ordering::SeqCst)
    }

    fn exit_code(&self, e: &EstimatorError) -> i32 {
        match e {
            EstimatorError::Interrupted { .. } | EstimatorError::Stopped { .. } => {
                if self.terminated() {
                    143
                } else {
                    130
                }
            }
            _ => 1,
        }
    }
}

fn run(flags: &Flags, signals: &StopSignals) -> Result<(), EstimatorError> {
    let config = RunConfig {
        model_dir: flags.model_dir.clone(),
        save_checkpoints_steps: flags.save_checkpoints_steps,
        save_checkpoints_secs: flags.save_checkpoints_secs,
        keep_checkpoint_max: flags.keep_checkpoint_max,
        fall_back_to_intact_checkpoint: flags.fall_back_to_intact_checkpoint,
        tf_random_seed: flags.random_seed,
        checkpoint_format: flags.checkpoint_format,
        fast_allreduce: flags.fast_allreduce,
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
    let chief = estimator.is_chief();
    let estimator = if chief {
        estimator.with_progress(console::progress_bar())
    } else {
        estimator
    };
    signals
        .install(estimator.stop_flag())
        .map_err(|e| EstimatorError::Value(format!("cannot handle Ctrl-C and SIGTERM: {e}")))?;
    match flags.mode.as_deref() {
        // Predict and export run on the chief; the other hosts have nothing to do.
        Some("predict" | "export") if !chief => return Ok(()),
        Some("predict") => return predict(&estimator, flags),
        Some("export") => return export(&estimator, flags),
        _ => {}
    }
    let eval_steps = (flags.eval_steps > 0).then_some(flags.eval_steps);
    let train_input = || input_fn(flags.train_file.clone(), true);
    let eval_input = || input_fn(flags.eval_file.clone(), false);
    let mode = flags.mode.as_deref().unwrap_or("train+evaluate");
    let task = estimator.config().task_type();
    if task == TaskType::Evaluator && mode != "train_and_evaluate" {
        return Err(EstimatorError::Value(format!(
            "TF_CONFIG's task is the evaluator, which evaluates each checkpoint of a training: run it with --mode train_and_evaluate (not {mode})"
        )));
    }
    let (do_train, do_eval) = match mode {
        // Evaluation runs on the chief alone.
        "train" => (true, false),
        "evaluate" => (false, chief),
        "train+evaluate" => (true, chief),
        "train_and_evaluate" => {
            let eval = signals.stoppable(|| {
                estimator.train_and_evaluate(
                    &TrainSpec {
                        input_fn: train_input(),
                        max_steps: flags.train_steps,
                    },
                    &EvalSpec {
                        input_fn: eval_input(),
                        steps: eval_steps,
                        every_n_steps: Some(flags.iterations.max(1) * 10),
                        continuous: continuous_eval(flags)?,
                    },
                )
            })?;
            let Some(eval) = eval else {
                if task != TaskType::Evaluator && job::several() && !chief {
                    // Another host of the job: the chief evaluated.
                    println!(
                        "{}tessel trained to step {} (the chief evaluates)",
                        job::prefix(),
                        flags.train_steps
                    );
                    return Ok(());
                }
                // A training task of a TF_CONFIG cluster: the evaluator task evaluates.
                println!(
                    "tessel task={} {} trained to step {} model_dir={}",
                    task,
                    estimator.config().task_id(),
                    flags.train_steps,
                    estimator.model_dir().display()
                );
                return Ok(());
            };
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
        Some(signals.stoppable(|| {
            let mut hooks: Vec<Box<dyn Hook + '_>> = Vec::new();
            if let Some(patience) = flags.early_stopping_steps {
                hooks.push(Box::new(stop_if_no_decrease_hook(
                    |ctx| estimator.evaluate_run(eval_input(), eval_steps, ctx),
                    "loss",
                    patience,
                    0,
                    flags.iterations.max(1) * 10,
                )));
            }
            if let Some(dir) = flags.trace_dir.as_ref().filter(|_| chief) {
                let hook = ProfilerHook::new(u64::MAX, dir)
                    .with_loops(3)
                    .starting_at_step(flags.iterations as i64);
                hooks.push(Box::new(hook));
            }
            estimator.train_with_hooks(train_input(), None, Some(flags.train_steps), hooks, vec![])
        })?)
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
    let eval = signals.stoppable(|| estimator.evaluate(eval_input(), eval_steps))?;
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
