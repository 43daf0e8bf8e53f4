//! `predict(input_fn, predict_keys)`: the PREDICT step in compiled loops of
//! `iterations_per_loop` batches per device call, run ahead by a producer thread while the
//! caller consumes one prediction per example.
//!
//! A reader thread pulls the dataset's batches and pads the short last one (`padding.rs`), up
//! to a loop's worth ahead, so the input pipeline works while the device runs. The producer
//! takes a loop's batches from it, shortens the last loop to the batches left (shards without
//! a batch then get an all-padding one), runs the loop, strips the padded rows and sends that
//! loop's predictions, in input order, over a channel one loop deep. Dropping the iterator closes the channel and sets a
//! stop flag: the producer finishes the loop it is running (a bounded amount of work), sees
//! either, and ends; the drop joins it. TF runs one batch per `session.run` here
//! (tensorflow/tpu#726).

use super::dealer::{Batch, Dealer};
use super::input_fn::Input;
use super::log::Log;
use super::loop_runner::LoopRunner;
use super::padding::{pad_batch, padded_components, padding_batch, row};
use super::params::Params;
use super::tpu_estimator::TpuEstimator;
use super::trace_step::{trace_step, FedComponent};
use super::variables_state::restore_for;
use crate::error::EstimatorError;
use crate::hooks::{Hook, HookList, RunContext, RunValues};
use crate::input::dataset::DatasetIterator;
use crate::input::ElementSpec;
use crate::model::Mode;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use tessel_compiler::ir::Array;
use tessel_runtime::session::Device;

/// One example's predictions: prediction key → that example's row.
pub type Prediction = BTreeMap<String, Array>;

/// The iterator `predict` returns: one [`Prediction`] per input example, in input order. It
/// may be dropped at any time; the producer thread then stops after its running loop.
pub struct PredictIter {
    rx: Option<Receiver<Result<Vec<Prediction>, EstimatorError>>>,
    ready: VecDeque<Prediction>,
    stop: Arc<AtomicBool>,
    producer: Option<JoinHandle<()>>,
    /// The log lines of the call (model_fn, restore).
    pub log: Vec<String>,
}

impl Iterator for PredictIter {
    type Item = Result<Prediction, EstimatorError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(p) = self.ready.pop_front() {
                return Some(Ok(p));
            }
            match self.rx.as_ref()?.recv() {
                Ok(Ok(batch)) => self.ready.extend(batch),
                Ok(Err(e)) => {
                    // An error ends the iteration after it is reported.
                    self.rx = None;
                    return Some(Err(e));
                }
                Err(_) => {
                    // The producer is gone: the end, unless it panicked (then say so rather
                    // than end early as if the input had).
                    self.rx = None;
                    let joined = self.producer.take().map(JoinHandle::join);
                    return match joined {
                        Some(Err(panic)) => Some(Err(EstimatorError::Predict(format!(
                            "the predict thread panicked: {}",
                            panic_message(&panic)
                        )))),
                        _ => None,
                    };
                }
            }
        }
    }
}

impl Drop for PredictIter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Closing the channel first unblocks a producer waiting to send.
        self.rx = None;
        if let Some(handle) = self.producer.take() {
            // A panicked producer has already reported nothing more to give.
            let _ = handle.join();
        }
    }
}

/// What the producer thread needs.
struct Producer {
    runner: LoopRunner,
    carried: Vec<Vec<Array>>,
    /// Padded batches and their real rows from the reader thread.
    batches: Option<Receiver<Result<(Batch, usize), EstimatorError>>>,
    reader: Option<JoinHandle<()>>,
    components: Vec<FedComponent>,
    shards: usize,
    iterations_per_loop: u64,
    per_shard: usize,
    /// (prediction key, its index among the outfed values).
    keys: Vec<(String, usize)>,
    tx: SyncSender<Result<Vec<Prediction>, EstimatorError>>,
    stop: Arc<AtomicBool>,
    /// The caller's and the spec's prediction hooks, around each loop.
    ctx: RunContext,
    hooks: HookList<'static>,
}

impl TpuEstimator {
    /// TPUEstimator's `predict(input_fn, predict_keys)`: the latest checkpoint's model (or the
    /// initial values, with TF's warning, when there is none) on every example of the
    /// input_fn's dataset, which batches with `batch(params["batch_size"])`; a short last
    /// batch is padded and its padded rows' predictions dropped. `predict_keys` selects
    /// prediction keys (all when `None`).
    pub fn predict(
        &self,
        input_fn: impl Fn(&Params) -> Result<Input, EstimatorError>,
        predict_keys: Option<&[&str]>,
    ) -> Result<PredictIter, EstimatorError> {
        self.predict_with_hooks(input_fn, predict_keys, Vec::new())
    }

