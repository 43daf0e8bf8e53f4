//! `train_and_evaluate(train_spec, eval_spec)`: training with an evaluation every N steps,
//! as `tf.estimator.train_and_evaluate` does on one machine, but in process. With a
//! TF_CONFIG cluster it runs this process's task, as TF's does: the chief and the workers
//! train, the evaluator evaluates each new checkpoint (`evaluator.rs`).
//!
//! One `train` runs to `max_steps`, its graph traced and its loop compiled once. A hook ends
//! the loops exactly at every multiple of `EvalSpec::every_n_steps` (else of the config's
//! `save_checkpoints_steps`, where TF would evaluate each new checkpoint) and at `max_steps`,
//! and evaluates there the variables training holds on the host: no checkpoint is read back
//! and the training graph is not rebuilt. The results equal `evaluate()` of a checkpoint of
//! the same step; they are written to `model_dir/eval/` at that global step, so TensorBoard
//! shows the eval curve beside training.
//!
//! On several hosts (an MPI job without a TF_CONFIG cluster) every host trains and the chief
//! alone evaluates at those steps, on its own device, as `evaluate` does there; the other
//! hosts go on to their next loop, whose first collective waits for the chief (the
//! communication thread keeps the heartbeat going meanwhile), and return `None`.

use super::evaluate::EvalResult;
use super::evaluator::ContinuousEval;
use super::hosts::{chief_decides, Hosts};
use super::input_fn::Input;
use super::params::Params;
use super::tf_config::TaskType;
use super::tpu_estimator::TpuEstimator;
use crate::error::EstimatorError;
use crate::hooks::{Hook, RunArgs, RunContext, RunValues};
use std::sync::Mutex;

/// `tf.estimator.TrainSpec(input_fn, max_steps)`.
pub struct TrainSpec<F> {
    pub input_fn: F,
    pub max_steps: u64,
}

/// `tf.estimator.EvalSpec(input_fn, steps, ...)`. `steps = None` evaluates the whole set.
/// In process, `every_n_steps` replaces TF's `throttle_secs`: evaluations are placed by steps
/// so that a run is reproducible; `None` evaluates every `save_checkpoints_steps`. The
/// evaluator task of a TF_CONFIG cluster waits for checkpoints as `continuous` says (TF's
/// `name`, `start_delay_secs`, `throttle_secs`).
pub struct EvalSpec<F> {
    pub input_fn: F,
    pub steps: Option<u64>,
    pub every_n_steps: Option<u64>,
    pub continuous: ContinuousEval,
}

/// Ends the loops at each multiple of `every` and evaluates there, in process.
struct EvalEveryHook<'a, E> {
    estimator: &'a TpuEstimator,
    eval_spec: &'a EvalSpec<E>,
    every: u64,
    /// The evaluations, and the evaluation loop programs compiled for them.
    results: &'a Mutex<(Vec<EvalResult>, usize)>,
}

impl<E> Hook for EvalEveryHook<'_, E>
where
    E: Fn(&Params) -> Result<Input, EstimatorError> + Sync,
{
    fn before_run(&mut self, ctx: &mut RunContext) -> Result<RunArgs, EstimatorError> {
        let every = self.every as i64;
        Ok(RunArgs::end_at_step(
            (ctx.global_step() / every + 1) * every,
        ))
    }

    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        let step = values.global_step();
        let due = step % self.every as i64 == 0 || Some(step) == ctx.last_step();
        if due && self.estimator.is_chief() {
            let result =
                self.estimator
                    .evaluate_run(&self.eval_spec.input_fn, self.eval_spec.steps, ctx)?;
            let mut results = self
                .results
                .lock()
                .map_err(|_| EstimatorError::value("an evaluation failed on another thread"))?;
            results.0.push(result);
            results.1 = ctx.eval_compiles;
        }
        Ok(())
    }
}

