//! `train(input_fn, steps, max_steps)`: compiled loops of `iterations_per_loop` steps fed
//! from the input_fn's dataset, with TF's logs, summaries and checkpoints between loops.
//!
//! Between two loops the host: checks every variable and the loss for NaN and infinity
//! (and stops, naming the variable and the steps, before anything is saved); logs TF's lines
//! every `log_step_count_steps`; writes summaries every `save_summary_steps`; saves a
//! checkpoint when one is due; and stops, with a checkpoint, when the estimator's stop flag is
//! raised (the examples raise it on Ctrl-C and SIGTERM; the library installs no signal
//! handler). Nothing is written in the middle of a loop, so a failure in a loop (an input_fn
//! error, a corrupt record) leaves the model_dir as the last checkpoint left it.
//!
//! While it runs, `train` holds the model_dir's trainer lock, and on start it removes the
//! temporaries of saves that were killed mid-write.

use super::dealer::Dealer;
use super::input_fn::{batches, Input};
use super::log::{tf_float, tf_g, Log};
use super::loop_runner::LoopRunner;
use super::params::Params;
use super::tpu_estimator::TpuEstimator;
use super::trace_step::{fed_components, trace_step};
use super::variables_state::{first_non_finite, HostState};
use crate::checkpoint::{run_seed, ModelDirLock, Saver};
use crate::config::{CheckpointInterval, InputPipelineConfig, RunConfig};
use crate::error::EstimatorError;
use crate::model::Mode;
use crate::summary::EventWriter;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tessel_compiler::ir::Array;

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
    /// Checkpoints written by this call and the seconds they took in all.
    pub checkpoints: usize,
    pub checkpoint_secs: f64,
    /// The log's lines (without the `INFO:tessel:` prefix).
    pub log: Vec<String>,
}

/// Per-step values gathered from the shards' outfeeds during one loop.
#[derive(Clone, Default)]
struct StepValues {
    sums: Vec<f64>,
    shards: usize,
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
        let mut log = Log::new(self.quiet).with_progress(self.progress.clone());
        match (steps, max_steps) {
            (Some(_), Some(_)) => {
                return Err(EstimatorError::value(
                    "Can not provide both steps and max_steps.",
                ))
            }
            (Some(0), _) => return Err(EstimatorError::value("Must specify steps > 0, given: 0")),
            (_, Some(0)) => {
                return Err(EstimatorError::value(
                    "Must specify max_steps > 0, given: 0",
                ))
            }
            (None, None) => {
                return Err(EstimatorError::value(
                    "give steps or max_steps: a compiled loop runs a known number of steps",
                ))
            }
            _ => {}
        }
        let saver = Saver::new(&self.model_dir, self.config.keep_checkpoint_max)
            .with_format(self.config.checkpoint_format);
        if let Some(max) = max_steps {
            let restored = saver.restore(self.config.fall_back_to_intact_checkpoint)?;
            if let Some(done) = restored.map(|r| r.checkpoint.global_step) {
                if i64::try_from(max).is_ok_and(|max| max <= done) {
                    log.info("Skipping training since max_steps has already saved.");
                    return Ok(TrainResult {
                        global_step: done,
                        final_loss: None,
                        steps_per_sec: 0.0,
                        compile_secs: 0.0,
                        checkpoints: 0,
                        checkpoint_secs: 0.0,
                        log: log.lines,
                    });
                }
            }
        }

        // One trainer per model_dir, held until train returns (a
        // train that has nothing to do, above, changes nothing and takes none).
        let lock = ModelDirLock::acquire(&self.model_dir)?;
        if let Some(holder) = lock.taken_over_from() {
            log.warn(format!(
                "Took over the trainer lock of {}: that process ended without releasing it.",
                holder.trim()
            ));
        }
        remove_leftover_temporaries(&self.model_dir, &mut log)?;
        // The seed kept with the model_dir when none is configured: resumes draw alike.
        let seed = run_seed(&self.model_dir, self.config.tf_random_seed)?;
        let config = RunConfig {
            tf_random_seed: Some(seed),
            ..self.config.clone()
        };

