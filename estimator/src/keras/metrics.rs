//! Keras's compiled metrics, computed on the host by the estimator's streaming metrics: the
//! device outfeeds what each needs (class ids, scores, differences), the metric_fn updates
//! [`MetricSet`](crate::metrics::MetricSet).

use super::compile::class_and_config;
use super::error::KerasError;
use super::losses::Loss;
use crate::estimator::HostTensors;
use crate::metrics::MetricSet;
use serde_json::Value;
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Metric {
    BinaryAccuracy {
        threshold: f64,
    },
    CategoricalAccuracy,
    SparseCategoricalAccuracy,
    TopK {
        k: usize,
    },
    SparseTopK {
        k: usize,
    },
    /// `from_logits`: the scores go through a sigmoid first.
    Auc {
        num_thresholds: usize,
        from_logits: bool,
    },
    MeanSquaredError,
    MeanAbsoluteError,
}

fn unsupported(name: &str, why: &str) -> KerasError {
    KerasError::UnsupportedCompile {
        what: "metric",
        name: name.to_string(),
        why: why.to_string(),
    }
}

/// A metric as `compile()` saves it, with its reported name. "accuracy" takes the form
/// Keras picks for the output: binary for one unit, sparse for a sparse loss, else
/// categorical.
pub(crate) fn parse(
    v: &Value,
    loss: Option<&Loss>,
    units: i64,
) -> Result<(String, Metric), KerasError> {
    let (class, config) = class_and_config(v)
        .ok_or_else(|| unsupported(&v.to_string(), "a metric is a name or a serialized Metric"))?;
    // tf.keras's legacy `.h5` wraps metric functions: `{"class_name": "MeanMetricWrapper",
    // "config": {"fn": "categorical_accuracy", ...}}`.
    let class = match (
        class,
        config.and_then(|c| c.get("fn")).and_then(Value::as_str),
    ) {
        ("MeanMetricWrapper", Some(f)) => f,
        _ => class,
    };
    let auc_from_logits = class == "AUC"
        && config
            .and_then(|c| c.get("from_logits"))
            .and_then(Value::as_bool)
            == Some(true);
    let name = config
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str)
        .unwrap_or(class)
        .to_string();
    let num = |k: &str| config.and_then(|c| c.get(k)).and_then(Value::as_f64);
    if let Some(c) = config {
        if c.get("from_logits").and_then(Value::as_bool) == Some(true) && !auc_from_logits {
            return Err(unsupported(class, "from_logits metrics are not supported"));
        }
        for key in ["curve", "summation_method"] {
            if let Some(s) = c.get(key).and_then(Value::as_str) {
                if !matches!(s, "ROC" | "interpolation" | "trapezoidal") {
                    return Err(unsupported(class, &format!("{key} `{s}` is not supported")));
                }
            }
        }
        if c.get("multi_label").and_then(Value::as_bool) == Some(true) {
            return Err(unsupported(class, "multi_label AUC is not supported"));
        }
    }
    let metric = match class {
        "accuracy" | "acc" | "Accuracy" => {
            if units == 1 {
                Metric::BinaryAccuracy { threshold: 0.5 }
            } else if loss.is_some_and(Loss::is_sparse) {
                Metric::SparseCategoricalAccuracy
            } else {
                Metric::CategoricalAccuracy
            }
        }
        "binary_accuracy" | "BinaryAccuracy" => Metric::BinaryAccuracy {
            threshold: num("threshold").unwrap_or(0.5),
        },
        "categorical_accuracy" | "CategoricalAccuracy" => Metric::CategoricalAccuracy,
        "sparse_categorical_accuracy" | "SparseCategoricalAccuracy" => Metric::SparseCategoricalAccuracy,
        "top_k_categorical_accuracy" | "TopKCategoricalAccuracy" => Metric::TopK {
            k: num("k").unwrap_or(5.0) as usize,
        },
        "sparse_top_k_categorical_accuracy" | "SparseTopKCategoricalAccuracy" => Metric::SparseTopK {
            k: num("k").unwrap_or(5.0) as usize,
        },
        "AUC" | "auc" => Metric::Auc {
            num_thresholds: num("num_thresholds").unwrap_or(200.0) as usize,
            from_logits: auc_from_logits,
        },
        "mse" | "mean_squared_error" | "MeanSquaredError" => Metric::MeanSquaredError,
        "mae" | "mean_absolute_error" | "MeanAbsoluteError" => Metric::MeanAbsoluteError,
        other => return Err(unsupported(other, "supported: accuracy and its binary/categorical/sparse forms, (sparse_)top_k_categorical_accuracy, AUC, mse, mae")),
    };
    let name = match (class, v) {
        // A metric given by name reports under that name ("acc", "mae").
        (_, Value::String(s)) => s.clone(),
        _ => name,
    };
    Ok((name, metric))
}

