//! TF's `SummarySaverHook`: the outfed scalars as TensorBoard summaries.

use super::{Hook, RunContext, RunValues};
use crate::error::EstimatorError;
use crate::estimator::summary_err;

/// TF's `SummarySaverHook(save_steps)`: every outfed scalar (the loss and the `host_call`
/// values) of each step that is a multiple of `save_steps`, and of the last step, written to
/// training's event file in the model_dir.
pub struct SummarySaverHook {
    save_steps: u64,
}

impl SummarySaverHook {
    /// `save_steps` of 0 is taken as 1.
    pub fn new(save_steps: u64) -> SummarySaverHook {
        SummarySaverHook {
            save_steps: save_steps.max(1),
        }
    }
}

impl Hook for SummarySaverHook {
    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        let last = ctx.last_step();
        let stopping = ctx.stop_requested();
        let Some(events) = ctx.events() else {
            return Ok(());
        };
        let every = self.save_steps as i64;
        let run_end = values.global_step();
        for (i, step_values) in values.per_step().iter().enumerate() {
            let s = values.first_step() + i as i64;
            let final_step = s == run_end && (Some(s) == last || stopping);
            if s % every == 0 || final_step {
                for (name, v) in values.names().iter().zip(step_values) {
                    events.scalar(name, s, *v as f32).map_err(summary_err)?;
                }
            }
        }
        Ok(())
    }
}
