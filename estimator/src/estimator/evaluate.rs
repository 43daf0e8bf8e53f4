//! `evaluate(input_fn, steps)`: the EVAL step in compiled loops, its loss and
//! `eval_metrics` tensors outfed from every shard, and `metric_fn` run on the host with
//! streaming metrics. Results are logged as TF logs them, written to `model_dir/eval/` as
//! events, and returned.

use super::dealer::Dealer;
use super::eval_input::{
    batch_bytes, eval_components, steps_that_fit, EvalBatches, READ_AHEAD_BYTES,
};
use super::eval_progress::EvalProgress;
use super::evaluator::CheckpointToEval;
use super::input_fn::Input;
use super::log::{tf_float, Log};
use super::loop_runner::LoopRunner;
use super::params::Params;
use super::spec::HostTensors;
use super::tpu_estimator::TpuEstimator;
use super::trace_step::trace_step;
use super::variables_state::{restore_for, HostState};
use crate::error::EstimatorError;
use crate::hooks::{Hook, HookList, RunContext, RunValues};
use crate::input::dataset::Cardinality;
use crate::metrics::MetricSet;
use crate::model::variables::Variable;
use crate::model::Mode;
use crate::summary::EventWriter;
use tessel_compiler::hlo_text::{print_module, PrintOptions};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_runtime::feed::stack;

/// What `evaluate` returns: every metric, the mean loss and the global step evaluated.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalResult {
    pub global_step: i64,
    pub loss: f64,
    /// The metric_fn's metrics by name, sorted.
    pub metrics: Vec<(String, f64)>,
    /// Real examples evaluated (the masks' sum: padding is not counted).
    pub examples: u64,
    /// Evaluation steps run (fewer than asked when a hook stopped evaluation).
    pub steps: u64,
    pub log: Vec<String>,
}

impl EvalResult {
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

impl TpuEstimator {
    /// TPUEstimator's `evaluate(input_fn, steps)` from the latest checkpoint (or the initial
    /// values, with TF's warning, when there is none).
    ///
    /// `steps = None` evaluates the whole dataset exactly once: the input_fn may batch without
    /// `drop_remainder`; the last short batch is padded and masked (`eval_input`), and the
    /// loss and metrics cover the real examples only. `Some(n)` stops after `n` steps (each
    /// one batch per shard), or earlier when the input ends.
    pub fn evaluate(
        &self,
        input_fn: impl Fn(&Params) -> Result<Input, EstimatorError>,
        steps: Option<u64>,
    ) -> Result<EvalResult, EstimatorError> {
        self.evaluate_with_hooks(input_fn, steps, Vec::new())
    }

    /// TF's `evaluate(input_fn, steps, hooks)`: `hooks` (then the spec's
    /// `evaluation_hooks`) see each evaluation loop, its per-step loss in
    /// [`RunValues::loss`](crate::hooks::RunValues::loss); a stop request ends the evaluation
    /// after that loop, and the result counts the steps that ran.
    pub fn evaluate_with_hooks<'h>(
        &self,
        input_fn: impl Fn(&Params) -> Result<Input, EstimatorError>,
        steps: Option<u64>,
        hooks: Vec<Box<dyn Hook + 'h>>,
    ) -> Result<EvalResult, EstimatorError> {
        self.evaluate_from(input_fn, steps, hooks, None, None)
    }

    /// Evaluates the variables a running training holds on the host (a hook's context):
    /// no checkpoint is read and the training graph is not touched. The results equal
    /// `evaluate` of the checkpoint of the same step; they are written to
    /// `model_dir/eval/`, and the evaluation's log lines join the training's log.
    pub fn evaluate_run(
        &self,
        input_fn: impl Fn(&Params) -> Result<Input, EstimatorError>,
        steps: Option<u64>,
        run: &mut RunContext,
    ) -> Result<EvalResult, EstimatorError> {
        let result = self.evaluate_from(input_fn, steps, Vec::new(), Some(run), None)?;
        run.log.lines.extend(result.log.iter().cloned());
        Ok(result)
    }

