//! `train_and_evaluate(train_spec, eval_spec)`: training in chunks with an evaluation after
//! each, as `tf.estimator.train_and_evaluate` does on one machine.
//!
//! A chunk ends at a checkpoint: every `EvalSpec::every_n_steps` steps when given, else at
//! the config's `save_checkpoints_steps` (TF evaluates each new checkpoint), and at
//! `max_steps`. Each evaluation restores the checkpoint just saved and writes its results to
//! `model_dir/eval/` at that global step, so TensorBoard shows the eval curve beside training.

use super::evaluate::EvalResult;
use super::input_fn::Input;
use super::params::Params;
use super::tpu_estimator::TpuEstimator;
use crate::error::EstimatorError;

/// `tf.estimator.TrainSpec(input_fn, max_steps)`.
pub struct TrainSpec<F> {
    pub input_fn: F,
    pub max_steps: u64,
}

/// `tf.estimator.EvalSpec(input_fn, steps, ...)`. `steps = None` evaluates the whole set.
/// `every_n_steps` replaces TF's `throttle_secs`: evaluations are placed by steps so that a
/// run is reproducible; `None` evaluates after each checkpoint (`save_checkpoints_steps`).
pub struct EvalSpec<F> {
    pub input_fn: F,
    pub steps: Option<u64>,
    pub every_n_steps: Option<u64>,
}

impl TpuEstimator {
    /// Trains to `train_spec.max_steps`, evaluating after every chunk; returns the last
    /// evaluation (of the final checkpoint).
    pub fn train_and_evaluate<T, E>(
        &self,
        train_spec: &TrainSpec<T>,
        eval_spec: &EvalSpec<E>,
    ) -> Result<EvalResult, EstimatorError>
    where
        T: Fn(&Params) -> Result<Input, EstimatorError>,
        E: Fn(&Params) -> Result<Input, EstimatorError>,
    {
        if train_spec.max_steps == 0 {
            return Err(EstimatorError::value(
                "Must specify max_steps > 0, given: 0",
            ));
        }
        let every = match (eval_spec.every_n_steps, self.config.save_checkpoints_steps) {
            (Some(0), _) => {
                return Err(EstimatorError::value(
                    "every_n_steps must be positive, given: 0",
                ))
            }
            (Some(n), _) | (None, Some(n)) => n,
            // Checkpoints by time: one chunk, one evaluation at the end.
            (None, None) => train_spec.max_steps,
        };
        let mut last = None;
        let mut step = self.latest_global_step()?;
        loop {
            // The next multiple of `every` (or max_steps): where a checkpoint is due.
            let target = ((step as u64 / every + 1) * every).min(train_spec.max_steps);
            if (step as u64) < target {
                step = self
                    .train(&train_spec.input_fn, None, Some(target))?
                    .global_step;
            }
            let needs_eval = last
                .as_ref()
                .is_none_or(|r: &EvalResult| r.global_step != step);
            if needs_eval {
                last = Some(self.evaluate(&eval_spec.input_fn, eval_spec.steps)?);
            }
            if step as u64 >= train_spec.max_steps {
                break;
            }
        }
        last.ok_or_else(|| EstimatorError::value("no evaluation ran"))
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
