//! The checks a traced model_fn's spec passes before anything is compiled: what each mode
//! needs, the shapes the loop and the host expect, and the metric_fn run once on an
//! all-padding batch so that a name or shape it gets wrong is reported now, at its line,
//! instead of at the first evaluation batch.

use super::spec::{mode_name, EvalMetrics, HostTensors, TpuEstimatorSpec};
use crate::error::EstimatorError;
use crate::metrics::MetricSet;
use crate::model::{Graph, Mode};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::{Dim, Tensor};

/// `what` is missing from the spec of `mode`: the error lists what the spec does set.
fn missing(mode: Mode, what: &str, how: &str, spec: &TpuEstimatorSpec) -> EstimatorError {
    let mut set = Vec::new();
    if spec.loss.is_some() {
        set.push("loss");
    }
    if spec.train_op.is_some() {
        set.push("train_op");
    }
    if !spec.predictions.is_empty() {
        set.push("predictions");
    }
    if spec.eval_metrics.is_some() {
        set.push("eval_metrics");
    }
    if !spec.host_call.is_empty() {
        set.push("host_call");
    }
    let set = if set.is_empty() {
        "nothing".to_string()
    } else {
        set.join(", ")
    };
    EstimatorError::ModelFn(format!(
        "in {} mode the spec needs {what} ({how}); the model_fn's spec sets {set}",
        mode_name(mode)
    ))
}

/// What the spec of `mode` must have, checked before the step is finished; `batch` is the
/// per-shard batch of the fed components.
pub(crate) fn check_spec(
    g: &Graph,
    spec: &TpuEstimatorSpec,
    batch: Option<i64>,
) -> Result<(), EstimatorError> {
    let mode = g.mode;
    match mode {
        Mode::Train => {
            let loss = spec
                .loss
                .as_ref()
                .ok_or_else(|| missing(mode, "a loss", "spec.loss = Some(loss)", spec))?;
            check_loss(g, loss)?;
            if spec.train_op.is_none() {
                return Err(missing(
                    mode,
                    "a train_op",
                    "spec.train_op = Some(optimizer.minimize(g, &loss)?)",
                    spec,
                ));
            }
            check_names(g, "host_call", &spec.host_call, |t| match t.dims().len() {
                0 => None,
                _ => Some("a scalar (it is written as a summary every step)".to_string()),
            })
        }
        Mode::Eval => {
            let loss = spec
                .loss
                .as_ref()
                .ok_or_else(|| missing(mode, "a loss", "spec.loss = Some(loss)", spec))?;
            check_loss(g, loss)?;
            match &spec.eval_metrics {
                Some(m) => check_names(g, "eval_metrics tensor", &m.tensors, |t| {
                    batch_first(t, batch, "metric_fn gets it concatenated over the shards")
                }),
                None => Ok(()),
            }
        }
        Mode::Predict => {
            if spec.predictions.is_empty() {
                return Err(missing(
                    mode,
                    "predictions",
                    "spec.predictions = vec![(\"classes\".into(), logits.argmax(1))]",
                    spec,
                ));
            }
            check_names(g, "prediction", &spec.predictions, |t| {
                batch_first(t, batch, "each example gets its row")
            })
        }
    }
}

/// The loss is a float scalar.
fn check_loss(g: &Graph, loss: &Tensor) -> Result<(), EstimatorError> {
    match (loss.element_type(), loss.dims().len()) {
        // A failed loss: `Tracer::finish` reports why, at its line.
        (None, _) => Ok(()),
        (Some(ty), 0) if ty.is_float() => Ok(()),
        (Some(_), _) => Err(EstimatorError::ModelFn(format!(
            "the loss must be a float scalar, but it is {}{}: reduce it, e.g. with a losses function or reduce_mean",
            describe(loss),
            made_at(g, loss)
        ))),
    }
}

/// Unique names, each tensor passing `shape_problem` (`None` when fine).
fn check_names(
    g: &Graph,
    what: &str,
    named: &[(String, Tensor)],
    shape_problem: impl Fn(&Tensor) -> Option<String>,
) -> Result<(), EstimatorError> {
    for (i, (name, t)) in named.iter().enumerate() {
        if named[..i].iter().any(|(n, _)| n == name) {
            return Err(EstimatorError::ModelFn(format!(
                "two {what}s are named `{name}`; give each its own name"
            )));
        }
        if !t.is_ok() {
            continue;
        }
        if let Some(problem) = shape_problem(t) {
            return Err(EstimatorError::ModelFn(format!(
                "{what} `{name}` is {}{}, but it must be {problem}",
                describe(t),
                made_at(g, t)
            )));
        }
    }
    Ok(())
}

/// `None` when `t` has the per-shard batch as its first dimension.
fn batch_first(t: &Tensor, batch: Option<i64>, why: &str) -> Option<String> {
    match (t.dims().first(), batch) {
        (Some(Dim::Fixed(b)), Some(batch)) if *b == batch => None,
        (_, Some(batch)) => Some(format!("batch-first: [{batch}, ..] (the {why})")),
        (_, None) => None,
    }
}

/// Runs the metric_fn once on an all-padding batch of zeros with the tensors' shapes over
/// `shards` shards: a name it asks for that is not there, or a metric whose shapes do not
/// fit, is an error naming the metric_fn's line.
pub(crate) fn probe_metric_fn(metrics: &EvalMetrics, shards: usize) -> Result<(), EstimatorError> {
    let mut entries = Vec::new();
    let mut batch = 0;
    for (name, t) in &metrics.tensors {
        let Some(shape) = t.shape() else {
            return Ok(());
        };
        let mut dims: Vec<i64> = shape.dims.as_slice().to_vec();
        if let Some(first) = dims.first_mut() {
            *first *= shards as i64;
            batch = *first;
        }
        let n = dims.iter().product::<i64>().max(0) as usize;
        let ty = shape.element_type;
        entries.push((
            name.clone(),
            Array::new(
                ArrayShape::new(ty, &dims),
                ArrayData::from_f64_fn(ty, n, |_| 0.0),
            ),
        ));
    }
    let mask = Array::new(
        ArrayShape::new(ElementType::F32, &[batch]),
        ArrayData::F32(vec![0.0; batch as usize]),
    );
    let tensors = HostTensors::new(entries, Some(mask.clone()));
    let mut set = MetricSet::new();
    set.set_padding_mask(Some(mask));
    (metrics.metric_fn)(&mut set, &tensors);
    if let Some(message) = tensors.missing_error() {
        return Err(EstimatorError::ModelFn(message));
    }
    if let Some(e) = set.error() {
        return Err(EstimatorError::MetricFn(e.to_string()));
    }
    Ok(())
}

/// `f32[8,3]` for messages.
fn describe(t: &Tensor) -> String {
    crate::losses::describe(t)
}

/// ` (made at FILE:LINE:COLUMN)` from the tensor's instruction, or nothing.
fn made_at(g: &Graph, t: &Tensor) -> String {
    let Some(id) = t.id() else {
        return String::new();
    };
    g.tracer
        .with_module(|m, c| m.computation(c).get(id).metadata.source.clone())
        .map(|s| format!(" (made at {s})"))
        .unwrap_or_default()
}
