//! The model suite's tessel side: trains one suite model on synthetic data and prints its
//! steady-state step time and the compile time of its train program.
//!
//! ```text
//! cargo run --release --example models_bench -- --model mnist|fashion|resnet20|mlp|textcnn
//!     [--batch B] [--steps 100] [--iterations 10] [--warmup-steps 10] [--examples 4096]
//! ```
//! It trains `--warmup-steps` steps (compile, first runs), then `--steps` more in loops of
//! `--iterations` steps, reading the clock after every loop as the TF peers do, and prints
//!
//! ```text
//! model NAME ms_per_step X compile_ms C
//! train NAME steps N loss_first_loop A loss_last_loop B
//! ```
//! X is the median over the timed loops of the loop's wall time per step (the host's work
//! between loops included), C the time spent compiling the train loop. Checkpoints (beyond
//! TF's first and last), summaries and step logs are off. Threads: `TESSEL_THREADS`.
//! `tests/benches/models_vs_tf.sh` runs it against the TF twins.
//!
//! With `--accuracy --data-dir DIR` it instead trains `--steps` steps from a fresh model_dir
//! on the real training set of `models/real_data.rs` (shuffled with a 1024-example buffer,
//! seed 7, as the TF twin does; initializers and dropout unseeded unless `--random-seed`),
//! evaluates the whole test set and prints
//!
//! ```text
//! accuracy NAME A train_s T steps N
//! ```
//! `tests/benches/models_accuracy.sh` runs it against the TF twins' `--accuracy`.

#[path = "models/mod.rs"]
pub mod models;

use clap::Parser;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tessel_estimator::hooks::{Hook, RunContext, RunValues};
use tessel_estimator::{EstimatorError, Input, Params, RunConfig, TpuConfig, TpuEstimator};

#[derive(Parser)]
pub struct Flags {
    /// mnist, fashion, resnet20, mlp or textcnn.
    #[arg(long)]
    pub model: String,
    /// The batch (default: the model's suite batch).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Timed steps, after the warm-up.
    #[arg(long, default_value_t = 100)]
    pub steps: u64,
    /// Steps per compiled loop (TPUConfig's iterations_per_loop).
    #[arg(long, default_value_t = 10)]
    pub iterations: u64,
    /// Steps before the timed ones: compile and the first runs.
    #[arg(long, default_value_t = 10)]
    pub warmup_steps: u64,
    /// Synthetic examples, cycled.
    #[arg(long, default_value_t = 4096)]
    pub examples: usize,
    /// Train `--steps` steps on real data, then print the test set's accuracy.
    #[arg(long, requires = "data_dir")]
    pub accuracy: bool,
    /// The real data's IDX files, for `--accuracy`.
    #[arg(long, requires = "accuracy")]
    pub data_dir: Option<std::path::PathBuf>,
    /// TF's `tf_random_seed` for `--accuracy` (default: none, so runs differ as TF's do).
    #[arg(long, requires = "accuracy")]
    pub random_seed: Option<i64>,
}

/// What one accuracy run measured.
pub struct Accuracy {
    pub accuracy: f64,
    pub train_secs: f64,
    pub steps: i64,
}

