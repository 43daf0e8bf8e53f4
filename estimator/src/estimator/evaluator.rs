//! The evaluator task (TF's `_TrainingExecutor.run_evaluator`): a process of its own that
//! takes no part in training's collectives, waits for each new checkpoint the chief writes
//! in the model_dir, evaluates it, writes eval events, and ends once the checkpoint at the
//! train spec's `max_steps` is evaluated, or when no new checkpoint came for the timeout.
//!
//! As TF's evaluator, it evaluates the *latest* checkpoint each time (checkpoints written
//! while it evaluated are passed over for the newest), never one it evaluated before, and
//! starts an evaluation at least `throttle` after the previous one started. A checkpoint the
//! state file names but whose file is gone or does not read back (removed by
//! `keep_checkpoint_max` before its turn, or half-written) is skipped with a warning.

use super::evaluate::EvalResult;
use super::input_fn::Input;
use super::log::Log;
use super::params::Params;
use super::tpu_estimator::TpuEstimator;
use super::train_and_evaluate::EvalSpec;
use crate::checkpoint::{read_checkpoint, tf_bundle, Checkpoint, Saver};
use crate::error::EstimatorError;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How the evaluator task waits for checkpoints: TF's `EvalSpec` (`name`,
/// `start_delay_secs`, `throttle_secs`) and `tf.train.checkpoints_iterator`'s polling and
/// `timeout`. The defaults are TF's.
#[derive(Clone, Debug, PartialEq)]
pub struct ContinuousEval {
    /// TF's `EvalSpec.name`: events go to `model_dir/eval_NAME` (`eval` without one).
    pub name: Option<String>,
    /// TF's `start_delay_secs` (120 s): wait this long before looking for a checkpoint.
    pub start_delay: Duration,
    /// TF's `throttle_secs` (600 s): an evaluation starts at least this long after the
    /// previous one started.
    pub throttle: Duration,
    /// How often the `checkpoint` state file is read for a new checkpoint (1 s, as
    /// `checkpoints_iterator` waits).
    pub poll_interval: Duration,
    /// End when no new checkpoint came for this long (`checkpoints_iterator`'s `timeout`);
    /// `None` waits until the `max_steps` checkpoint.
    pub timeout: Option<Duration>,
}

impl Default for ContinuousEval {
    fn default() -> Self {
        ContinuousEval {
            name: None,
            start_delay: Duration::from_secs(120),
            throttle: Duration::from_secs(600),
            poll_interval: Duration::from_secs(1),
            timeout: None,
        }
    }
}

impl ContinuousEval {
    /// The eval events' directory under the model_dir: `eval`, or `eval_NAME`.
    pub fn eval_dir(&self) -> String {
        match self.name.as_deref() {
            None | Some("") => "eval".to_string(),
            Some(name) => format!("eval_{name}"),
        }
    }
}

/// A checkpoint read whole, to evaluate, and where its eval events go.
pub(crate) struct CheckpointToEval {
    pub checkpoint: Checkpoint,
    pub file: PathBuf,
    pub eval_dir: String,
}

/// Why the evaluator ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvaluatorEnd {
    /// It evaluated a checkpoint at or past the train spec's `max_steps`.
    MaxSteps,
    /// No new checkpoint came for `ContinuousEval::timeout`.
    TimedOut,
}

/// What the evaluator did.
#[derive(Clone, Debug, PartialEq)]
pub struct EvaluatorRun {
    /// One per checkpoint evaluated, in order.
    pub evaluations: Vec<EvalResult>,
    /// The checkpoints passed over, each `PREFIX: why`.
    pub skipped: Vec<String>,
    pub ended: EvaluatorEnd,
    /// Every log line of the run, the evaluations' included.
    pub log: Vec<String>,
}

/// TF's `_Evaluator` warns that nothing is trained yet at most every 10 minutes.
const NOT_TRAINED_WARNING_EVERY: Duration = Duration::from_secs(600);