    /// Evaluates the variables of `trained` (a running training), else of `at` (the
    /// evaluator's checkpoint, events to its eval directory), else of the latest checkpoint.
    pub(crate) fn evaluate_from<'h>(
        &self,
        input_fn: impl Fn(&Params) -> Result<Input, EstimatorError>,
        steps: Option<u64>,
        hooks: Vec<Box<dyn Hook + 'h>>,
        mut trained: Option<&mut RunContext>,
        at: Option<CheckpointToEval>,
    ) -> Result<EvalResult, EstimatorError> {
        let eval_dir = at
            .as_ref()
            .map_or("eval".to_string(), |a| a.eval_dir.clone());
        let mut log = Log::new(self.quiet);
        let device = self.chief_device("evaluate")?;
        if steps == Some(0) {
            return Err(EstimatorError::value("Must specify steps > 0, given: 0"));
        }
        let eval_batch = self.eval_batch_size.ok_or_else(|| {
            EstimatorError::value(
                "eval_batch_size in TPUEstimator constructor cannot be `None` if .evaluate is running on TPU.",
            )
        })?;
        let shards = self.replicas();
        let per_shard = eval_batch / shards;
        let params = self.params_for(eval_batch);
        let input = input_fn(&params)?;
        if steps.is_none() && input.dataset.cardinality() == Cardinality::Infinite {
            return Err(EstimatorError::value(
                "evaluate(steps=None) reads the input until it ends, but the input_fn's dataset repeats forever: give steps, or do not repeat() the eval input",
            ));
        }
        let mask_name = input.mask.as_deref();
        let components = eval_components(input.dataset.element_spec(), per_shard, mask_name)?;
        log.info("Calling model_fn.");
        let traced = trace_step(
            self.model_fn.as_ref(),
            Mode::Eval,
            &params,
            &components,
            input.labels.as_deref(),
            shards,
            self.config.tf_random_seed,
        )?;
        log.info("Done calling model_fn.");
        let state = match (trained.as_deref(), at) {
            (Some(run), _) => state_of_run(run, &traced.variables)?,
            (None, Some(at)) => {
                log.info(format!("Restoring parameters from {}", at.file.display()));
                HostState::from_checkpoint(&traced.variables, at.checkpoint, at.file)?
            }
            (None, None) => restore_for(self, &traced.variables, "evaluate", &mut log)?,
        };
        log.info(format!("Starting evaluation at {}", utc_now()));
        let mut ctx = RunContext::new(Mode::Eval, &self.model_dir, log, &traced.variables, state);
        let mut all_hooks = hooks;
        all_hooks.extend(traced.hooks.into_iter().map(|h| h as Box<dyn Hook + 'h>));
        let mut hooks = HookList::new(all_hooks);
        hooks.begin(&mut ctx)?;
        hooks.after_create_session(&mut ctx)?;
        let global_step = ctx.global_step();

        let mut input_batches = EvalBatches::new(&input.dataset, &components, mask_name, per_shard);
        // In training, the evaluation program compiled for the previous evaluation is reused
        // when the model_fn traced the same step again.
        let text = trained
            .is_some()
            .then(|| print_module(&traced.module, &PrintOptions::default()));
        let cached = trained
            .as_deref_mut()
            .and_then(|run| run.eval_runner.take())
            .filter(|(cached, _)| Some(cached) == text.as_ref());
        let mut runner = match cached {
            Some((_, runner)) => runner,
            None => LoopRunner::new(traced.module, traced.fed.clone(), device),
        };
        let compiled_before = runner.compiled();
        let mut metrics = MetricSet::new();
        let carried = vec![ctx.state.carried()?; shards];
        // The loss: each shard's batch loss (a mean over its real examples) weighted by its
        // real examples, so the result is the mean over every real example.
        let mut loss_sum = 0.0;
        let mut examples = 0.0;
        let mut done = 0u64;
        let progress = EvalProgress::new(steps, input.dataset.cardinality(), shards);
        let ipl = self.config.tpu_config.iterations_per_loop;
        let fit = steps_that_fit(batch_bytes(&components), shards, READ_AHEAD_BYTES);
        loop {
            // The stop flag (Ctrl-C in the examples) ends evaluation between loops; an
            // evaluation inside training leaves it to training, which saves and stops after it.
            if trained.is_none() && self.stop.swap(false, std::sync::atomic::Ordering::SeqCst) {
                return Err(EstimatorError::Stopped {
                    what: "evaluation",
                    done,
                });
            }
            let mut k = ipl.min(steps.map_or(u64::MAX, |n| n - done)).min(fit);
            if k == 0 {
                break;
            }
            // Read the loop's batches ahead: when the input ends within it, the loop is
            // shortened and the last iteration's missing shards get all-padding batches.
            let ready = input_batches.fill(k as usize * shards)?;
            if ready == 0 {
                break;
            }
            hooks.before_run(&mut ctx)?;
            k = k.min(ready.div_ceil(shards) as u64);
            let real = ready.min(k as usize * shards);
            let loop_batches = input_batches.take(real, k as usize * shards - real);
            let masks: Vec<(Vec<f32>, f64)> = loop_batches
                .iter()
                .map(|b| (b.mask.clone(), b.weight()))
                .collect();
            let dealer = Dealer::new(Box::new(
                loop_batches
                    .into_iter()
                    .map(|b| Ok(b.batch))
                    .collect::<Vec<_>>()
                    .into_iter(),
            ));
            // outfed[iteration][shard] = the step's outfed values.
            let mut outfed: Vec<Vec<Option<Vec<Array>>>> = vec![vec![None; shards]; k as usize];
            let mut on_step = |shard: usize, iteration: u64, values: Vec<Array>| {
                if let Some(slot) = outfed
                    .get_mut(iteration as usize)
                    .and_then(|s| s.get_mut(shard))
                {
                    *slot = Some(values);
                }
            };
            let sources = dealer.sources(shards, k);
            let started = std::time::Instant::now();
            if let Err(e) = runner.run(k, carried.clone(), sources, &mut on_step) {
                // The input's own error, not the infeed's report of it.
                return Err(match dealer.failure() {
                    Some((_, message)) => EstimatorError::Input(message),
                    None => EstimatorError::Session(e),
                });
            }
            let mut loop_loss = Vec::with_capacity(k as usize);
            for (iteration, per_shard_values) in outfed.into_iter().enumerate() {
                let per_shard_values: Vec<Vec<Array>> =
                    per_shard_values.into_iter().flatten().collect();
                // The dealer gave batch `iteration * shards + shard` to `shard`.
                let dealt = &masks[iteration * shards..(iteration + 1) * shards];
                let mut step_loss = (0.0, 0.0);
                for (values, (_, weight)) in per_shard_values.iter().zip(dealt) {
                    // A shard with no real example adds nothing (its loss may be 0/0).
                    if *weight > 0.0 {
                        step_loss.0 += values[0].data.get_f64(0) * weight;
                        step_loss.1 += weight;
                    }
                }
                loss_sum += step_loss.0;
                examples += step_loss.1;
                loop_loss.push(vec![step_loss.0 / step_loss.1]);
                if let Some(metric_fn) = &traced.metric_fn {
                    let mask: Vec<f32> = dealt.iter().flat_map(|(m, _)| m.clone()).collect();
                    let mask = Array::new(
                        ArrayShape::new(ElementType::F32, &[mask.len() as i64]),
                        ArrayData::F32(mask),
                    );
                    let tensors = HostTensors::new(
                        concat_shards(&traced.outfed[1..], &per_shard_values)?,
                        Some(mask.clone()),
                    );
                    // Every metric is weighted by the padding mask (TF's user never sees one).
                    metrics.set_padding_mask(Some(mask));
                    metric_fn(&mut metrics, &tensors);
                    if let Some(message) = tensors.missing_error() {
                        return Err(EstimatorError::ModelFn(message));
                    }
                    if let Some(e) = metrics.error() {
                        return Err(EstimatorError::MetricFn(e.to_string()));
                    }
                }
                done += 1;
                if let Some(line) = progress.line_after_step(done) {
                    ctx.info(line);
                }
            }
            if let Some(line) = progress.line_after_loop(done) {
                ctx.info(line);
            }
            let values = RunValues {
                first_step: global_step,
                global_step,
                steps: k,
                names: vec!["loss".to_string()],
                per_step: loop_loss,
                elapsed: started.elapsed(),
                trace: None,
            };
            hooks.after_run(&mut ctx, &values)?;
            if ctx.stop_requested() {
                break;
            }
        }
        hooks.end(&mut ctx)?;
        if let (Some(run), Some(text)) = (trained, text) {
            run.eval_compiles += runner.compiled() - compiled_before;
            run.eval_runner = Some((text, runner));
        }
        if examples == 0.0 {
            return Err(EstimatorError::Input(
                "no examples to evaluate: the eval input_fn's dataset gave none (or only examples of weight 0)".into(),
            ));
        }
        let loss = loss_sum / examples;
        let mut results = metrics.results();
        results.push(("loss".to_string(), loss));
        results.push(("global_step".to_string(), global_step as f64));
        results.sort_by(|a, b| a.0.cmp(&b.0));
        ctx.info(format!("Finished evaluation at {}", utc_now()));
        let shown: Vec<String> = results
            .iter()
            .map(|(n, v)| match n.as_str() {
                "global_step" => format!("{n} = {}", *v as i64),
                _ => format!("{n} = {}", tf_float(*v)),
            })
            .collect();
        ctx.info(format!(
            "Saving dict for global step {}: {}",
            global_step,
            shown.join(", ")
        ));
        let mut events = EventWriter::create(self.model_dir.join(&eval_dir)).map_err(|e| {
            EstimatorError::Write {
                what: "the eval event file".into(),
                message: e.to_string(),
            }
        })?;
        for (name, v) in &results {
            if name != "global_step" {
                events
                    .scalar(name, global_step, *v as f32)
                    .map_err(|e| EstimatorError::Write {
                        what: "the eval event file".into(),
                        message: e.to_string(),
                    })?;
            }
        }
        events.flush().map_err(|e| EstimatorError::Write {
            what: "the eval event file".into(),
            message: e.to_string(),
        })?;
        let metrics: Vec<(String, f64)> = results
            .into_iter()
            .filter(|(n, _)| n != "global_step" && n != "loss")
            .collect();
        Ok(EvalResult {
            global_step,
            loss,
            metrics,
            examples: examples.round() as u64,
            steps: done,
            log: ctx.log.lines,
        })
    }
}

/// Each named outfed tensor (after the loss) concatenated over the shards along its first
/// dimension, in replica order (scalars are stacked).
fn concat_shards(
    names: &[String],
    per_shard: &[Vec<Array>],
) -> Result<Vec<(String, Array)>, EstimatorError> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let parts: Vec<Array> = per_shard.iter().map(|v| v[i + 1].clone()).collect();
            let stacked = stack(&parts).map_err(|e| EstimatorError::ModelFn(e.to_string()))?;
            let dims = &stacked.shape.dims;
            let merged: Vec<i64> = if dims.len() >= 2 {
                std::iter::once(dims[0] * dims[1])
                    .chain(dims[2..].iter().copied())
                    .collect()
            } else {
                dims.to_vec()
            };
            let shape = ArrayShape::new(stacked.shape.element_type, &merged);
            Ok((name.clone(), Array::new(shape, stacked.data)))
        })
        .collect()
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC, as TF's evaluation log prints the time.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    super::log::utc_iso(secs)
}

/// The host state of `variables` (EVAL's, a subset of training's: no optimizer slots) taken
/// by name from a running training.
fn state_of_run(run: &RunContext, variables: &[Variable]) -> Result<HostState, EstimatorError> {
    let values = variables
        .iter()
        .map(|v| {
            let a = run.variable(&v.name).ok_or_else(|| {
                EstimatorError::ModelFn(format!(
                    "the EVAL model_fn makes variable `{}`, which training does not have",
                    v.name
                ))
            })?;
            if a.shape.dims.as_slice() != v.dims.as_slice() || a.element_type() != v.element_type {
                return Err(EstimatorError::ModelFn(format!(
                    "variable `{}` has another shape or type in EVAL than in TRAIN",
                    v.name
                )));
            }
            Ok(a.clone())
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HostState {
        global_step: run.global_step(),
        values,
        input_batches: 0,
        restored_from: None,
        warm_started_from: None,
        warm_start_note: None,
    })
}
