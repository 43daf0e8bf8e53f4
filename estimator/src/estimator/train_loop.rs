//! Training's loop: compiled loops of up to `iterations_per_loop` steps, with the hooks
//! called around each. Hooks end the loop (`StopAtStepHook` at the target step, a user's
//! stop request), and so does the estimator's stop flag.
//!
//! After a loop the host's copy of the variables, the global step and the input position are
//! updated before the hooks' `after_run`; a hook's error ends the call there, and since
//! checkpoints are written only by the `CheckpointSaverHook`, nothing of the failed loop is
//! saved.

use super::dealer::Dealer;
use super::hosts::{chief_decides, step_sums_over_hosts, Hosts};
use super::loop_runner::LoopRunner;
use crate::error::EstimatorError;
use crate::hooks::{HookList, RunContext, RunValues};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessel_compiler::ir::Array;

/// What the loop needs besides the hooks and the context.
pub(crate) struct TrainLoop<'a> {
    pub runner: &'a mut LoopRunner,
    /// This host's pipelines: one dealt to its shards, or one per shard.
    pub dealers: &'a [Dealer],
    /// Every shard, on every host.
    pub shards: usize,
    pub hosts: Hosts,
    /// This host's shards.
    pub block: Range<usize>,
    /// Batches of every host per batch this host deals (see `train`).
    pub input_scale: u64,
    pub iterations_per_loop: u64,
    /// The names of the outfed scalars (loss, host_call).
    pub outfed: &'a [String],
    /// The input position of the restored checkpoint (batches consumed before this call).
    pub start_batches: u64,
    pub global_batch: usize,
    pub stop_flag: &'a AtomicBool,
}

/// How the loop ended.
pub(crate) struct LoopEnd {
    pub final_loss: Option<f64>,
    pub run_time: Duration,
    /// The estimator's stop flag ended it.
    pub interrupted: bool,
}

/// Per-step values gathered from the shards' outfeeds during one loop.
#[derive(Clone, Default)]
struct StepValues {
    sums: Vec<f64>,
    shards: usize,
}