impl TpuEstimator {
    /// Trains to `train_spec.max_steps`, evaluating every N steps in process; returns the
    /// last evaluation (at `max_steps`), whose log holds the whole call's lines. A model_dir
    /// already at `max_steps` trains nothing and evaluates its latest checkpoint.
    ///
    /// On several hosts every host trains, the chief alone evaluates, and the others return
    /// `None`. With a TF_CONFIG cluster (`RunConfig::tf_config`), runs this process's task as
    /// TF does: the chief and the workers train to `max_steps` and return `None` (the evaluator
    /// task evaluates); the evaluator runs [`TpuEstimator::run_evaluator`] and returns its
    /// last evaluation, whose log holds the evaluator's lines (`None` when it timed out
    /// before any checkpoint).
    pub fn train_and_evaluate<T, E>(
        &self,
        train_spec: &TrainSpec<T>,
        eval_spec: &EvalSpec<E>,
    ) -> Result<Option<EvalResult>, EstimatorError>
    where
        T: Fn(&Params) -> Result<Input, EstimatorError>,
        E: Fn(&Params) -> Result<Input, EstimatorError> + Sync,
    {
        if train_spec.max_steps == 0 {
            return Err(EstimatorError::value(
                "Must specify max_steps > 0, given: 0",
            ));
        }
        if let Some(tf) = self
            .config
            .tf_config
            .as_ref()
            .filter(|t| t.is_distributed())
        {
            let mut log = super::log::Log::new(self.quiet);
            if tf.task_type == TaskType::Evaluator {
                log.info(format!(
                    "Running the evaluator task ({}): continuous evaluation of the checkpoints in {}.",
                    tf.task_name(),
                    self.model_dir.display()
                ));
                let run = self.run_evaluator(train_spec.max_steps, eval_spec)?;
                return Ok(run.evaluations.into_iter().last().map(|mut last| {
                    last.log = log.lines.into_iter().chain(run.log).collect();
                    last
                }));
            }
            log.info(format!(
                "Running the {} task of a cluster of {} training tasks: training to step {}; {}.",
                tf.task_name(),
                tf.cluster.training_tasks(),
                train_spec.max_steps,
                if tf.cluster.job_tasks(TaskType::Evaluator).is_empty() {
                    "the cluster has no evaluator task, so nothing evaluates"
                } else {
                    "the evaluator task evaluates the checkpoints"
                }
            ));
            self.train(&train_spec.input_fn, None, Some(train_spec.max_steps))?;
            return Ok(None);
        }
        let every = match (eval_spec.every_n_steps, self.config.save_checkpoints_steps) {
            (Some(0), _) => {
                return Err(EstimatorError::value(
                    "every_n_steps must be positive, given: 0",
                ))
            }
            (Some(n), _) | (None, Some(n)) => n,
            // Checkpoints by time: one evaluation, at the end.
            (None, None) => train_spec.max_steps,
        };
        // The chief reads the model_dir; every host follows its decision.
        let hosts = Hosts::of_job();
        let trained_already =
            hosts.is_chief() && self.latest_global_step()? as u64 >= train_spec.max_steps;
        if chief_decides(hosts, trained_already as i64)? != 0 {
            if !hosts.is_chief() {
                return Ok(None);
            }
            return self
                .evaluate(&eval_spec.input_fn, eval_spec.steps)
                .map(Some);
        }
        let results = Mutex::new((Vec::new(), 0));
        let hook = EvalEveryHook {
            estimator: self,
            eval_spec,
            every,
            results: &results,
        };
        let trained = self.train_with_hooks(
            &train_spec.input_fn,
            None,
            Some(train_spec.max_steps),
            vec![Box::new(hook)],
            Vec::new(),
        )?;
        let (evaluations, eval_compiles) = results
            .into_inner()
            .map_err(|_| EstimatorError::value("an evaluation failed on another thread"))?;
        if !hosts.is_chief() {
            return Ok(None);
        }
        let count = evaluations.len();
        let mut last = evaluations
            .into_iter()
            .last()
            .ok_or_else(|| EstimatorError::value("no evaluation ran"))?;
        last.log = trained.log;
        let line = format!(
            "Trained to step {} with {count} evaluations in process; loop programs compiled: {} for training, {eval_compiles} for evaluation.",
            trained.global_step, trained.loops_compiled
        );
        if !self.quiet {
            log::info!(target: "tessel", "{line}");
        }
        last.log.push(line);
        Ok(Some(last))
    }

    /// The global step of the latest checkpoint in model_dir, 0 without one.
    fn latest_global_step(&self) -> Result<i64, EstimatorError> {
        let saver = crate::checkpoint::Saver::new(&self.model_dir, self.config.keep_checkpoint_max);
        Ok(match saver.latest_file()? {
            Some(file) => crate::checkpoint::read_checkpoint(&file)?.global_step,
            None => 0,
        })
    }
}