/// Trains `flags.steps` steps on the real training set of `flags.model`, then evaluates the
/// whole test set.
pub fn run_accuracy(flags: &Flags) -> Result<Accuracy, EstimatorError> {
    let model = models::model(&flags.model).ok_or_else(|| {
        EstimatorError::Value(format!(
            "unknown --model {}: one of {}",
            flags.model,
            models::NAMES.join(", ")
        ))
    })?;
    let dir = flags
        .data_dir
        .clone()
        .ok_or_else(|| EstimatorError::Value("--accuracy needs --data-dir".into()))?;
    if flags.steps == 0 || flags.iterations == 0 || flags.batch == Some(0) {
        return Err(EstimatorError::Value(
            "--steps, --iterations and --batch must be at least 1".into(),
        ));
    }
    let batch = flags.batch.unwrap_or(model.batch);
    let model_dir = tempfile::tempdir()
        .map_err(|e| EstimatorError::Value(format!("cannot make a model_dir: {e}")))?;
    let config = RunConfig {
        model_dir: Some(model_dir.path().to_path_buf()),
        save_checkpoints_steps: Some(1_000_000_000),
        save_summary_steps: 1_000_000_000,
        log_step_count_steps: 1_000_000_000,
        tf_random_seed: flags.random_seed,
        tpu_config: TpuConfig {
            iterations_per_loop: flags.iterations,
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    let estimator = TpuEstimator::new(
        model.model_fn,
        config,
        (model.params)(flags.steps),
        true,
        batch,
        Some(batch),
        Some(batch),
    )?
    .quiet();
    // Each split is read once and kept: the input_fn is called again for every evaluation.
    let name = flags.model.clone();
    let train_set = models::real_data::split(&name, &dir, true)?.cache();
    let test_set = models::real_data::split(&name, &dir, false)?.cache();
    let started = Instant::now();
    let trained = estimator.train(
        |params: &Params| {
            let ds = train_set
                .clone()
                .shuffle(1024, 7)?
                .repeat(None)
                .batch(params.batch_size() as u64, true)?
                .prefetch(4);
            Ok(Input::new(ds, "label"))
        },
        None,
        Some(flags.steps),
    )?;
    let train_secs = started.elapsed().as_secs_f64();
    // The short last batch is padded and masked by the estimator, as TF's evaluate does.
    let result = estimator.evaluate(
        |params: &Params| {
            let ds = test_set
                .clone()
                .batch(params.batch_size() as u64, false)?
                .prefetch(4);
            Ok(Input::new(ds, "label"))
        },
        None,
    )?;
    Ok(Accuracy {
        accuracy: result
            .metric("accuracy")
            .ok_or_else(|| EstimatorError::Value("the evaluation has no accuracy".into()))?,
        train_secs,
        steps: trained.global_step,
    })
}

/// One loop as the clock saw it.
struct LoopMark {
    first_step: i64,
    steps: u64,
    end: Instant,
    mean_loss: f64,
}

/// Reads the clock after every training loop (TF's `SessionRunHook.after_run`).
struct StepClock {
    marks: Arc<Mutex<Vec<LoopMark>>>,
}

impl Hook for StepClock {
    fn after_run(
        &mut self,
        _ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        let end = Instant::now();
        let loss = values.loss();
        let mean_loss = loss.iter().sum::<f64>() / loss.len().max(1) as f64;
        self.marks
            .lock()
            .map_err(|_| EstimatorError::Value("the step clock's lock is poisoned".into()))?
            .push(LoopMark {
                first_step: values.first_step(),
                steps: values.steps(),
                end,
                mean_loss,
            });
        Ok(())
    }
}

/// What one timed run measured.
pub struct Measured {
    pub ms_per_step: f64,
    pub compile_ms: f64,
    /// The global step reached.
    pub steps: i64,
    /// The mean loss of the first loop and of the last.
    pub loss_first_loop: f64,
    pub loss_last_loop: f64,
}

fn check_flags(flags: &Flags) -> Result<(), EstimatorError> {
    let i = flags.iterations;
    if i == 0 || flags.steps == 0 || flags.warmup_steps == 0 {
        return Err(EstimatorError::Value(
            "--steps, --iterations and --warmup-steps must be at least 1 (the warm-up loop pays the first run's costs)".into(),
        ));
    }
    if !flags.steps.is_multiple_of(i) || !flags.warmup_steps.is_multiple_of(i) {
        return Err(EstimatorError::Value(format!(
            "--steps {} and --warmup-steps {} must be multiples of --iterations {i}, so that one loop program is compiled and timed",
            flags.steps, flags.warmup_steps
        )));
    }
    if flags.batch == Some(0) || flags.examples == 0 {
        return Err(EstimatorError::Value(
            "--batch and --examples must be at least 1".into(),
        ));
    }
    Ok(())
}

pub fn run(flags: &Flags) -> Result<Measured, EstimatorError> {
    check_flags(flags)?;
    let model = models::model(&flags.model).ok_or_else(|| {
        EstimatorError::Value(format!(
            "unknown --model {}: one of {}",
            flags.model,
            models::NAMES.join(", ")
        ))
    })?;
    let batch = flags.batch.unwrap_or(model.batch);
    if flags.examples < batch {
        return Err(EstimatorError::Value(format!(
            "--examples {} is less than a batch ({batch})",
            flags.examples
        )));
    }
    let total = flags.warmup_steps + flags.steps;
    let model_dir = tempfile::tempdir()
        .map_err(|e| EstimatorError::Value(format!("cannot make a model_dir: {e}")))?;
    let config = RunConfig {
        model_dir: Some(model_dir.path().to_path_buf()),
        save_checkpoints_steps: Some(1_000_000_000),
        save_summary_steps: 1_000_000_000,
        log_step_count_steps: 1_000_000_000,
        tf_random_seed: Some(1),
        tpu_config: TpuConfig {
            iterations_per_loop: flags.iterations,
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    let estimator = TpuEstimator::new(
        model.model_fn,
        config,
        (model.params)(total),
        true,
        batch,
        Some(batch),
        Some(batch),
    )?
    .quiet();
    let data = model.data;
    let examples = flags.examples;
    let input_fn = move |params: &Params| {
        let ds = data(examples, 7)?
            .cache()
            .repeat(None)
            .batch(params.batch_size() as u64, true)?
            .prefetch(4);
        Ok(Input::new(ds, "label"))
    };
    let marks = Arc::new(Mutex::new(Vec::new()));
    let clock = StepClock {
        marks: Arc::clone(&marks),
    };
    let result = estimator.train_with_hooks(
        input_fn,
        None,
        Some(total),
        vec![Box::new(clock)],
        Vec::new(),
    )?;
    let marks = marks
        .lock()
        .map_err(|_| EstimatorError::Value("the step clock's lock is poisoned".into()))?;
    let warmup = flags.warmup_steps as i64;
    let mut per_step: Vec<f64> = marks
        .windows(2)
        .filter(|w| w[1].first_step >= warmup && w[1].steps > 0)
        .map(|w| (w[1].end - w[0].end).as_secs_f64() * 1e3 / w[1].steps as f64)
        .collect();
    if per_step.is_empty() {
        return Err(EstimatorError::Value(
            "no loop ran after the warm-up".into(),
        ));
    }
    per_step.sort_by(f64::total_cmp);
    let n = per_step.len();
    let median = (per_step[(n - 1) / 2] + per_step[n / 2]) / 2.0;
    Ok(Measured {
        ms_per_step: median,
        compile_ms: result.compile_secs * 1e3,
        steps: result.global_step,
        loss_first_loop: marks.first().map_or(f64::NAN, |m| m.mean_loss),
        loss_last_loop: marks.last().map_or(f64::NAN, |m| m.mean_loss),
    })
}

#[allow(dead_code)] // the suite's test includes this file as a module and calls `run`
fn main() {
    let flags = Flags::parse();
    if flags.accuracy {
        match run_accuracy(&flags) {
            Ok(a) => println!(
                "accuracy {} {:.4} train_s {:.1} steps {}",
                flags.model, a.accuracy, a.train_secs, a.steps
            ),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    match run(&flags) {
        Ok(m) => {
            println!(
                "model {} ms_per_step {:.3} compile_ms {:.1}",
                flags.model, m.ms_per_step, m.compile_ms
            );
            println!(
                "train {} steps {} loss_first_loop {:.4} loss_last_loop {:.4}",
                flags.model, m.steps, m.loss_first_loop, m.loss_last_loop
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
