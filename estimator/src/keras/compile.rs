//! The saved `compile()` arguments (Keras 3's `compile_config`, or a legacy `.h5`'s
//! `training_config`), with the options that override them, as one loss, its weight and its
//! metrics per model output, and the optimizer.

use super::architecture::Architecture;
use super::error::KerasError;
use super::losses::Loss;
use super::metrics::{self, Metric};
use super::optimizer::KerasOptimizer;
use serde_json::{Map, Value};

/// What `compile()` said about one output.
#[derive(Clone, Debug)]
pub(crate) struct OutputTraining {
    pub(crate) name: String,
    pub(crate) loss: Option<Loss>,
    pub(crate) weight: f64,
    pub(crate) metrics: Vec<(String, Metric)>,
}

#[derive(Clone, Debug)]
pub(crate) struct Compiled {
    pub(crate) optimizer: KerasOptimizer,
    pub(crate) outputs: Vec<OutputTraining>,
}

/// The part of `v` for output `i` named `name`: a dict by name, a list by position, or one
/// value for every output.
fn per_output<'a>(v: Option<&'a Value>, i: usize, name: &str, outputs: usize) -> Option<&'a Value> {
    match v? {
        Value::Null => None,
        Value::Object(o) if !o.contains_key("class_name") => o.get(name),
        Value::Array(a) if outputs > 1 || a.len() == 1 && a[0].is_array() => a.get(i),
        other => Some(other),
    }
}

/// Metrics for one output: a list, a single metric, or nothing.
fn metric_list(v: Option<&Value>) -> Vec<Value> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(other) => vec![other.clone()],
    }
}

/// The training setup: `compile_config` with `overrides` (any of `optimizer`, `loss`,
/// `loss_weights`, `metrics`, in Keras's own forms) taking precedence. `units` gives each
/// output's last dimension (for "accuracy").
pub(crate) fn compiled(
    arch: &Architecture,
    compile_config: Option<&Value>,
    overrides: &serde_json::Map<String, Value>,
    units: &[i64],
) -> Result<Compiled, KerasError> {
    let get = |k: &str| -> Option<&Value> {
        overrides
            .get(k)
            .or_else(|| compile_config.and_then(|c| c.get(k)))
            .filter(|v| !v.is_null())
    };
    let optimizer = get("optimizer")
        .or_else(|| get("optimizer_config"))
        .ok_or(KerasError::NotCompiled)?;
    let optimizer = KerasOptimizer::parse(optimizer)?;
    let loss = get("loss").ok_or(KerasError::NotCompiled)?;
    let names = arch.output_names();
    let n = names.len();
    let mut outputs = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let l = per_output(Some(loss), i, name, n)
            .map(Loss::parse)
            .transpose()?;
        let weight = per_output(get("loss_weights"), i, name, n)
            .and_then(Value::as_f64)
            .unwrap_or(1.0);
        let mut ms = Vec::new();
        let all_metrics = [get("metrics"), get("weighted_metrics")];
        for source in all_metrics {
            for m in metric_list(per_output(source, i, name, n)) {
                let (mname, metric) =
                    metrics::parse(&m, l.as_ref(), units.get(i).copied().unwrap_or(1))?;
                let reported = if n > 1 {
                    format!("{name}_{mname}")
                } else {
                    mname
                };
                ms.push((reported, metric));
            }
        }
        outputs.push(OutputTraining {
            name: name.clone(),
            loss: l,
            weight,
            metrics: ms,
        });
    }
    if outputs.iter().all(|o| o.loss.is_none()) {
        return Err(KerasError::NotCompiled);
    }
    Ok(Compiled { optimizer, outputs })
}

/// A loss, metric or optimizer as `compile()` saves it: a name, or
/// `{"class_name": ..., "config": {...}}` (a missing class name reads as ""); `None` for any
/// other JSON.
pub(crate) fn class_and_config(v: &Value) -> Option<(&str, Option<&Map<String, Value>>)> {
    match v {
        Value::String(s) => Some((s.as_str(), None)),
        Value::Object(o) => Some((
            o.get("class_name").and_then(Value::as_str).unwrap_or(""),
            o.get("config").and_then(Value::as_object),
        )),
        _ => None,
    }
}