/// Sparse labels as s32 `[batch]` (Keras takes `[batch]` or `[batch, 1]`).
fn class_ids(target: &Tensor) -> Tensor {
    let t = target.cast(ElementType::S32);
    match t.dims().first().and_then(|d| d.fixed()) {
        Some(b) => t.reshape(&[b]),
        None => t,
    }
}

impl Metric {
    /// The device tensors the host needs: `(labels, predictions)`.
    #[track_caller]
    pub(crate) fn tensors(&self, target: &Tensor, pred: &Tensor) -> (Tensor, Tensor) {
        match self {
            Metric::BinaryAccuracy { threshold } => {
                let p = pred
                    .greater(&pred.scalar_like(*threshold))
                    .cast(ElementType::F32);
                let y = target
                    .cast(ElementType::F32)
                    .greater(&pred.scalar_like(*threshold))
                    .cast(ElementType::F32);
                (y, p)
            }
            Metric::CategoricalAccuracy => (target.argmax(-1), pred.argmax(-1)),
            Metric::SparseCategoricalAccuracy => (class_ids(target), pred.argmax(-1)),
            Metric::TopK { .. } => (target.argmax(-1), pred.clone()),
            Metric::SparseTopK { .. } => (class_ids(target), pred.clone()),
            Metric::Auc { from_logits, .. } => {
                let p = if *from_logits {
                    pred.sigmoid()
                } else {
                    pred.clone()
                };
                (target.cast(ElementType::F32), p)
            }
            Metric::MeanSquaredError | Metric::MeanAbsoluteError => {
                (target.cast(ElementType::F32), pred.clone())
            }
        }
    }

    /// Updates `set` with one batch of the tensors `tensors` made.
    pub(crate) fn update(
        &self,
        set: &mut MetricSet,
        name: &str,
        t: &HostTensors,
        labels: &str,
        preds: &str,
    ) {
        let (Some(y), Some(p)) = (t.get(labels), t.get(preds)) else {
            return;
        };
        match self {
            Metric::BinaryAccuracy { .. }
            | Metric::CategoricalAccuracy
            | Metric::SparseCategoricalAccuracy => set.accuracy(name, y, p, None),
            Metric::TopK { k } | Metric::SparseTopK { k } => {
                set.top_k_accuracy(name, y, p, *k, None)
            }
            Metric::Auc { num_thresholds, .. } => set.auc(name, y, p, None, *num_thresholds),
            Metric::MeanSquaredError => set.mean_squared_error(name, y, p, None),
            Metric::MeanAbsoluteError => {
                let diff = absolute_difference(y, p);
                set.mean(name, &diff, None)
            }
        }
    }
}

/// `|y - p|` per example (the mean over the other axes), as the `mean` metric's values.
fn absolute_difference(
    y: &tessel_compiler::ir::Array,
    p: &tessel_compiler::ir::Array,
) -> tessel_compiler::ir::Array {
    use tessel_compiler::ir::{Array, ArrayData, ArrayShape};
    let ys: Vec<f64> = (0..y.len()).map(|i| y.data.get_f64(i)).collect();
    let ps: Vec<f64> = (0..p.len()).map(|i| p.data.get_f64(i)).collect();
    let rows = y.shape.dims.first().copied().unwrap_or(1).max(1) as usize;
    let per = ys.len() / rows.max(1);
    let values: Vec<f32> = (0..rows)
        .map(|r| {
            let s: f64 = (0..per)
                .map(|i| (ys[r * per + i] - ps.get(r * per + i).copied().unwrap_or(0.0)).abs())
                .sum();
            (s / per.max(1) as f64) as f32
        })
        .collect();
    Array::new(
        ArrayShape::new(ElementType::F32, &[rows as i64]),
        ArrayData::F32(values),
    )
}
