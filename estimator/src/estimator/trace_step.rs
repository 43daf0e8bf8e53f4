//! Tracing a model_fn for one mode into a step module the compiled loop runs.
//!
//! The step's entry parameters are, in order: the global step (s32), the fed components
//! (features, then labels), then every variable as the model_fn and its optimizer created
//! them. Its outputs are the carried values first, in the same order (the next global step,
//! each variable after the step), then the per-step values the host receives through the
//! outfeed: TRAIN the loss and the host_call tensors, EVAL the loss and the eval_metrics
//! tensors, PREDICT the predictions. That is the loop contract of
//! `tessel_compiler::training_loop`: every parameter that is not fed is carried.

use super::params::Params;
use super::spec::{quoted_list, Features, MetricFn, TpuEstimatorSpec};
use super::spec_check::{check_spec, probe_metric_fn};
use crate::error::EstimatorError;
use crate::input::ValueSpec;
use crate::model::variables::Variable;
use crate::model::{Graph, Mode};
use tessel_compiler::ir::{ElementType, Module};
use tessel_compiler::trace::Tensor;

/// The model_fn's signature: `model_fn(features, labels, mode, params)` with the graph it
/// records into. `labels` is `None` in PREDICT.
pub type ModelFn = dyn Fn(
        &mut Graph,
        &Features,
        Option<&Tensor>,
        Mode,
        &Params,
    ) -> Result<TpuEstimatorSpec, EstimatorError>
    + Send
    + Sync;

/// The fed component evaluation adds: the per-example mask (1 real, 0 padding), given to the
/// model_fn as `features.mask()` rather than as a feature.
pub const EVAL_MASK: &str = "__tessel_eval_mask";

/// One fed component of the dataset: its name, element type and per-shard dims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FedComponent {
    pub name: String,
    pub element_type: ElementType,
    pub dims: Vec<i64>,
}

/// A model_fn traced for one mode.
pub struct TracedStep {
    pub module: Module,
    /// The fed parameters' numbers (1..=fed.len()).
    pub fed: Vec<u32>,
    /// Every variable, in parameter order (after the global step).
    pub variables: Vec<Variable>,
    /// Names of the per-step outfed values, in output order.
    pub outfed: Vec<String>,
    pub metric_fn: Option<MetricFn>,
    /// Whether the train op all-reduces gradients across shards.
    pub cross_shard: bool,
    /// The spec's hooks of this mode.
    pub hooks: Vec<Box<dyn crate::hooks::Hook>>,
}

/// The fed components of an element spec: every component, which must be dense and static
/// (the device needs static shapes).
pub fn fed_components(
    spec: &crate::input::ElementSpec,
) -> Result<Vec<FedComponent>, EstimatorError> {
    spec.components
        .iter()
        .map(|(name, vs)| match vs {
            ValueSpec::Dense { element_type, dims } if vs.is_static() => Ok(FedComponent {
                name: name.clone(),
                element_type: *element_type,
                dims: dims.iter().map(|d| d.unwrap_or(0)).collect(),
            }),
            ValueSpec::Dense { dims, .. } => Err(EstimatorError::Input(format!(
                "component `{name}` has an unknown dimension ({}): the device needs static shapes; use batch(n, drop_remainder=true), or padded_batch_with_mask for evaluation over every example",
                dims.iter().map(|d| d.map_or("?".to_string(), |v| v.to_string())).collect::<Vec<_>>().join(",")
            ))),
            ValueSpec::Bytes { .. } => Err(EstimatorError::Input(format!(
                "component `{name}` is a string tensor: the device takes numbers only; decode it in the input_fn (decode_raw)"
            ))),
            ValueSpec::Ragged { .. } => Err(EstimatorError::Input(format!(
                "component `{name}` is ragged (a VarLenFeature): the device needs static shapes; pad or densify it in the input_fn"
            ))),
        })
        .collect()
}