        let shards = self.replicas();
        let params = self.params_for(self.train_batch_size);
        let per_shard_input =
            self.config.tpu_config.per_host_input_for_training == InputPipelineConfig::PerShard;
        // Per shard, input_fn learns which shard it feeds from params["context"] (the
        // shard index), so it can read its own part (`dataset.shard(num_shards, index)`).
        let inputs: Vec<Input> = if per_shard_input {
            (0..shards)
                .map(|i| input_fn(&params.clone().with("context", i as i64)))
                .collect::<Result<_, _>>()?
        } else {
            vec![input_fn(&params)?]
        };
        let components = fed_components(inputs[0].dataset.element_spec())?;
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

        let mut state = HostState::restore_or_init(
            &traced.variables,
            &saver,
            &config,
            self.warm_start.as_ref(),
            &mut log,
        )?;
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
        let dealers: Vec<Dealer> = inputs
            .iter()
            .map(|input| Dealer::new(batches(&input.dataset, &components, state.input_batches)))
            .collect();
        let mut runner = LoopRunner::new(traced.module, traced.fed.clone(), self.device());
        let mut events =
            EventWriter::create(&self.model_dir).map_err(|e| EstimatorError::Write {
                what: "the event file".into(),
                message: e.to_string(),
            })?;
        let checkpoint_interval = self.config.checkpoint_interval();
        let mut last_saved_step = start;
        let mut last_saved_at = Instant::now();
        // (checkpoints written, time spent writing them)
        let mut saved = (0usize, Duration::ZERO);
        if state.restored_from.is_none() {
            self.save(&saver, &state, &traced.variables, &mut log, &mut saved)?;
        }

