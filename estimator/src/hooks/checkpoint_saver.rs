//! TF's `CheckpointSaverHook` and its `CheckpointSaverListener`s.

use super::{Hook, RunContext, RunValues};
use crate::config::CheckpointInterval;
use crate::error::EstimatorError;
use std::time::Instant;

/// TF's `CheckpointSaverListener`: told around each save of the [`CheckpointSaverHook`].
pub trait CheckpointSaverListener: Send {
    fn begin(&mut self, _ctx: &mut RunContext) -> Result<(), EstimatorError> {
        Ok(())
    }

    fn before_save(
        &mut self,
        _ctx: &mut RunContext,
        _global_step: i64,
    ) -> Result<(), EstimatorError> {
        Ok(())
    }

    /// After the checkpoint of `global_step` is written. As TF's `after_save` returning
    /// `True`, a listener may call `ctx.request_stop()` here to end training.
    fn after_save(
        &mut self,
        _ctx: &mut RunContext,
        _global_step: i64,
    ) -> Result<(), EstimatorError> {
        Ok(())
    }

    fn end(&mut self, _ctx: &mut RunContext, _global_step: i64) -> Result<(), EstimatorError> {
        Ok(())
    }
}

/// TF's `CheckpointSaverHook(checkpoint_dir, save_secs | save_steps, listeners)`, on the
/// training's saver (its format and `keep_checkpoint_max`): a checkpoint of the step the run
/// starts from when nothing was restored, one after each loop that passes a multiple of
/// `save_steps` (or after `save_secs` seconds), and one at the end unless the last step is
/// saved already. Outside `train` it saves nothing.
pub struct CheckpointSaverHook {
    interval: CheckpointInterval,
    listeners: Vec<Box<dyn CheckpointSaverListener>>,
    last_saved_step: i64,
    last_saved_at: Instant,
}

impl CheckpointSaverHook {
    pub fn new(
        interval: CheckpointInterval,
        listeners: Vec<Box<dyn CheckpointSaverListener>>,
    ) -> CheckpointSaverHook {
        CheckpointSaverHook {
            interval,
            listeners,
            last_saved_step: 0,
            last_saved_at: Instant::now(),
        }
    }

    fn save(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        let Some(saver) = ctx.saver.take() else {
            return Ok(());
        };
        let step = ctx.global_step();
        let result = (|| {
            for l in &mut self.listeners {
                l.before_save(ctx, step)?;
            }
            let started = Instant::now();
            ctx.info(format!(
                "Saving checkpoints for {step} into {}.",
                saver.save_path().display()
            ));
            saver.save(&ctx.state.checkpoint(&ctx.variables))?;
            ctx.saved.0 += 1;
            ctx.saved.1 += started.elapsed();
            ctx.last_saved_step = step;
            for l in &mut self.listeners {
                l.after_save(ctx, step)?;
            }
            Ok(())
        })();
        ctx.saver = Some(saver);
        self.last_saved_step = step;
        self.last_saved_at = Instant::now();
        result
    }
}

impl Hook for CheckpointSaverHook {
    fn begin(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        self.listeners.iter_mut().try_for_each(|l| l.begin(ctx))
    }

    fn after_create_session(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        self.last_saved_step = ctx.global_step();
        self.last_saved_at = Instant::now();
        if ctx.state.restored_from.is_none() {
            self.save(ctx)?;
        }
        Ok(())
    }

    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        let step = values.global_step();
        let due = match self.interval {
            CheckpointInterval::Steps(n) => {
                let n = n.max(1) as i64;
                step / n > self.last_saved_step / n
            }
            CheckpointInterval::Secs(s) => self.last_saved_at.elapsed().as_secs() >= s,
        };
        if due {
            self.save(ctx)?;
        }
        Ok(())
    }

    fn end(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        let step = ctx.global_step();
        if step != self.last_saved_step {
            self.save(ctx)?;
        }
        self.listeners.iter_mut().try_for_each(|l| l.end(ctx, step))
    }
}
