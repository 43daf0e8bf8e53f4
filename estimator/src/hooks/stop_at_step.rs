//! TF's `StopAtStepHook`: training stops at a global step.

use super::{Hook, RunArgs, RunContext, RunValues};
use crate::error::EstimatorError;

/// TF's `StopAtStepHook(num_steps, last_step)`: stops after `num_steps` more steps, or at
/// global step `last_step`. The loop that would pass the step is shortened to end on it.
pub struct StopAtStepHook {
    num_steps: Option<u64>,
    last_step: Option<i64>,
}

impl StopAtStepHook {
    /// Stops `num_steps` steps after the step the run starts from.
    pub fn num_steps(num_steps: u64) -> StopAtStepHook {
        StopAtStepHook {
            num_steps: Some(num_steps),
            last_step: None,
        }
    }

    /// Stops at global step `last_step`.
    pub fn last_step(last_step: i64) -> StopAtStepHook {
        StopAtStepHook {
            num_steps: None,
            last_step: Some(last_step),
        }
    }
}

impl Hook for StopAtStepHook {
    fn after_create_session(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        let start = ctx.global_step();
        if let Some(n) = self.num_steps {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            self.last_step = Some(start.saturating_add(n));
        }
        if self.last_step.is_some_and(|last| start >= last) {
            ctx.request_stop();
        }
        Ok(())
    }

    fn before_run(&mut self, _ctx: &mut RunContext) -> Result<RunArgs, EstimatorError> {
        Ok(self.last_step.map(RunArgs::end_at_step).unwrap_or_default())
    }

    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        if self
            .last_step
            .is_some_and(|last| values.global_step() >= last)
        {
            ctx.request_stop();
        }
        Ok(())
    }
}
