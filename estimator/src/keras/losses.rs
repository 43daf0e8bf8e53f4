//! Keras's losses on the device, each the mean over the batch of a per-example loss
//! (`sum_over_batch_size`; in EVAL, weighted by the padding mask): (sparse) categorical and
//! binary crossentropy with `from_logits` and `label_smoothing`, MSE, MAE, Huber.

use super::compile::class_and_config;
use super::error::KerasError;
use serde_json::Value;
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::Tensor;

/// Keras's `epsilon()`: probabilities are clipped to `[EPS, 1 - EPS]` before the log.
const EPS: f64 = 1e-7;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Loss {
    CategoricalCrossentropy {
        from_logits: bool,
        label_smoothing: f64,
    },
    SparseCategoricalCrossentropy {
        from_logits: bool,
    },
    BinaryCrossentropy {
        from_logits: bool,
        label_smoothing: f64,
    },
    MeanSquaredError,
    MeanAbsoluteError,
    Huber {
        delta: f64,
    },
}

fn unsupported(name: &str, why: &str) -> KerasError {
    KerasError::UnsupportedCompile {
        what: "loss",
        name: name.to_string(),
        why: why.to_string(),
    }
}

impl Loss {
    /// A loss as `compile()` saves it: a name or `{"class_name", "config"}`.
    pub(crate) fn parse(v: &Value) -> Result<Loss, KerasError> {
        let (name, config) = class_and_config(v)
            .ok_or_else(|| unsupported(&v.to_string(), "a loss is a name or a serialized Loss"))?;
        let flag = |k: &str| {
            config
                .and_then(|c| c.get(k))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let num = |k: &str, d: f64| {
            config
                .and_then(|c| c.get(k))
                .and_then(Value::as_f64)
                .unwrap_or(d)
        };
        if let Some(c) = config {
            if c.get("axis").is_some_and(|a| a.as_i64() != Some(-1)) {
                return Err(unsupported(name, "only axis -1 is supported"));
            }
            if c.get("ignore_class").is_some_and(|a| !a.is_null()) {
                return Err(unsupported(name, "ignore_class is not supported"));
            }
            if let Some(r) = c.get("reduction").and_then(Value::as_str) {
                if !matches!(r, "auto" | "sum_over_batch_size") {
                    return Err(unsupported(
                        name,
                        &format!("reduction `{r}` is not supported (sum_over_batch_size is)"),
                    ));
                }
            }
        }
        Ok(match name {
            "categorical_crossentropy" | "CategoricalCrossentropy" => Loss::CategoricalCrossentropy {
                from_logits: flag("from_logits"),
                label_smoothing: num("label_smoothing", 0.0),
            },
            "sparse_categorical_crossentropy" | "SparseCategoricalCrossentropy" => {
                Loss::SparseCategoricalCrossentropy { from_logits: flag("from_logits") }
            }
            "binary_crossentropy" | "BinaryCrossentropy" => Loss::BinaryCrossentropy {
                from_logits: flag("from_logits"),
                label_smoothing: num("label_smoothing", 0.0),
            },
            "mse" | "mean_squared_error" | "MeanSquaredError" => Loss::MeanSquaredError,
            "mae" | "mean_absolute_error" | "MeanAbsoluteError" => Loss::MeanAbsoluteError,
            "huber" | "huber_loss" | "Huber" => Loss::Huber { delta: num("delta", 1.0) },
            other => return Err(unsupported(other, "supported: (sparse_)categorical_crossentropy, binary_crossentropy, mse, mae, huber")),
        })
    }

    pub(crate) fn is_sparse(&self) -> bool {
        matches!(self, Loss::SparseCategoricalCrossentropy { .. })
    }

    /// The per-example loss `[batch]` of `pred` against `target`.
    #[track_caller]
    pub(crate) fn per_example(&self, target: &Tensor, pred: &Tensor) -> Tensor {
        let last = pred.rank() as i64 - 1;
        let mean_last = |t: Tensor| -> Tensor {
            // Mean over the last axis, then over any others but the batch.
            let t = t.reduce_mean(&[-1], false);
            let rest: Vec<i64> = (1..t.rank() as i64).collect();
            if rest.is_empty() {
                t
            } else {
                t.reduce_mean(&rest, false)
            }
        };
        match self {
            Loss::CategoricalCrossentropy {
                from_logits,
                label_smoothing,
            } => {
                let classes = pred.dims()[last as usize].fixed().unwrap_or(1) as f32;
                let y = target.cast(ElementType::F32);
                let y = if *label_smoothing > 0.0 {
                    let s = *label_smoothing as f32;
                    y * (1.0 - s) + s / classes
                } else {
                    y
                };
                let logp = log_probs(pred, *from_logits);
                -(y * logp).reduce_sum(&[-1], false)
            }
            Loss::SparseCategoricalCrossentropy { from_logits } => {
                let classes = pred.dims()[last as usize].fixed().unwrap_or(1);
                let mut ids = target.cast(ElementType::S32);
                // Labels [B, 1] as Keras accepts them for [B, C] predictions.
                if ids.rank() == pred.rank() {
                    let d: Vec<i64> = ids.dims()[..ids.rank() - 1]
                        .iter()
                        .map(|d| d.fixed().unwrap_or(-1))
                        .collect();
                    ids = ids.reshape(&d);
                }
                let y = ids.one_hot(classes, ElementType::F32);
                let logp = log_probs(pred, *from_logits);
                -(y * logp).reduce_sum(&[-1], false)
            }
            Loss::BinaryCrossentropy {
                from_logits,
                label_smoothing,
            } => {
                let y = target.cast(ElementType::F32);
                let y = if *label_smoothing > 0.0 {
                    let s = *label_smoothing as f32;
                    y * (1.0 - s) + 0.5 * s
                } else {
                    y
                };
                let bce = if *from_logits {
                    // max(x, 0) - x y + log1p(exp(-|x|))
                    let tail = (-pred.abs())
                        .exp()
                        .unary(tessel_compiler::ir::UnaryOp::Log1p);
                    pred.relu() - pred * &y + tail
                } else {
                    let p = clip(pred);
                    -(&y * p.log() + (1.0 - &y) * (1.0 - p).log())
                };
                mean_last(bce)
            }
            Loss::MeanSquaredError => {
                let d = pred - target.cast(ElementType::F32);
                mean_last(&d * &d)
            }
            Loss::MeanAbsoluteError => mean_last((pred - target.cast(ElementType::F32)).abs()),
            Loss::Huber { delta } => {
                let a = (pred - target.cast(ElementType::F32)).abs();
                let d = *delta as f32;
                let quadratic = &a * &a * 0.5;
                let linear = &a * d - 0.5 * d * d;
                mean_last(
                    a.less_equal(&a.scalar_like(*delta))
                        .where_(&quadratic, &linear),
                )
            }
        }
    }
}

fn clip(p: &Tensor) -> Tensor {
    p.maximum(&p.scalar_like(EPS))
        .minimum(&p.scalar_like(1.0 - EPS))
}

/// `log(softmax(logits))`, or for probabilities Keras's `log(clip(p / sum(p)))`.
#[track_caller]
fn log_probs(pred: &Tensor, from_logits: bool) -> Tensor {
    if from_logits {
        pred.log_softmax(-1)
    } else {
        let total = pred.reduce_sum(&[-1], true);
        clip(&(pred / total)).log()
    }
}

/// The batch mean of `per_example` `[batch]`, weighted by `mask` (EVAL's padding) if any.
#[track_caller]
pub(crate) fn batch_mean(per_example: &Tensor, mask: Option<&Tensor>) -> Tensor {
    match mask {
        None => per_example.reduce_mean(&[0], false),
        Some(m) => {
            let total = (per_example * m).reduce_sum(&[0], false);
            let count = m
                .reduce_sum(&[0], false)
                .maximum(&m.scalar_like(1.0).reshape(&[]));
            total / count
        }
    }
}
