//! `train(input_fn, steps, max_steps)` and `train_with_hooks`: validate the call, trace the
//! model_fn, restore or initialize the variables, then run the loop (`train_loop`) with the
//! hooks that do training's duties (`crate::hooks`): the NaN check, the stop at the target
//! step, summaries, TF's log lines, the step rate and checkpoints, after the caller's hooks
//! and the spec's `training_hooks`.
//!
//! Nothing is written in the middle of a loop, so a failure in a loop (an input_fn error, a
//! corrupt record, a hook's error) leaves the model_dir as the last checkpoint left it. The
//! estimator's stop flag (the examples raise it on Ctrl-C and SIGTERM; the library installs
//! no signal handler) ends training after the running loop, with a checkpoint.
//!
//! While it runs, `train` holds the model_dir's trainer lock, and on start it removes the
//! temporaries of saves that were killed mid-write.

use super::dealer::Dealer;
use super::hosts::{
    agree_on_fast_allreduce, chief_decides, per_shard_components, split_batches, state_from_chief,
    Hosts,
};
use super::input_fn::{batches, Input};
use super::log::{tf_float, Log};
use super::loop_runner::LoopRunner;
use super::params::Params;
use super::tpu_estimator::TpuEstimator;
use super::trace_step::{fed_components, trace_step};
use super::train_loop::TrainLoop;
use super::variables_state::HostState;
use crate::checkpoint::{run_seed, ModelDirLock, Saver};
use crate::config::{InputPipelineConfig, RunConfig};
use crate::error::EstimatorError;
use crate::hooks::{
    CheckpointSaverHook, CheckpointSaverListener, Hook, HookList, LoggingTensorHook, NanTensorHook,
    RunContext, StepCounterHook, StopAtStepHook, SummarySaverHook,
};
use crate::model::Mode;
use crate::summary::EventWriter;

/// What `train` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainResult {
    /// The global step reached.
    pub global_step: i64,
    /// The loss of the last step (mean over the shards); `None` when training was skipped.
    pub final_loss: Option<f64>,
    /// Steps per second over the loops, compile time excluded.
    pub steps_per_sec: f64,
    /// Seconds spent compiling the loops.
    pub compile_secs: f64,
    /// Loop programs compiled by this call: one per loop length run.
    pub loops_compiled: usize,
    /// Checkpoints written by this call and the seconds they took in all.
    pub checkpoints: usize,
    pub checkpoint_secs: f64,
    /// The log's lines (without the `INFO:tessel:` prefix).
    pub log: Vec<String>,
}

impl TpuEstimator {
    /// TPUEstimator's `train`: to `max_steps` (resuming from the latest checkpoint), or for
    /// `steps` more steps. Both given, or a zero, is TF's error.
    pub fn train(
        &self,
        input_fn: impl Fn(&Params) -> Result<Input, EstimatorError>,
        steps: Option<u64>,
        max_steps: Option<u64>,
    ) -> Result<TrainResult, EstimatorError> {
        self.train_with_hooks(input_fn, steps, max_steps, Vec::new(), Vec::new())
    }

