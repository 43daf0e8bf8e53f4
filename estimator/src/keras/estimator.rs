//! `model_to_estimator`: a saved Keras model as a [`TpuEstimator`] whose model_fn traces the
//! saved architecture, starts from the saved weights, and trains with the compiled loss,
//! metrics and optimizer (wrapped in a `CrossShardOptimizer` on more than one shard).

use super::compile::{compiled, Compiled};
use super::error::KerasError;
use super::losses::batch_mean;
use super::model::{input_type, KerasModel};
use super::weights::SavedWeights;
use crate::config::RunConfig;
use crate::error::EstimatorError;
use crate::estimator::{
    EvalMetrics, Features, HostTensors, Params, TpuEstimator, TpuEstimatorSpec,
};
use crate::metrics::MetricSet;
use crate::model::{CrossShardOptimizer, Graph, Mode, Optimizer};
use serde_json::Value;
use std::sync::Arc;
use tessel_compiler::trace::Tensor;

/// A Keras model as its parts: what a model file holds.
#[derive(Clone, Debug)]
pub struct KerasParts {
    pub keras_version: Option<String>,
    /// `{"class_name": "Sequential" | "Functional", "config": {...}}`.
    pub model_config: Value,
    /// Keras 3's `compile_config` or a legacy file's `training_config`.
    pub compile_config: Option<Value>,
    pub weights: SavedWeights,
}

/// What `model_to_estimator` takes besides the model and the `RunConfig`.
#[derive(Clone, Debug)]
pub struct KerasOptions {
    /// Replace the saved optimizer (e.g. one that was a `tf.train.*Optimizer`, which Keras
    /// does not save): a Keras optimizer config `{"class_name": "SGD", "config": {...}}`.
    pub optimizer: Option<Value>,
    /// Replace the loss, in Keras's forms: a name, a serialized loss, a dict by output.
    pub loss: Option<Value>,
    pub loss_weights: Option<Value>,
    /// Replace the metrics, in Keras's forms.
    pub metrics: Option<Value>,
    /// Global batch sizes (divided among the shards).
    pub train_batch_size: usize,
    pub eval_batch_size: Option<usize>,
    pub predict_batch_size: Option<usize>,
    /// Run on `num_shards` replicas (TPUEstimator's `use_tpu`).
    pub use_tpu: bool,
}

impl Default for KerasOptions {
    fn default() -> KerasOptions {
        KerasOptions {
            optimizer: None,
            loss: None,
            loss_weights: None,
            metrics: None,
            train_batch_size: 32,
            eval_batch_size: Some(32),
            predict_batch_size: Some(32),
            use_tpu: true,
        }
    }
}

impl KerasOptions {
    fn overrides(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        for (k, v) in [
            ("optimizer", &self.optimizer),
            ("loss", &self.loss),
            ("loss_weights", &self.loss_weights),
            ("metrics", &self.metrics),
        ] {
            if let Some(v) = v {
                m.insert(k.to_string(), v.clone());
            }
        }
        m
    }
}

/// The model and its training setup, checked: everything `model_to_estimator` refuses is
/// found here, before any training.
pub(crate) struct Prepared {
    pub(crate) model: KerasModel,
    pub(crate) compiled: Option<Compiled>,
}

/// Builds the model, traces it once on a batch of one (shapes, weights), and reads the
/// compile config. `need_compile`: a model without a loss is an error (training,
/// evaluation); prediction and the summary do without.
pub(crate) fn prepare(
    parts: &KerasParts,
    options: &KerasOptions,
    need_compile: bool,
) -> Result<Prepared, KerasError> {
    let model = KerasModel::new(
        &parts.model_config,
        parts.weights.clone(),
        parts.keras_version.as_deref(),
    )?;
    let mut g = Graph::new("keras_check", Mode::Predict, None);
    let inputs = placeholder_inputs(&mut g, &model, 1)?;
    let traced = model.trace(&mut g, &inputs, false)?;
    let units: Vec<i64> = traced
        .outputs
        .iter()
        .map(|o| o.dims().last().and_then(|d| d.fixed()).unwrap_or(1))
        .collect();
    let compiled = match compiled(
        &model.arch,
        parts.compile_config.as_ref(),
        &options.overrides(),
        &units,
    ) {
        Ok(c) => Some(c),
        Err(KerasError::NotCompiled) if !need_compile => None,
        Err(e) => return Err(e),
    };
    Ok(Prepared { model, compiled })
}

