//! TF's `tf.estimator.experimental.stop_if_no_decrease_hook` / `stop_if_no_increase_hook`,
//! evaluating in process: the hook evaluates the variables training holds on the host, with
//! no checkpoint read and no training graph rebuilt. On several hosts the chief alone
//! evaluates and decides.

use super::{Hook, RunContext, RunValues};
use crate::error::EstimatorError;
use crate::estimator::hosts::Hosts;
use crate::estimator::EvalResult;

/// Evaluates the variables of a running training (see
/// [`TpuEstimator::evaluate_run`](crate::TpuEstimator::evaluate_run)).
pub type RunEvaluator<'a> =
    Box<dyn FnMut(&mut RunContext) -> Result<EvalResult, EstimatorError> + Send + 'a>;

/// TF's `_StopOnPredicateHook` with the early-stopping predicate: every `run_every_steps`
/// (at the first loop that reaches it, and after the first loop) it evaluates and records
/// the metric; it requests a stop when the best value among evaluations at or after
/// `min_steps` is `max_steps_without_improvement` steps or more behind the latest one.
pub struct EarlyStoppingHook<'a> {
    evaluate: RunEvaluator<'a>,
    metric_name: String,
    higher_is_better: bool,
    max_steps_without_improvement: u64,
    min_steps: u64,
    run_every_steps: u64,
    last_check: Option<i64>,
    /// (global step, metric) of each evaluation.
    history: Vec<(i64, f64)>,
}

/// Stops training when `metric_name` (`"loss"` or a metric_fn's metric) has not decreased
/// for `max_steps_without_decrease` steps. `evaluate` is called with the run's context,
/// typically `|ctx| estimator.evaluate_run(eval_input_fn, steps, ctx)`.
pub fn stop_if_no_decrease_hook<'a>(
    evaluate: impl FnMut(&mut RunContext) -> Result<EvalResult, EstimatorError> + Send + 'a,
    metric_name: &str,
    max_steps_without_decrease: u64,
    min_steps: u64,
    run_every_steps: u64,
) -> EarlyStoppingHook<'a> {
    EarlyStoppingHook::new(
        Box::new(evaluate),
        metric_name,
        false,
        max_steps_without_decrease,
        min_steps,
        run_every_steps,
    )
}

/// Stops training when `metric_name` has not increased for `max_steps_without_increase`
/// steps (see [`stop_if_no_decrease_hook`]).
pub fn stop_if_no_increase_hook<'a>(
    evaluate: impl FnMut(&mut RunContext) -> Result<EvalResult, EstimatorError> + Send + 'a,
    metric_name: &str,
    max_steps_without_increase: u64,
    min_steps: u64,
    run_every_steps: u64,
) -> EarlyStoppingHook<'a> {
    EarlyStoppingHook::new(
        Box::new(evaluate),
        metric_name,
        true,
        max_steps_without_increase,
        min_steps,
        run_every_steps,
    )
}

impl<'a> EarlyStoppingHook<'a> {
    fn new(
        evaluate: RunEvaluator<'a>,
        metric_name: &str,
        higher_is_better: bool,
        max_steps_without_improvement: u64,
        min_steps: u64,
        run_every_steps: u64,
    ) -> EarlyStoppingHook<'a> {
        EarlyStoppingHook {
            evaluate,
            metric_name: metric_name.to_string(),
            higher_is_better,
            max_steps_without_improvement,
            min_steps,
            run_every_steps: run_every_steps.max(1),
            last_check: None,
            history: Vec::new(),
        }
    }

    /// The (global step, value) of each evaluation so far.
    pub fn history(&self) -> &[(i64, f64)] {
        &self.history
    }

    /// TF's `stop_if_no_metric_improvement_fn` over the evaluations so far, by step: the
    /// steps since the best value when that reaches the limit.
    fn steps_without_improvement(&self) -> Option<i64> {
        let mut sorted = self.history.clone();
        sorted.sort_by_key(|(step, _)| *step);
        let mut best: Option<(i64, f64)> = None;
        for (step, value) in sorted {
            if step < self.min_steps as i64 {
                continue;
            }
            let better = best.is_none_or(|(_, b)| {
                if self.higher_is_better {
                    value > b
                } else {
                    value < b
                }
            });
            if better {
                best = Some((step, value));
            }
            let behind = step - best.map_or(step, |(s, _)| s);
            if behind >= self.max_steps_without_improvement as i64 {
                return Some(behind);
            }
        }
        None
    }
}

impl Hook for EarlyStoppingHook<'_> {
    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        let step = values.global_step();
        let due = self
            .last_check
            .is_none_or(|last| step - last >= self.run_every_steps as i64);
        if !due {
            return Ok(());
        }
        self.last_check = Some(step);
        // On several hosts the chief evaluates, and its stop is every host's (the training
        // loop sends the chief's decision after each loop).
        if !Hosts::of_job().is_chief() {
            return Ok(());
        }
        let result = (self.evaluate)(ctx)?;
        let value = match self.metric_name.as_str() {
            "loss" => Some(result.loss),
            name => result.metric(name),
        }
        .ok_or_else(|| {
            let mut names: Vec<&str> = result.metrics.iter().map(|(n, _)| n.as_str()).collect();
            names.push("loss");
            EstimatorError::value(format!(
                "metric_name {} not found in the evaluation's results: {}",
                self.metric_name,
                names.join(", ")
            ))
        })?;
        self.history.push((result.global_step, value));
        if let Some(behind) = self.steps_without_improvement() {
            ctx.info(format!(
                "No {} in metric \"{}\" for {behind} steps, which is greater than or equal to max steps ({}) configured for early stopping.",
                if self.higher_is_better { "increase" } else { "decrease" },
                self.metric_name,
                self.max_steps_without_improvement
            ));
            ctx.request_stop();
        }
        Ok(())
    }
}
