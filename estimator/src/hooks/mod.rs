//! Hooks: TF's `tf.estimator.SessionRunHook`, adapted to compiled loops.
//!
//! In TF a hook sees every `session.run`; here a run is one compiled loop of
//! `iterations_per_loop` steps, so a hook sees the loop's outfed values (the loss of every
//! step, the `host_call` scalars) and the global step after it. The moments are TF's:
//!
//! 1. [`Hook::begin`]: once, after the model_fn is traced and the variables are restored or
//!    initialized, before anything else;
//! 2. [`Hook::after_create_session`]: right after, the session ready (`train`'s checkpoint
//!    hook saves the first checkpoint here when nothing was restored);
//! 3. [`Hook::before_run`] and [`Hook::after_run`] around each loop; `after_run` may call
//!    [`RunContext::request_stop`], and the loop then ends after this run;
//! 4. [`Hook::end`]: once, when the loop ended without an error.
//!
//! A hook's error ends the call with that error: `end` is not called, and nothing of the run
//! that failed is saved (the model_dir keeps its last checkpoint).
//!
//! `train` runs its duties as built-in hooks, in this order: [`NanTensorHook`],
//! [`StopAtStepHook`], the caller's hooks, the spec's `training_hooks`, [`SummarySaverHook`],
//! [`LoggingTensorHook`], [`StepCounterHook`], [`CheckpointSaverHook`].

mod checkpoint_saver;
mod early_stopping;
mod logging_tensor;
mod nan_tensor;
mod profiler;
mod run_context;
mod step_counter;
mod stop_at_step;
mod summary_saver;

pub use checkpoint_saver::{CheckpointSaverHook, CheckpointSaverListener};
pub use early_stopping::{stop_if_no_decrease_hook, stop_if_no_increase_hook, EarlyStoppingHook};
pub use logging_tensor::LoggingTensorHook;
pub use nan_tensor::NanTensorHook;
pub use profiler::ProfilerHook;
pub use run_context::{RunArgs, RunContext, RunValues};
pub use step_counter::StepCounterHook;
pub use stop_at_step::StopAtStepHook;
pub use summary_saver::SummarySaverHook;

pub(crate) use run_context::HookList;

use crate::error::EstimatorError;

/// TF's `SessionRunHook`. Every method has a default that does nothing.
pub trait Hook: Send {
    /// Once, before any other call (the model_fn traced, the variables restored).
    fn begin(&mut self, _ctx: &mut RunContext) -> Result<(), EstimatorError> {
        Ok(())
    }

    /// Once, after the variables are restored or initialized: `ctx.global_step()` is the
    /// step the run starts from.
    fn after_create_session(&mut self, _ctx: &mut RunContext) -> Result<(), EstimatorError> {
        Ok(())
    }

    /// Before each loop. The [`RunArgs`] returned may end a training loop early, at a given
    /// step (evaluation and prediction loops are not shortened).
    fn before_run(&mut self, _ctx: &mut RunContext) -> Result<RunArgs, EstimatorError> {
        Ok(RunArgs::default())
    }

    /// After each loop, with its outfed values and the global step after it.
    fn after_run(
        &mut self,
        _ctx: &mut RunContext,
        _values: &RunValues,
    ) -> Result<(), EstimatorError> {
        Ok(())
    }

    /// Once, after the last loop (not after an error).
    fn end(&mut self, _ctx: &mut RunContext) -> Result<(), EstimatorError> {
        Ok(())
    }
}