/// Parameters standing for the model's inputs with a batch of `batch`.
pub(crate) fn placeholder_inputs(
    g: &mut Graph,
    model: &KerasModel,
    batch: i64,
) -> Result<Vec<Tensor>, KerasError> {
    model
        .arch
        .inputs
        .iter()
        .map(|i| {
            let mut dims = vec![batch];
            for d in &i.shape {
                dims.push(d.ok_or_else(|| {
                    KerasError::Build(format!("input `{}` has a dimension of unknown size ({:?}); tessel needs static shapes", i.name, i.shape))
                })?);
            }
            let ty = input_type(&i.dtype).unwrap_or(tessel_compiler::ir::ElementType::F32);
            Ok(g.tracer.parameter(&i.name, dims.as_slice(), ty))
        })
        .collect()
}

/// TF's `model_to_estimator` for TPUs: `parts` (a read Keras file) as a [`TpuEstimator`].
///
/// Features are the model's inputs by name (`x` for a single input); targets are the labels
/// (single output) or features named after the outputs (`y` for a single output). The
/// variables start from the saved weights in a model_dir without a checkpoint, with the
/// global step at 0 (a warm start); a model_dir with a checkpoint restores it.
pub fn model_to_estimator_from_parts(
    parts: &KerasParts,
    run_config: RunConfig,
    options: KerasOptions,
) -> Result<TpuEstimator, KerasError> {
    let prepared = prepare(parts, &options, true)?;
    let shared = Arc::new(prepared);
    let model_fn = move |g: &mut Graph,
                         features: &Features,
                         labels: Option<&Tensor>,
                         mode: Mode,
                         _params: &Params| {
        keras_model_fn(&shared, g, features, labels, mode).map_err(EstimatorError::from)
    };
    Ok(TpuEstimator::new(
        model_fn,
        run_config,
        Params::new(),
        options.use_tpu,
        options.train_batch_size,
        options.eval_batch_size,
        options.predict_batch_size,
    )?)
}

/// A feature by name, or the single feature under `fallback` (`x`, `y`).
fn feature<'a>(
    features: &'a Features,
    name: &str,
    fallback: &str,
    single: bool,
) -> Option<&'a Tensor> {
    features
        .get(name)
        .or_else(|| if single { features.get(fallback) } else { None })
}