impl TpuEstimator {
    /// TF's `run_evaluator`: evaluates each new checkpoint of the model_dir until the one at
    /// `max_steps` (the train spec's) is evaluated, or `eval_spec.continuous.timeout` passes
    /// without a new checkpoint. Takes no trainer lock and writes only eval events. The stop
    /// flag ends it between evaluations with [`EstimatorError::Stopped`].
    pub fn run_evaluator<E>(
        &self,
        max_steps: u64,
        eval_spec: &EvalSpec<E>,
    ) -> Result<EvaluatorRun, EstimatorError>
    where
        E: Fn(&Params) -> Result<Input, EstimatorError>,
    {
        let c = &eval_spec.continuous;
        if max_steps == 0 {
            return Err(EstimatorError::value(
                "Must specify max_steps > 0, given: 0",
            ));
        }
        if c.poll_interval.is_zero() {
            return Err(EstimatorError::value(
                "the evaluator's poll_interval must be positive, given: 0",
            ));
        }
        let mut log = Log::new(self.quiet);
        let mut run = EvaluatorRun {
            evaluations: Vec::new(),
            skipped: Vec::new(),
            ended: EvaluatorEnd::TimedOut,
            log: Vec::new(),
        };
        if !c.start_delay.is_zero() {
            log.info(format!(
                "Waiting {:.6} secs before starting eval.",
                c.start_delay.as_secs_f64()
            ));
            self.nap(c.start_delay);
        }
        let saver = Saver::new(&self.model_dir, self.config.keep_checkpoint_max);
        let mut seen: Option<String> = None;
        let mut last_start: Option<Instant> = None;
        let mut waiting_since = Instant::now();
        let mut warned_untrained: Option<Instant> = None;
        log.info(format!(
            "Waiting for new checkpoint at {}",
            self.model_dir.display()
        ));
        loop {
            if self.stop.swap(false, Ordering::SeqCst) {
                return Err(EstimatorError::Stopped {
                    what: "continuous evaluation",
                    done: run.evaluations.len() as u64,
                });
            }
            let latest = saver.state()?.and_then(|s| s.model_checkpoint_path);
            let Some(prefix) = latest.filter(|p| Some(p) != seen.as_ref()) else {
                if let Some(timeout) = c.timeout {
                    if waiting_since.elapsed() >= timeout {
                        log.info("Timed-out waiting for a checkpoint.");
                        run.log = log.lines;
                        return Ok(run);
                    }
                }
                if seen.is_none()
                    && warned_untrained.is_none_or(|t| t.elapsed() >= NOT_TRAINED_WARNING_EVERY)
                {
                    log.warn("Estimator is not trained yet. Will start an evaluation when a checkpoint is ready.");
                    warned_untrained = Some(Instant::now());
                }
                self.nap(c.poll_interval);
                continue;
            };
            if let Some(next) = last_start.map(|t| t + c.throttle) {
                let now = Instant::now();
                if now < next {
                    log.info(format!(
                        "Waiting {:.6} secs before starting next eval run.",
                        (next - now).as_secs_f64()
                    ));
                    self.nap(next - now);
                    // Look again: a newer checkpoint may have come meanwhile.
                    continue;
                }
            }
            seen = Some(prefix.clone());
            waiting_since = Instant::now();
            let file = checkpoint_file(&self.model_dir, &prefix);
            let checkpoint = match read_checkpoint(&file) {
                Ok(checkpoint) => checkpoint,
                Err(e) => {
                    let why = if file.exists() {
                        format!("it does not read back, half-written or damaged ({e})")
                    } else {
                        format!(
                            "its file is gone ({} does not exist: removed by keep_checkpoint_max before it was evaluated, or never written)",
                            file.display()
                        )
                    };
                    log.warn(format!(
                        "Skipping checkpoint {prefix}: the checkpoint state file names it, but {why}."
                    ));
                    run.skipped.push(format!("{prefix}: {why}"));
                    continue;
                }
            };
            log.info(format!(
                "Found new checkpoint at {}",
                self.model_dir.join(&prefix).display()
            ));
            last_start = Some(Instant::now());
            let result = self.evaluate_from(
                &eval_spec.input_fn,
                eval_spec.steps,
                Vec::new(),
                None,
                Some(CheckpointToEval {
                    checkpoint,
                    file,
                    eval_dir: c.eval_dir(),
                }),
            )?;
            // Already passed to the log facade by the evaluation itself.
            log.lines.extend(result.log.iter().cloned());
            let step = result.global_step;
            run.evaluations.push(result);
            waiting_since = Instant::now();
            if step >= max_steps as i64 {
                log.info(format!(
                    "Exiting evaluation, global_step={step} >= train max_steps={max_steps}"
                ));
                run.ended = EvaluatorEnd::MaxSteps;
                run.log = log.lines;
                return Ok(run);
            }
        }
    }

    /// Sleeps `d`, in short naps so that a raised stop flag cuts it short.
    fn nap(&self, d: Duration) {
        let until = Instant::now() + d;
        while !self.stop.load(Ordering::SeqCst) {
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(50)));
        }
    }
}

/// The file of checkpoint `prefix` (relative to the model_dir, or absolute): tessel's
/// `.safetensors` when there is one, else TF's `.index`.
fn checkpoint_file(model_dir: &Path, prefix: &str) -> PathBuf {
    let path = model_dir.join(prefix);
    tf_bundle::existing_checkpoint(&path, model_dir.join(format!("{prefix}.safetensors")))
}