    /// TF's `train(input_fn, hooks, steps, max_steps, saving_listeners)`: `hooks` run after
    /// the built-in NaN check and stop-at-step hooks and before the spec's `training_hooks`
    /// and the summary, logging, step-counter and checkpoint hooks; `saving_listeners` are
    /// told around each checkpoint save.
    pub fn train_with_hooks<'h>(
        &self,
        input_fn: impl Fn(&Params) -> Result<Input, EstimatorError>,
        steps: Option<u64>,
        max_steps: Option<u64>,
        hooks: Vec<Box<dyn Hook + 'h>>,
        saving_listeners: Vec<Box<dyn CheckpointSaverListener>>,
    ) -> Result<TrainResult, EstimatorError> {
        let mut log = Log::new(self.quiet).with_progress(self.progress.clone());
        check_step_counts(steps, max_steps)?;
        let saver = Saver::new(&self.model_dir, self.config.keep_checkpoint_max)
            .with_format(self.config.checkpoint_format);
        // On several hosts the chief alone reads and writes the model_dir; what every host
        // must agree on (skip or train, the seed, the state) it sends the others.
        let hosts = Hosts::of_job();
        let chief = hosts.is_chief();
        let mut skip_at = -1;
        if let (Some(max), true) = (max_steps, chief) {
            let restored = saver.restore(self.config.fall_back_to_intact_checkpoint)?;
            if let Some(done) = restored.map(|r| r.checkpoint.global_step) {
                if i64::try_from(max).is_ok_and(|max| max <= done) {
                    skip_at = done;
                }
            }
        }
        let skip_at = chief_decides(hosts, skip_at)?;
        if skip_at >= 0 {
            log.info("Skipping training since max_steps has already saved.");
            return Ok(TrainResult {
                global_step: skip_at,
                final_loss: None,
                steps_per_sec: 0.0,
                compile_secs: 0.0,
                loops_compiled: 0,
                checkpoints: 0,
                checkpoint_secs: 0.0,
                log: log.lines,
            });
        }

        // One trainer per model_dir, held until train returns (a
        // train that has nothing to do, above, changes nothing and takes none).
        let lock = if chief {
            let lock = ModelDirLock::acquire(&self.model_dir)?;
            if let Some(holder) = lock.taken_over_from() {
                log.warn(format!(
                    "Took over the trainer lock of {}: that process ended without releasing it.",
                    holder.trim()
                ));
            }
            remove_leftover_temporaries(&self.model_dir, &mut log)?;
            Some(lock)
        } else {
            None
        };
        // The seed kept with the model_dir when none is configured: resumes draw alike.
        let seed = match (chief, self.config.tf_random_seed) {
            (_, Some(seed)) => seed,
            (true, None) => run_seed(&self.model_dir, None)?,
            (false, None) => 0,
        };
        let seed = chief_decides(hosts, seed)?;
        let config = RunConfig {
            tf_random_seed: Some(seed),
            ..self.config.clone()
        };

        let shards = self.replicas();
        let block = hosts.local_shards(shards)?;
        let local_shards = block.len();
        let params = self.params_for(self.train_batch_size);
        let per_shard_input =
            self.config.tpu_config.per_host_input_for_training == InputPipelineConfig::PerShard;
        // Per shard, input_fn learns which shard it feeds from params["context"] (the
        // shard index), so it can read its own part (`dataset.shard(num_shards, index)`).
        // Per host on several hosts (TF's PER_HOST_V1), it gets the host index there and the
        // per-host batch, which is split over the host's shards.
        let inputs: Vec<Input> = if per_shard_input {
            block
                .clone()
                .map(|i| input_fn(&params.clone().with("context", i as i64)))
                .collect::<Result<_, _>>()?
        } else if hosts.several() {
            let per_host = self.params_for_host_input(self.train_batch_size, hosts);
            vec![input_fn(&per_host)?]
        } else {
            vec![input_fn(&params)?]
        };
        let input_components = fed_components(inputs[0].dataset.element_spec())?;
        let split_host_batches = !per_shard_input && hosts.several();
        let components = if split_host_batches {
            per_shard_components(&input_components, local_shards)?
        } else {
            input_components.clone()
        };
        log.info("Calling model_fn.");
        let traced = trace_step(
            self.model_fn.as_ref(),
            Mode::Train,
            &params,
            &components,
            inputs[0].labels.as_deref(),
            shards,
            Some(seed),
        )?;
        log.info("Done calling model_fn.");
        if shards > 1 && !traced.cross_shard {
            return Err(EstimatorError::value(
                "CrossShardOptimizer must be used for model training on TPUs.",
            ));
        }

        let state = if chief {
            Some(HostState::restore_or_init(
                &traced.variables,
                &saver,
                &config,
                self.warm_start.as_ref(),
                &mut log,
            )?)
        } else {
            None
        };
        agree_on_fast_allreduce(hosts, &config)?;
        let state = state_from_chief(hosts, state)?;
        if let Some(file) = &state.restored_from {
            log.info(format!("Restoring parameters from {}", file.display()));
        }
        if let Some(from) = &state.warm_started_from {
            log.info(format!("Warm-starting from: {}", from.display()));
        }
        if let Some(note) = &state.warm_start_note {
            log.warn(note);
        }
        let start = state.global_step;
        let target = target_step(start, steps, max_steps)?;
        let start_batches = state.input_batches;
        // A host's pipeline makes one batch per step for all its shards: the checkpoint
        // counts every shard's batches, as one process dealing them all would.
        let input_scale = if split_host_batches {
            hosts.count as u64
        } else {
            1
        };
        let dealers: Vec<Dealer> = inputs
            .iter()
            .map(|input| {
                if split_host_batches {
                    let position = start_batches / shards as u64;
                    let host_batches = batches(&input.dataset, &input_components, position);
                    Dealer::new(split_batches(host_batches, local_shards))
                } else {
                    Dealer::new(batches(&input.dataset, &components, start_batches))
                }
            })
            .collect();
        let mut runner = LoopRunner::new(traced.module, traced.fed.clone(), self.device());
        let events = if chief {
            Some(EventWriter::create(&self.model_dir).map_err(summary_err)?)
        } else {
            None
        };

        let mut ctx = RunContext::new(Mode::Train, &self.model_dir, log, &traced.variables, state);
        ctx.last_step = Some(target);
        // Other hosts write nothing: without a saver and an event file their hooks save
        // no checkpoint and no summary.
        ctx.saver = chief.then_some(saver);
        ctx.events = events;
        let mut all_hooks: Vec<Box<dyn Hook + 'h>> = vec![
            Box::new(NanTensorHook::new(true)),
            Box::new(StopAtStepHook::last_step(target)),
        ];
        all_hooks.extend(hooks);
        all_hooks.extend(traced.hooks.into_iter().map(|h| h as Box<dyn Hook + 'h>));
        all_hooks.extend(self.training_duties(saving_listeners));
        let mut hooks = HookList::new(all_hooks);
        ctx.log.start_progress(start as u64, target as u64);
        let mut training = TrainLoop {
            runner: &mut runner,
            dealers: &dealers,
            shards,
            hosts,
            block,
            input_scale,
            iterations_per_loop: self.config.tpu_config.iterations_per_loop,
            outfed: &traced.outfed,
            start_batches,
            global_batch: self.train_batch_size,
            stop_flag: &self.stop,
        };
        let ended = hooks
            .begin(&mut ctx)
            .and_then(|()| hooks.after_create_session(&mut ctx))
            .and_then(|()| training.run(&mut ctx, &mut hooks))
            .and_then(|ended| hooks.end(&mut ctx).map(|()| ended));
        drop(lock);
        ctx.log.finish_progress();
        let ended = ended?;
        let step = ctx.global_step();
        if ended.interrupted && step < target {
            return Err(EstimatorError::Interrupted { step });
        }
        if let Some(loss) = ended.final_loss {
            ctx.log
                .info(format!("Loss for final step: {}.", tf_float(loss)));
        }
        Ok(TrainResult {
            global_step: step,
            final_loss: ended.final_loss,
            steps_per_sec: (step - start) as f64 / ended.run_time.as_secs_f64().max(1e-9),
            compile_secs: runner.compile_time.as_secs_f64(),
            loops_compiled: runner.compiled(),
            checkpoints: ctx.saved.0,
            checkpoint_secs: ctx.saved.1.as_secs_f64(),
            log: ctx.log.lines,
        })
    }

    /// The hooks that write what training leaves behind, from the config: summaries, TF's
    /// log lines, the step rate, checkpoints.
    fn training_duties<'h>(
        &self,
        saving_listeners: Vec<Box<dyn CheckpointSaverListener>>,
    ) -> Vec<Box<dyn Hook + 'h>> {
        let every_log = self.config.log_step_count_steps;
        vec![
            Box::new(SummarySaverHook::new(self.config.save_summary_steps)),
            Box::new(LoggingTensorHook::new(&["loss"], every_log)),
            Box::new(StepCounterHook::new(every_log, Some(self.train_batch_size))),
            Box::new(CheckpointSaverHook::new(
                self.config.checkpoint_interval(),
                saving_listeners,
            )),
        ]
    }
}