/// Traces `model_fn` in `mode`. `labels` names the component passed as labels (none in
/// PREDICT); the other components are the features.
pub fn trace_step(
    model_fn: &ModelFn,
    mode: Mode,
    params: &Params,
    components: &[FedComponent],
    labels: Option<&str>,
    num_shards: usize,
    seed: Option<i64>,
) -> Result<TracedStep, EstimatorError> {
    let mut g = Graph::new(&format!("tpu_estimator_{}", mode.tf_name()), mode, seed);
    g.set_num_shards(num_shards);
    let mut features = Vec::new();
    let mut label_tensor = None;
    let mut mask = None;
    for c in components {
        let t = g
            .tracer
            .parameter(&c.name, c.dims.as_slice(), c.element_type);
        if c.name == EVAL_MASK {
            mask = Some(t);
        } else if Some(c.name.as_str()) == labels && mode != Mode::Predict {
            label_tensor = Some(t);
        } else if Some(c.name.as_str()) != labels {
            features.push((c.name.clone(), t));
        }
    }
    if let (Some(name), None, false) = (labels, &label_tensor, mode == Mode::Predict) {
        let names: Vec<&str> = components
            .iter()
            .map(|c| c.name.as_str())
            .filter(|n| *n != EVAL_MASK)
            .collect();
        return Err(EstimatorError::Input(format!(
            "the input_fn's dataset has no component `{name}` for the labels; its components are {}",
            quoted_list(&names)
        )));
    }
    if let Some(m) = &mask {
        g.set_padding_mask(m.clone());
    }
    let features = Features::new(
        features,
        mask,
        labels.map(str::to_string),
        &g.global_step.clone(),
    );
    let spec = model_fn(&mut g, &features, label_tensor.as_ref(), mode, params);
    // An absent `params["key"]` is the first thing to report (the model_fn may have failed
    // only because of it).
    if let Some(message) = params.missing_error() {
        return Err(EstimatorError::ModelFn(message));
    }
    let spec = spec?;
    let batch = components.first().and_then(|c| c.dims.first().copied());
    check_spec(&g, &spec, batch)?;
    if let (Some(m), Mode::Eval) = (&spec.eval_metrics, mode) {
        // Only a trace without mistakes has the shapes to run the metric_fn on.
        if g.tracer.issues().is_empty() {
            probe_metric_fn(m, num_shards)?;
        }
    }

    let mut outputs: Vec<Tensor> = vec![g.next_global_step()];
    let variables: Vec<Variable> = g.variables.all().map(|(_, v)| v.clone()).collect();
    for (id, _) in g.variables.all() {
        outputs.push(g.value_after_step(id));
    }
    let mut outfed = Vec::new();
    let mut metric_fn = None;
    let hooks = match mode {
        Mode::Train => spec.training_hooks,
        Mode::Eval => spec.evaluation_hooks,
        Mode::Predict => spec.prediction_hooks,
    };
    let mut cross_shard = false;
    match mode {
        Mode::Train => {
            // `check_spec` made sure both are there.
            let (Some(loss), Some(train_op)) = (spec.loss, spec.train_op) else {
                return Err(EstimatorError::ModelFn(
                    "in TRAIN mode the spec needs a loss and a train_op".into(),
                ));
            };
            cross_shard = train_op.is_cross_shard();
            outputs.push(loss);
            outfed.push("loss".to_string());
            for (name, t) in spec.host_call {
                outputs.push(t);
                outfed.push(name);
            }
        }
        Mode::Eval => {
            let loss = spec.loss.ok_or_else(|| {
                EstimatorError::ModelFn("in EVAL mode the spec needs a loss".into())
            })?;
            outputs.push(loss);
            outfed.push("loss".to_string());
            if let Some(m) = spec.eval_metrics {
                for (name, t) in m.tensors {
                    outputs.push(t);
                    outfed.push(name);
                }
                metric_fn = Some(m.metric_fn);
            }
        }
        Mode::Predict => {
            if spec.predictions.is_empty() {
                return Err(EstimatorError::ModelFn(
                    "in PREDICT mode the spec needs predictions".into(),
                ));
            }
            for (name, t) in spec.predictions {
                outputs.push(t);
                outfed.push(name);
            }
        }
    }
    let expected_parameters = 1 + components.len() + variables.len();
    let refs: Vec<&Tensor> = outputs.iter().collect();
    let module = g.tracer.finish(&refs)?;
    let entry = module.computation(module.entry);
    let parameters = entry.parameters().len();
    if parameters != expected_parameters {
        return Err(EstimatorError::ModelFn(format!(
            "the model_fn made {} entry parameters of its own; make variables with get_variable or the layers, not Tracer::parameter",
            parameters - expected_parameters.min(parameters)
        )));
    }
    Ok(TracedStep {
        module,
        fed: (1..=components.len() as u32).collect(),
        variables,
        outfed,
        metric_fn,
        cross_shard,
        hooks,
    })
}
