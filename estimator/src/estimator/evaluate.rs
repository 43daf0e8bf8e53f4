//! `evaluate(input_fn, steps)`: the EVAL step in compiled loops, its loss and
//! `eval_metrics` tensors outfed from every shard, and `metric_fn` run on the host with
//! streaming metrics. Results are logged as TF logs them, written to `model_dir/eval/` as
//! events, and returned.

use super::dealer::Dealer;
use super::input_fn::{batches, Input};
use super::log::{tf_float, Log};
use super::loop_runner::LoopRunner;
use super::params::Params;
use super::spec::HostTensors;
use super::tpu_estimator::TpuEstimator;
use super::trace_step::{fed_components, trace_step};
use super::variables_state::HostState;
use crate::checkpoint::Saver;
use crate::error::EstimatorError;
use crate::metrics::MetricSet;
use crate::model::Mode;
use crate::summary::EventWriter;
use tessel_compiler::ir::{Array, ArrayShape};
use tessel_runtime::feed::stack;

/// What `evaluate` returns: every metric, the mean loss and the global step evaluated.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalResult {
    pub global_step: i64,
    pub loss: f64,
    /// The metric_fn's metrics by name, sorted.
    pub metrics: Vec<(String, f64)>,
    /// Examples evaluated (steps × global eval batch).
    pub examples: u64,
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
    /// TPUEstimator's `evaluate(input_fn, steps)`: `steps` batches of `eval_batch_size`
    /// from the latest checkpoint (or the initial values, with TF's warning, when there is
    /// none).
    pub fn evaluate(
        &self,
        input_fn: impl Fn(&Params) -> Result<Input, EstimatorError>,
        steps: u64,
    ) -> Result<EvalResult, EstimatorError> {
        let mut log = Log::new(self.quiet);
        if steps == 0 {
            return Err(EstimatorError::value("Must specify steps > 0, given: 0"));
        }
        let eval_batch = self.eval_batch_size.ok_or_else(|| {
            EstimatorError::value(
                "eval_batch_size in TPUEstimator constructor cannot be `None` if .evaluate is running on TPU.",
            )
        })?;
        let shards = self.replicas();
        let params = self.params_for(eval_batch);
        let input = input_fn(&params)?;
        let components = fed_components(input.dataset.element_spec())?;
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
        let saver = Saver::new(&self.model_dir, self.config.keep_checkpoint_max);
        let state =
            HostState::restore_or_init(&traced.variables, &saver, self.config.tf_random_seed)?;
        match &state.restored_from {
            Some(file) => log.info(format!("Restoring parameters from {}", file.display())),
            None => log.warn(format!(
                "Could not find trained model in model_dir: {}, running initialization to evaluate.",
                self.model_dir.display()
            )),
        }
        log.info(format!("Starting evaluation at {}", utc_now()));

        let dealer = Dealer::new(batches(&input.dataset, &components, 0));
        let mut runner = LoopRunner::new(traced.module, traced.fed.clone(), self.device());
        let mut metrics = MetricSet::new();
        let carried = vec![state.carried()?; shards];
        let mut loss_sum = 0.0;
        let mut done = 0u64;
        let ipl = self.config.tpu_config.iterations_per_loop;
        while done < steps {
            let k = ipl.min(steps - done);
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
            runner.run(k, carried.clone(), sources, &mut on_step)?;
            for per_shard in outfed {
                let per_shard: Vec<Vec<Array>> = per_shard.into_iter().flatten().collect();
                loss_sum += per_shard.iter().map(|v| v[0].data.get_f64(0)).sum::<f64>()
                    / per_shard.len().max(1) as f64;
                if let Some(metric_fn) = &traced.metric_fn {
                    let tensors = HostTensors {
                        entries: concat_shards(&traced.outfed[1..], &per_shard)?,
                    };
                    metric_fn(&mut metrics, &tensors);
                }
                done += 1;
                log.info(format!("Evaluation [{done}/{steps}]"));
            }
        }
        let loss = loss_sum / steps as f64;
        let mut results = metrics.results();
        results.push(("loss".to_string(), loss));
        results.push(("global_step".to_string(), state.global_step as f64));
        results.sort_by(|a, b| a.0.cmp(&b.0));
        log.info(format!("Finished evaluation at {}", utc_now()));
        let shown: Vec<String> = results
            .iter()
            .map(|(n, v)| match n.as_str() {
                "global_step" => format!("{n} = {}", *v as i64),
                _ => format!("{n} = {}", tf_float(*v)),
            })
            .collect();
        log.info(format!(
            "Saving dict for global step {}: {}",
            state.global_step,
            shown.join(", ")
        ));
        let mut events = EventWriter::create(self.model_dir.join("eval")).map_err(|e| {
            EstimatorError::Write {
                what: "the eval event file".into(),
                message: e.to_string(),
            }
        })?;
        for (name, v) in &results {
            if name != "global_step" {
                events
                    .scalar(name, state.global_step, *v as f32)
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
            global_step: state.global_step,
            loss,
            metrics,
            examples: steps * eval_batch as u64,
            log: log.lines,
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
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
