//! Host-side streaming metrics with TF1's `tf.metrics` semantics, for `eval_metrics`.
//!
//! Each metric is updated with one batch at a time (arrays outfed by the replicas,
//! concatenated in replica order) and optional weights, then gives its result. Weights
//! follow TF's broadcasting rule (a scalar, or the values' rank with each dimension equal or
//! 1); a weight of 0 removes an example, which is how padded examples of a last partial batch
//! stay out of the result. A metric with no weight yet gives 0, as TF's `div_no_nan`.
//!
//! Unlike TF, which accumulates in f32 variables, totals and counts are f64, so a long
//! evaluation does not drift; results agree with TF's to f32 precision.
//!
//! | file | metric (TF1 name) |
//! | --- | --- |
//! | `accuracy.rs` | `Accuracy` (`tf.metrics.accuracy`) |
//! | `auc.rs` | `Auc` (`tf.metrics.auc`: ROC, 200 thresholds, trapezoidal) |
//! | `top_k.rs` | `TopKAccuracy` (`tf.metrics.mean(tf.nn.in_top_k(...))`) |
//! | `mean.rs` | `Mean` (`tf.metrics.mean`) |
//! | `mean_squared_error.rs` | `MeanSquaredError` (`tf.metrics.mean_squared_error`) |
//! | `precision_recall.rs` | `Precision`, `Recall` (`tf.metrics.precision`, `recall`) |
//! | `weights.rs` | reading values and broadcasting weights |
//! | `set.rs` | `MetricSet`: named streaming metrics, what a `metric_fn` updates |

mod accuracy;
mod auc;
mod mean;
mod mean_squared_error;
mod precision_recall;
mod set;
mod top_k;
mod weights;

pub use accuracy::Accuracy;
pub use auc::Auc;
pub use mean::Mean;
pub use mean_squared_error::MeanSquaredError;
pub use precision_recall::{Precision, Recall};
pub use set::MetricSet;
pub use top_k::TopKAccuracy;

/// A streaming metric's result so far.
pub trait Metric {
    /// The value over every batch seen so far (0 before any weight arrived).
    fn result(&self) -> f64;
}

/// Mismatched batches, worded after TF's shape errors.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MetricError {
    #[error("{what}: shapes {left} and {right} are incompatible")]
    Shapes {
        what: &'static str,
        left: String,
        right: String,
    },
    #[error(
        "weights can not be broadcast to values. values.shape={values}. weights.shape={weights}."
    )]
    Weights { values: String, weights: String },
    /// A value outside the metric's domain (TF's assertion).
    #[error("{what}: {message}")]
    Range { what: &'static str, message: String },
}

/// `total / count`, or 0 when count is 0 (TF's `div_no_nan`).
pub(crate) fn div_no_nan(total: f64, count: f64) -> f64 {
    if count == 0.0 {
        0.0
    } else {
        total / count
    }
}
