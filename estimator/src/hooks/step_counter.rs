//! TF's `StepCounterHook` (and TPUEstimator's examples/sec): the training rate.

use super::logging_tensor::line_due;
use super::{Hook, RunContext, RunValues};
use crate::error::EstimatorError;
use crate::estimator::log::tf_g;
use crate::estimator::summary_err;
use std::time::Duration;

/// TF's `StepCounterHook(every_n_steps)`: at the log cadence (not after the first loop,
/// which has no interval yet) it logs `global_step/sec: R` and, given the global batch size,
/// `examples/sec: R` (TPUEstimator's `ExamplesPerSecondHook`), and writes both as summaries.
/// The rate is over device time: compiling and saving are not counted.
pub struct StepCounterHook {
    every_n_steps: u64,
    batch_size: Option<usize>,
    first: bool,
    /// The step of the previous line and the device time since.
    since: (i64, Duration),
}

impl StepCounterHook {
    /// `every_n_steps` of 0 is taken as 1.
    pub fn new(every_n_steps: u64, batch_size: Option<usize>) -> StepCounterHook {
        StepCounterHook {
            every_n_steps: every_n_steps.max(1),
            batch_size,
            first: true,
            since: (0, Duration::ZERO),
        }
    }
}

impl Hook for StepCounterHook {
    fn after_create_session(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        self.since = (ctx.global_step(), Duration::ZERO);
        Ok(())
    }

    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        self.since.1 += values.elapsed();
        if !line_due(self.first, self.every_n_steps, ctx, values) {
            return Ok(());
        }
        let step = values.global_step();
        if !self.first {
            let secs = self.since.1.as_secs_f64().max(1e-9);
            let rate = (step - self.since.0) as f64 / secs;
            ctx.info(format!("global_step/sec: {}", tf_g(rate)));
            let examples = self.batch_size.map(|b| rate * b as f64);
            if let Some(examples) = examples {
                ctx.info(format!("examples/sec: {}", tf_g(examples)));
            }
            if let Some(events) = ctx.events() {
                events
                    .scalar("global_step/sec", step, rate as f32)
                    .map_err(summary_err)?;
                if let Some(examples) = examples {
                    events
                        .scalar("examples/sec", step, examples as f32)
                        .map_err(summary_err)?;
                }
            }
        }
        self.first = false;
        self.since = (step, Duration::ZERO);
        Ok(())
    }
}
