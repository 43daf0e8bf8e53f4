//! TF's `NanTensorHook`: a NaN or infinite loss, or variable, ends training.

use super::{Hook, RunContext, RunValues};
use crate::error::EstimatorError;
use crate::estimator::variables_state::first_non_finite;

/// TF's `NanTensorHook(loss_tensor, fail_on_nan_loss)`. After each loop it checks every
/// variable and each step's loss. With `fail_on_nan_loss` (`train`'s built-in) the run fails
/// naming the variable or the step, before anything of the loop is saved; without it, TF's
/// warning `Model diverged with loss = NaN.` is logged and a stop is requested.
pub struct NanTensorHook {
    fail_on_nan_loss: bool,
}

impl NanTensorHook {
    pub fn new(fail_on_nan_loss: bool) -> NanTensorHook {
        NanTensorHook { fail_on_nan_loss }
    }

    fn check(ctx: &RunContext, values: &RunValues) -> Option<EstimatorError> {
        if let Some((variable, what)) = first_non_finite(&ctx.variables, &ctx.state.values) {
            return Some(EstimatorError::Diverged {
                variable: variable.to_string(),
                what,
                first_step: values.first_step(),
                last_step: values.global_step(),
            });
        }
        let loss = values.loss();
        let (i, bad) = loss.iter().enumerate().find(|(_, l)| !l.is_finite())?;
        Some(EstimatorError::LossDiverged {
            what: if bad.is_nan() { "NaN" } else { "infinite" },
            step: values.first_step() + i as i64,
        })
    }
}

impl Hook for NanTensorHook {
    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        let Some(error) = NanTensorHook::check(ctx, values) else {
            return Ok(());
        };
        if self.fail_on_nan_loss {
            return Err(error);
        }
        ctx.warn(format!("Model diverged with loss = NaN. ({error})"));
        ctx.request_stop();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::log::Log;
    use crate::estimator::variables_state::HostState;
    use crate::model::Mode;
    use std::time::Duration;

    fn context() -> RunContext {
        let state = HostState {
            global_step: 10,
            values: Vec::new(),
            input_batches: 0,
            restored_from: None,
            warm_started_from: None,
            warm_start_note: None,
        };
        RunContext::new(
            Mode::Train,
            std::path::Path::new("unused"),
            Log::new(true),
            &[],
            state,
        )
    }

    fn values(loss: &[f64]) -> RunValues {
        RunValues {
            first_step: 11 - loss.len() as i64,
            global_step: 10,
            steps: loss.len() as u64,
            names: vec!["loss".into()],
            per_step: loss.iter().map(|l| vec![*l]).collect(),
            elapsed: Duration::ZERO,
            trace: None,
        }
    }

    #[test]
    fn fails_naming_the_step_or_warns_and_stops() {
        let mut ctx = context();
        let e = NanTensorHook::new(true)
            .after_run(&mut ctx, &values(&[0.5, f64::NAN, 0.4]))
            .unwrap_err();
        assert!(
            matches!(
                e,
                EstimatorError::LossDiverged {
                    step: 9,
                    what: "NaN"
                }
            ),
            "{e}"
        );
        assert!(!ctx.stop_requested());

        NanTensorHook::new(false)
            .after_run(&mut ctx, &values(&[0.5, f64::INFINITY]))
            .unwrap();
        assert!(ctx.stop_requested());
        assert_eq!(
            ctx.log.lines,
            ["Model diverged with loss = NaN. (the loss is infinite at step 10 (the last checkpoint, from before this loop, is intact))"]
        );

        let mut ctx = context();
        NanTensorHook::new(true)
            .after_run(&mut ctx, &values(&[0.5, 0.4]))
            .unwrap();
        assert!(!ctx.stop_requested() && ctx.log.lines.is_empty());
    }
}