    /// TF's `predict(input_fn, predict_keys, hooks)`: `hooks` (then the spec's
    /// `prediction_hooks`) run on the producer thread around each loop; a stop request ends
    /// the predictions after that loop. `begin` and `after_create_session` run before this
    /// returns, so their errors are this call's.
    pub fn predict_with_hooks(
        &self,
        input_fn: impl Fn(&Params) -> Result<Input, EstimatorError>,
        predict_keys: Option<&[&str]>,
        hooks: Vec<Box<dyn Hook>>,
    ) -> Result<PredictIter, EstimatorError> {
        let mut log = Log::new(self.quiet);
        let device: Device = self.chief_device("predict")?;
        let predict_batch = self.predict_batch_size.ok_or_else(|| {
            EstimatorError::value(
                "predict_batch_size in TPUEstimator constructor cannot be `None` if .predict is running on TPU.",
            )
        })?;
        let shards = self.replicas();
        let per_shard = predict_batch / shards;
        let params = self.params_for(predict_batch);
        let input = input_fn(&params)?;
        let spec = input.dataset.element_spec().clone();
        let components = padded_components(&spec, per_shard)?;
        log.info("Calling model_fn.");
        let traced = trace_step(
            self.model_fn.as_ref(),
            Mode::Predict,
            &params,
            &components,
            input.labels.as_deref(),
            shards,
            self.config.tf_random_seed,
        )?;
        log.info("Done calling model_fn.");
        let keys = select_keys(&traced.outfed, predict_keys)?;
        let state = restore_for(self, &traced.variables, "predict", &mut log)?;
        let carried = vec![state.carried()?; shards];
        let lines = log.lines.clone();
        let mut ctx = RunContext::new(
            Mode::Predict,
            &self.model_dir,
            Log::new(self.quiet),
            &traced.variables,
            state,
        );
        let mut all_hooks = hooks;
        all_hooks.extend(traced.hooks);
        let mut hooks = HookList::new(all_hooks);
        hooks.begin(&mut ctx)?;
        hooks.after_create_session(&mut ctx)?;
        let mut runner = LoopRunner::new(traced.module, traced.fed.clone(), device);
        // Compile here, so a step the device cannot run fails the call, not the iteration.
        let ipl = self.config.tpu_config.iterations_per_loop;
        runner.prepare(ipl)?;
        let (tx, rx) = sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let (batch_tx, batch_rx) = sync_channel((ipl as usize * shards).max(1));
        let reader = {
            let iter = input.dataset.iter();
            let components = components.clone();
            std::thread::Builder::new()
                .name("predict-input".into())
                .spawn(move || read(iter, spec, components, batch_tx))
                .map_err(|e| EstimatorError::Input(format!("starting the input thread: {e}")))?
        };
        let producer = Producer {
            runner,
            carried,
            batches: Some(batch_rx),
            reader: Some(reader),
            components,
            shards,
            iterations_per_loop: ipl,
            per_shard,
            keys,
            tx,
            stop: Arc::clone(&stop),
            ctx,
            hooks,
        };
        let handle = std::thread::Builder::new()
            .name("predict".into())
            .spawn(move || producer.run())
            .map_err(|e| EstimatorError::Input(format!("starting the predict thread: {e}")))?;
        Ok(PredictIter {
            rx: Some(rx),
            ready: VecDeque::new(),
            stop,
            producer: Some(handle),
            log: lines,
        })
    }
}

/// The outfed indices of the requested keys, in the model_fn's order of predictions.
fn select_keys(
    outfed: &[String],
    predict_keys: Option<&[&str]>,
) -> Result<Vec<(String, usize)>, EstimatorError> {
    let all: Vec<(String, usize)> = outfed.iter().cloned().zip(0..).collect();
    let Some(wanted) = predict_keys else {
        return Ok(all);
    };
    if wanted.is_empty() {
        return Err(EstimatorError::value(format!(
            "Expected to run at least one output from {outfed:?}, provided []."
        )));
    }
    if let Some(missing) = wanted.iter().find(|k| !outfed.iter().any(|o| o == *k)) {
        return Err(EstimatorError::value(format!(
            "Expected to find {missing:?} in predictions; the model_fn's predictions are {outfed:?}"
        )));
    }
    Ok(all
        .into_iter()
        .filter(|(k, _)| wanted.contains(&k.as_str()))
        .collect())
}

