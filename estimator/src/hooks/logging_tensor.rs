//! TF's `LoggingTensorHook`: `loss = 0.12, step = 1000 (4.5 sec)` at the log cadence.

use super::{Hook, RunContext, RunValues};
use crate::error::EstimatorError;
use crate::estimator::log::tf_float;
use std::time::Duration;

/// TF's `LoggingTensorHook({"loss": loss, "step": global_step}, every_n_iter)`, as the
/// estimator installs it: after the first loop, after each loop that passes a multiple of
/// `every_n_iter`, and after the last, it logs the named outfed values of the loop's last
/// step and the global step, with the device seconds since the previous line.
pub struct LoggingTensorHook {
    names: Vec<String>,
    every_n_iter: u64,
    first: bool,
    since: Duration,
}

impl LoggingTensorHook {
    /// `names`: outfed values (`loss`, `host_call` names); `every_n_iter` of 0 is taken as 1.
    pub fn new(names: &[&str], every_n_iter: u64) -> LoggingTensorHook {
        LoggingTensorHook {
            names: names.iter().map(|n| n.to_string()).collect(),
            every_n_iter: every_n_iter.max(1),
            first: true,
            since: Duration::ZERO,
        }
    }
}

/// Whether a line is due after a loop that ended at `values.global_step()`: the first loop,
/// one that passes a multiple of `every`, and the last (TF's `every_n_iter` seen per loop).
pub(super) fn line_due(first: bool, every: u64, ctx: &RunContext, values: &RunValues) -> bool {
    let every = every as i64;
    let step = values.global_step();
    let before = values.first_step() - 1;
    first || step / every > before / every || Some(step) == ctx.last_step() || ctx.stop_requested()
}

impl Hook for LoggingTensorHook {
    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        self.since += values.elapsed();
        if !line_due(self.first, self.every_n_iter, ctx, values) {
            return Ok(());
        }
        let mut parts: Vec<String> = self
            .names
            .iter()
            .map(|name| {
                let v = values
                    .values(name)
                    .and_then(|v| v.last().copied())
                    .unwrap_or(f64::NAN);
                format!("{name} = {}", tf_float(v))
            })
            .collect();
        parts.push(format!("step = {}", values.global_step()));
        let mut line = parts.join(", ");
        if !self.first {
            line.push_str(&format!(" ({:.3} sec)", self.since.as_secs_f64()));
        }
        ctx.info(line);
        self.first = false;
        self.since = Duration::ZERO;
        Ok(())
    }
}