fn keras_model_fn(
    p: &Prepared,
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
) -> Result<TpuEstimatorSpec, KerasError> {
    let model = &p.model;
    let single_in = model.arch.inputs.len() == 1;
    let mut inputs = Vec::new();
    for spec in &model.arch.inputs {
        let t = feature(features, &spec.name, "x", single_in).ok_or_else(|| {
            let names: Vec<&str> = features.names().collect();
            KerasError::Build(format!(
                "the input_fn gives no feature `{}` for the model's input (features: {names:?})",
                spec.name
            ))
        })?;
        let ty = input_type(&spec.dtype).unwrap_or(tessel_compiler::ir::ElementType::F32);
        inputs.push(if t.element_type() == Some(ty) {
            t.clone()
        } else {
            t.cast(ty)
        });
    }
    let traced = model.trace(g, &inputs, mode == Mode::Train)?;
    let names = model.arch.output_names();
    if mode == Mode::Predict {
        let mut spec = TpuEstimatorSpec::new(mode);
        spec.predictions = names.into_iter().zip(traced.outputs).collect();
        return Ok(spec);
    }
    let compiled = p.compiled.as_ref().ok_or(KerasError::NotCompiled)?;
    let single_out = names.len() == 1;
    let mut loss: Option<Tensor> = None;
    let mut metric_tensors: Vec<(String, Tensor)> = Vec::new();
    let mut metric_plan = Vec::new();
    for (i, (out, pred)) in compiled.outputs.iter().zip(&traced.outputs).enumerate() {
        let target = match (single_out, labels) {
            (true, Some(l)) => Some(l),
            _ => feature(features, &out.name, "y", single_out),
        };
        let Some(target) = target else {
            if out.loss.is_some() {
                return Err(KerasError::Build(format!(
                    "no targets for output `{}`: give them as the labels (one output) or as a feature named `{}`",
                    out.name, out.name
                )));
            }
            continue;
        };
        if let Some(l) = &out.loss {
            let term =
                batch_mean(&l.per_example(target, pred), g.padding_mask()) * out.weight as f32;
            loss = Some(match loss {
                Some(total) => total + term,
                None => term,
            });
        }
        for (k, (name, metric)) in out.metrics.iter().enumerate() {
            let (y, p) = metric.tensors(target, pred);
            let (ly, lp) = (format!("m{i}_{k}_labels"), format!("m{i}_{k}_predictions"));
            metric_tensors.push((ly.clone(), y));
            metric_tensors.push((lp.clone(), p));
            metric_plan.push((name.clone(), metric.clone(), ly, lp));
        }
    }
    let mut loss = loss.ok_or_else(|| KerasError::Build("no output has a loss".into()))?;
    if let Some(r) = traced.regularization {
        loss = loss + r;
    }
    let mut spec = TpuEstimatorSpec::new(mode);
    if mode == Mode::Train {
        let opt = compiled.optimizer.clone();
        let train_op = if g.num_shards() > 1 {
            CrossShardOptimizer::new(opt).minimize(g, &loss)
        } else {
            opt.minimize(g, &loss)
        }
        .map_err(|e| KerasError::Estimator(e.into()))?;
        spec.train_op = Some(train_op);
    } else if !metric_plan.is_empty() {
        let metric_fn = move |m: &mut MetricSet, t: &HostTensors| {
            for (name, metric, ly, lp) in &metric_plan {
                metric.update(m, name, t, ly, lp);
            }
        };
        let tensors: Vec<(&str, Tensor)> = metric_tensors
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone()))
            .collect();
        spec.eval_metrics = Some(EvalMetrics::new(metric_fn, tensors));
    }
    spec.loss = Some(loss);
    Ok(spec)
}

/// The model saved at `path`: a `.keras` zip or a legacy `.h5` file (read by
/// [`crate::keras::file`]), or a directory holding `model.json` and `weights.npz`
/// ([`crate::keras::fixture_dir`]).
pub fn read_model(path: &std::path::Path) -> Result<KerasParts, KerasError> {
    if path.is_dir() && path.join("model.json").is_file() {
        return super::fixture_dir::read_fixture_dir(path);
    }
    let file = super::file::read_keras_file(path).map_err(|e| KerasError::File(e.to_string()))?;
    Ok(KerasParts {
        keras_version: file.keras_version,
        model_config: file.model_config,
        compile_config: file.compile_config,
        weights: file
            .weights
            .into_iter()
            .map(|(layer, arrays)| {
                let arrays = arrays
                    .into_iter()
                    .map(|a| super::weights::SavedArray {
                        name: a.name,
                        shape: a.shape,
                        data: a.data,
                    })
                    .collect();
                (layer, arrays)
            })
            .collect(),
    })
}

/// TF's `tf.keras.estimator.model_to_estimator` for TPUs: the Keras model saved at `path`
/// as a [`TpuEstimator`] (see [`model_to_estimator_from_parts`]).
pub fn model_to_estimator(
    path: &std::path::Path,
    run_config: RunConfig,
    options: KerasOptions,
) -> Result<TpuEstimator, KerasError> {
    model_to_estimator_from_parts(&read_model(path)?, run_config, options)
}