impl TrainLoop<'_> {
    /// Runs loops until a hook (or the stop flag) asks to stop.
    pub(crate) fn run(
        &mut self,
        ctx: &mut RunContext,
        hooks: &mut HookList<'_>,
    ) -> Result<LoopEnd, EstimatorError> {
        let start = ctx.global_step();
        let mut carried: Vec<Vec<Array>> = vec![ctx.state.carried()?; self.shards];
        // The device keeps the variables a loop returned, and the next loop starts from them
        // without writing them again: nothing changes `carried` or `ctx.state.values` between
        // loops (hooks see them read-only).
        let mut on_device = None;
        let mut end = LoopEnd {
            final_loss: None,
            run_time: Duration::ZERO,
            interrupted: false,
        };
        while !ctx.stop_requested() {
            let step = ctx.global_step();
            let k = match hooks.before_run(ctx)? {
                Some(at) => self.iterations_per_loop.min((at - step).max(1) as u64),
                None => self.iterations_per_loop,
            };
            if ctx.trace_next {
                self.runner.enable_trace();
            }
            self.runner.prepare(k)?;
            // Between loops the first shard's variables wait in `ctx.state` for the hooks and
            // the checkpoint saver: moved there and back, not copied (the MLP's variables and
            // Adam slots are 22 MB, copied after every loop before).
            if carried[0].len() == 1 {
                carried[0].append(&mut ctx.state.values);
            }
            let mut gathered = vec![StepValues::default(); k as usize];
            let outfed = self.outfed.len();
            let mut on_step = |_shard: usize, iteration: u64, values: Vec<Array>| {
                if let Some(slot) = gathered.get_mut(iteration as usize) {
                    if slot.sums.is_empty() {
                        slot.sums = vec![0.0; outfed];
                    }
                    for (sum, v) in slot.sums.iter_mut().zip(&values) {
                        *sum += v.data.get_f64(0);
                    }
                    slot.shards += 1;
                }
            };
            let started = Instant::now();
            // One pipeline dealt to this host's shards, or one pipeline per shard.
            let sources = match self.dealers {
                [one] => one.sources(self.block.len(), k),
                each => each.iter().flat_map(|d| d.sources(1, k)).collect(),
            };
            let sources = Hosts::place_sources(sources, &self.block, self.shards);
            let run = if std::mem::take(&mut ctx.trace_next) {
                self.runner
                    .run_traced(k, carried, sources, &mut on_step)
                    .map(|(c, t)| (c, None, Some(t)))
            } else {
                self.runner
                    .run_kept(k, carried, on_device, sources, &mut on_step)
                    .map(|(c, kept)| (c, kept, None))
            };
            let trace;
            (carried, on_device, trace) = match run {
                Ok(c) => c,
                Err(e) => {
                    return Err(self
                        .input_failure(start, ctx.last_saved_step)
                        .unwrap_or(EstimatorError::Session(e)))
                }
            };
            let elapsed = started.elapsed();
            end.run_time += elapsed;
            let local = gathered.into_iter().map(|s| (s.sums, s.shards)).collect();
            let per_step: Vec<Vec<f64>> = step_sums_over_hosts(self.hosts, outfed, local)?
                .into_iter()
                .map(|(sums, shards)| sums.iter().map(|v| v / shards.max(1) as f64).collect())
                .collect();
            ctx.state.values = carried[0].split_off(1);
            ctx.state.global_step = step + k as i64;
            // Batches the device consumed: the position a resumed run starts from.
            ctx.state.input_batches =
                self.start_batches + self.dealers[0].dealt() * self.input_scale;
            let values = RunValues {
                first_step: step + 1,
                global_step: step + k as i64,
                steps: k,
                names: self.outfed.to_vec(),
                per_step,
                elapsed,
                trace,
            };
            hooks.after_run(ctx, &values)?;
            end.final_loss = values.loss().last().copied();
            let step = values.global_step;
            ctx.log.progress(
                step as u64,
                end.final_loss.unwrap_or(f64::NAN),
                (step - start) as f64 * self.global_batch as f64
                    / end.run_time.as_secs_f64().max(1e-9),
            );
            if let Some(events) = ctx.events() {
                events.flush().map_err(super::train::summary_err)?;
            }
            // Consumed here, even at the target: a flag left set would stop the next
            // train() after its first loop.
            if self.stop_flag.swap(false, Ordering::SeqCst) {
                end.interrupted = true;
                ctx.request_stop();
            }
            // Every host runs the same loops: the chief's hooks and stop flag decide (0 go
            // on, 1 a hook stopped, 2 the flag stopped).
            if self.hosts.several() {
                let mine = if end.interrupted {
                    2
                } else {
                    i64::from(ctx.stop_requested())
                };
                let stop = chief_decides(self.hosts, mine)?;
                end.interrupted = stop == 2;
                ctx.stop_requested = stop != 0;
            }
        }
        Ok(end)
    }

    /// When a loop failed because its input did: the input_fn's error, at the step whose
    /// batch could not be made, with the checkpoint the next train resumes from. (The
    /// runtime's error would only say that the infeed closed.) `start`: the step this train
    /// call began at.
    fn input_failure(&self, start: i64, last_saved_step: i64) -> Option<EstimatorError> {
        let (dealt, message) = self.dealers.iter().find_map(Dealer::failure)?;
        // One dealer feeds every shard in turn; otherwise each shard has its own.
        let per_step = if self.dealers.len() == 1 {
            self.block.len()
        } else {
            1
        } as u64;
        Some(EstimatorError::Input(format!(
            "{message} (at step {}; the model_dir keeps the checkpoint for step {last_saved_step}, which the next train() resumes from)",
            start + (dealt / per_step) as i64 + 1
        )))
    }
}