        let ipl = self.config.tpu_config.iterations_per_loop;
        let mut step = start;
        let mut final_loss = None;
        let mut run_time = Duration::ZERO;
        let mut since_log = (start, Duration::ZERO);
        let mut first_log = true;
        let mut carried: Vec<Vec<Array>> = vec![state.carried()?; shards];
        log.start_progress(start as u64, target as u64);
        let global_batch = self.train_batch_size as f64;
        while step < target {
            let k = ipl.min((target - step) as u64);
            runner.prepare(k)?;
            let mut gathered = vec![StepValues::default(); k as usize];
            let outfed = traced.outfed.len();
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
            // One pipeline dealt to every shard, or one pipeline per shard.
            let sources = match dealers.as_slice() {
                [one] => one.sources(shards, k),
                each => each.iter().flat_map(|d| d.sources(1, k)).collect(),
            };
            carried = match runner.run(k, carried, sources, &mut on_step) {
                Ok(c) => c,
                Err(e) => {
                    log.finish_progress();
                    return Err(input_failure(&dealers, shards, start, last_saved_step)
                        .unwrap_or(EstimatorError::Session(e)));
                }
            };
            let elapsed = started.elapsed();
            run_time += elapsed;
            since_log.1 += elapsed;
            let first_step = step + 1;
            step += k as i64;

            // NaN check before anything of this loop is kept.
            let values = carried[0][1..].to_vec();
            if let Some((variable, what)) = first_non_finite(&traced.variables, &values) {
                log.finish_progress();
                return Err(EstimatorError::Diverged {
                    variable: variable.to_string(),
                    what,
                    first_step,
                    last_step: step,
                });
            }
            let means: Vec<Vec<f64>> = gathered
                .iter()
                .map(|s| s.sums.iter().map(|v| v / s.shards.max(1) as f64).collect())
                .collect();
            for (i, m) in means.iter().enumerate() {
                if let Some(loss) = m.first().filter(|l| !l.is_finite()) {
                    log.finish_progress();
                    return Err(EstimatorError::LossDiverged {
                        what: if loss.is_nan() { "NaN" } else { "infinite" },
                        step: first_step + i as i64,
                    });
                }
            }
            state.values = values;
            state.global_step = step;
            // Batches the device consumed: the position a resumed run starts from.
            state.input_batches = start_batches + dealers[0].dealt();
            final_loss = means.last().and_then(|m| m.first().copied());

            // Summaries every save_summary_steps (and at the last step).
            for (i, m) in means.iter().enumerate() {
                let s = first_step + i as i64;
                if s % self.config.save_summary_steps as i64 == 0 || s == target {
                    for (name, v) in traced.outfed.iter().zip(m) {
                        events.scalar(name, s, *v as f32).map_err(summary_err)?;
                    }
                }
            }
            // TF's log lines every log_step_count_steps.
            let every = self.config.log_step_count_steps as i64;
            if first_log || step / every > (step - k as i64) / every || step == target {
                let loss = final_loss.unwrap_or(f64::NAN);
                let secs = since_log.1.as_secs_f64();
                if first_log {
                    log.info(format!("loss = {}, step = {step}", tf_float(loss)));
                } else {
                    log.info(format!(
                        "loss = {}, step = {step} ({secs:.3} sec)",
                        tf_float(loss)
                    ));
                    let rate = (step - since_log.0) as f64 / secs.max(1e-9);
                    log.info(format!("global_step/sec: {}", tf_g(rate)));
                    log.info(format!("examples/sec: {}", tf_g(rate * global_batch)));
                    events
                        .scalar("global_step/sec", step, rate as f32)
                        .and_then(|()| {
                            events.scalar("examples/sec", step, (rate * global_batch) as f32)
                        })
                        .map_err(summary_err)?;
                }
                first_log = false;
                since_log = (step, Duration::ZERO);
            }
            log.progress(
                step as u64,
                final_loss.unwrap_or(f64::NAN),
                (step - start) as f64 * global_batch / run_time.as_secs_f64().max(1e-9),
            );
            events.flush().map_err(summary_err)?;

            let due = match checkpoint_interval {
                CheckpointInterval::Steps(n) => step / n as i64 > last_saved_step / n as i64,
                CheckpointInterval::Secs(s) => last_saved_at.elapsed().as_secs() >= s,
            };
            let stopping = self.stop.load(Ordering::SeqCst);
            if due || step == target || stopping {
                self.save(&saver, &state, &traced.variables, &mut log, &mut saved)?;
                last_saved_step = step;
                last_saved_at = Instant::now();
            }
            if stopping {
                // Consumed here, even at the target: a flag left set would stop the next
                // train() after its first loop.
                self.stop.store(false, Ordering::SeqCst);
                if step < target {
                    log.finish_progress();
                    return Err(EstimatorError::Interrupted { step });
                }
            }
        }
        drop(lock);
        log.finish_progress();
        if let Some(loss) = final_loss {
            log.info(format!("Loss for final step: {}.", tf_float(loss)));
        }
        Ok(TrainResult {
            global_step: step,
            final_loss,
            steps_per_sec: (step - start) as f64 / run_time.as_secs_f64().max(1e-9),
            compile_secs: runner.compile_time.as_secs_f64(),
            checkpoints: saved.0,
            checkpoint_secs: saved.1.as_secs_f64(),
            log: log.lines,
        })
    }

    fn save(
        &self,
        saver: &Saver,
        state: &HostState,
        variables: &[crate::model::variables::Variable],
        log: &mut Log,
        saved: &mut (usize, Duration),
    ) -> Result<(), EstimatorError> {
        let started = Instant::now();
        log.info(format!(
            "Saving checkpoints for {} into {}.",
            state.global_step,
            saver.save_path().display()
        ));
        saver.save(&state.checkpoint(variables))?;
        saved.0 += 1;
        saved.1 += started.elapsed();
        Ok(())
    }
}

/// When a loop failed because its input did: the input_fn's error, at the step whose batch
/// could not be made, with the checkpoint the next train resumes from. (The runtime's
/// error would only say that the infeed closed.) `start`: the step this train call began at.
fn input_failure(
    dealers: &[Dealer],
    shards: usize,
    start: i64,
    last_saved_step: i64,
) -> Option<EstimatorError> {
    let (dealt, message) = dealers.iter().find_map(Dealer::failure)?;
    // One dealer feeds every shard in turn; otherwise each shard has its own.
    let per_step = if dealers.len() == 1 { shards } else { 1 } as u64;
    Some(EstimatorError::Input(format!(
        "{message} (at step {}; the model_dir keeps the checkpoint for step {last_saved_step}, which the next train() resumes from)",
        start + (dealt / per_step) as i64 + 1
    )))
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