/// A panic's message, when it has one.
fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// The reader thread: the dataset's elements padded to the step's batch, until the input ends,
/// fails, or the producer is gone.
fn read(
    mut iter: DatasetIterator,
    spec: ElementSpec,
    components: Vec<FedComponent>,
    tx: SyncSender<Result<(Batch, usize), EstimatorError>>,
) {
    for element in iter.by_ref() {
        let batch = element
            .map_err(|e| EstimatorError::Input(e.to_string()))
            .and_then(|e| pad_batch(e.values, &spec, &components));
        let failed = batch.is_err();
        if tx.send(batch).is_err() || failed {
            return;
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // Closing the reader's channel unblocks it; it ends after the element it is reading.
        self.batches = None;
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl Producer {
    fn run(mut self) {
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let (mut result, ended) = self.one_loop();
            if ended && result.is_ok() {
                if let Err(e) = self.hooks.end(&mut self.ctx) {
                    result = Err(e);
                }
            }
            let failed = result.is_err();
            let empty = matches!(&result, Ok(p) if p.is_empty());
            if !(empty && ended) && self.tx.send(result).is_err() {
                return; // the iterator was dropped
            }
            if failed || ended {
                return;
            }
        }
    }

    /// Runs the next loop; its predictions and whether the input ended.
    fn one_loop(&mut self) -> (Result<Vec<Prediction>, EstimatorError>, bool) {
        let want = self.iterations_per_loop as usize * self.shards;
        let mut batches: Vec<Batch> = Vec::with_capacity(want);
        let mut rows: Vec<usize> = Vec::with_capacity(want);
        let mut ended = false;
        if let Err(e) = self.hooks.before_run(&mut self.ctx) {
            return (Err(e), true);
        }
        let Some(input) = &self.batches else {
            return (Ok(Vec::new()), true);
        };
        while batches.len() < want {
            match input.recv() {
                Err(_) => {
                    // The reader is done: the input ended, unless the reader panicked (a
                    // panicking map function, say), which must not pass for the end.
                    if let Some(Err(panic)) = self.reader.take().map(JoinHandle::join) {
                        return (
                            Err(EstimatorError::Predict(format!(
                                "the input thread panicked: {}",
                                panic_message(&panic)
                            ))),
                            true,
                        );
                    }
                    ended = true;
                    break;
                }
                Ok(Err(e)) => return (Err(e), true),
                Ok(Ok((b, r))) => {
                    batches.push(b);
                    rows.push(r);
                }
            }
        }
        if batches.is_empty() {
            return (Ok(Vec::new()), true);
        }
        // The last loop runs the iterations left; idle shards get all-padding batches.
        let k = batches.len().div_ceil(self.shards);
        while batches.len() < k * self.shards {
            batches.push(padding_batch(&self.components));
            rows.push(0);
        }
        let shards = self.shards;
        let dealer = Dealer::new(Box::new(batches.into_iter().map(Ok)));
        let mut outfed: Vec<Vec<Option<Vec<Array>>>> = vec![vec![None; shards]; k];
        let mut on_step = |shard: usize, iteration: u64, values: Vec<Array>| {
            if let Some(slot) = outfed
                .get_mut(iteration as usize)
                .and_then(|s| s.get_mut(shard))
            {
                *slot = Some(values);
            }
        };
        let carried = std::mem::take(&mut self.carried);
        let started = std::time::Instant::now();
        match self.runner.run(
            k as u64,
            carried,
            dealer.sources(shards, k as u64),
            &mut on_step,
        ) {
            // PREDICT changes no variable: the state after the loop is the next loop's.
            Ok(next) => self.carried = next,
            Err(e) => return (Err(e.into()), true),
        }
        let global_step = self.ctx.global_step();
        let values = RunValues {
            first_step: global_step,
            global_step,
            steps: k as u64,
            names: Vec::new(),
            per_step: Vec::new(),
            elapsed: started.elapsed(),
            trace: None,
        };
        if let Err(e) = self.hooks.after_run(&mut self.ctx, &values) {
            return (Err(e), true);
        }
        let ended = ended || self.ctx.stop_requested();
        let mut out = Vec::new();
        for (iteration, per_shard) in outfed.into_iter().enumerate() {
            for (shard, values) in per_shard.into_iter().enumerate() {
                let real = rows[iteration * shards + shard];
                let Some(values) = values else {
                    return (
                        Err(EstimatorError::ModelFn(format!(
                            "no predictions came back for shard {shard} in iteration {iteration}"
                        ))),
                        true,
                    );
                };
                for (key, i) in &self.keys {
                    let dims = &values[*i].shape.dims;
                    if dims.first() != Some(&(self.per_shard as i64)) {
                        return (
                            Err(EstimatorError::ModelFn(format!(
                                "prediction `{key}` is {}: every prediction must have the batch ({}) as its first dimension",
                                values[*i].shape, self.per_shard
                            ))),
                            true,
                        );
                    }
                }
                for r in 0..real {
                    out.push(
                        self.keys
                            .iter()
                            .map(|(key, i)| (key.clone(), row(&values[*i], r)))
                            .collect(),
                    );
                }
            }
        }
        (Ok(out), ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_producer_is_an_error_not_an_early_end() {
        let (tx, rx) = sync_channel(1);
        let handle = std::thread::spawn(move || {
            tx.send(Ok(vec![Prediction::new()])).unwrap();
            panic!("boom");
        });
        let it = PredictIter {
            rx: Some(rx),
            ready: VecDeque::new(),
            stop: Arc::new(AtomicBool::new(false)),
            producer: Some(handle),
            log: Vec::new(),
        };
        let results: Vec<_> = it.collect();
        assert_eq!(results.len(), 2);
        assert!(results[0].is_ok());
        let e = results[1].as_ref().unwrap_err().to_string();
        assert!(e.contains("the predict thread panicked: boom"), "{e}");
    }
}