/// TF's checks of `steps` and `max_steps`.
fn check_step_counts(steps: Option<u64>, max_steps: Option<u64>) -> Result<(), EstimatorError> {
    match (steps, max_steps) {
        (Some(_), Some(_)) => Err(EstimatorError::value(
            "Can not provide both steps and max_steps.",
        )),
        (Some(0), _) => Err(EstimatorError::value("Must specify steps > 0, given: 0")),
        (_, Some(0)) => Err(EstimatorError::value(
            "Must specify max_steps > 0, given: 0",
        )),
        (None, None) => Err(EstimatorError::value(
            "give steps or max_steps: a compiled loop runs a known number of steps",
        )),
        _ => Ok(()),
    }
}

pub(crate) fn summary_err(e: crate::summary::SummaryError) -> EstimatorError {
    EstimatorError::Write {
        what: "the event file".to_string(),
        message: e.to_string(),
    }
}

/// The step training stops at: `max_steps`, or `steps` past `start`. A count beyond the
/// device's s32 step counter is refused, never wrapped.
fn target_step(
    start: i64,
    steps: Option<u64>,
    max_steps: Option<u64>,
) -> Result<i64, EstimatorError> {
    let (target, given) = match (steps, max_steps) {
        (_, Some(max)) => (i64::try_from(max).ok(), format!("max_steps={max}")),
        (Some(n), None) => (
            i64::try_from(n).ok().and_then(|n| start.checked_add(n)),
            format!("steps={n} from step {start}"),
        ),
        (None, None) => (None, "no step count".to_string()),
    };
    match target {
        Some(t) if t <= i32::MAX as i64 => Ok(t),
        _ => Err(EstimatorError::value(format!(
            "{given} would train past step {}, the last the device's s32 step counter holds (TPUs have no 64-bit values)",
            i32::MAX
        ))),
    }
}

/// Removes the temporaries that saves killed mid-write left in the model_dir (the trainer
/// lock is held, so no save of another trainer is writing one), and says which.
fn remove_leftover_temporaries(
    model_dir: &std::path::Path,
    log: &mut Log,
) -> Result<(), EstimatorError> {
    let leftovers = tessel_runtime::durable::leftover_temporaries(model_dir).map_err(|e| {
        EstimatorError::Write {
            what: model_dir.display().to_string(),
            message: e.to_string(),
        }
    })?;
    for file in leftovers {
        match std::fs::remove_file(&file) {
            Ok(()) => log.warn(format!(
                "Removed {}, left by a save that was interrupted.",
                file.display()
            )),
            Err(e) => log.warn(format!(
                "Cannot remove {}, left by a save that was interrupted: {e}",
                file.display()
            )),
        }
    }
    Ok(())
}
