//! Regression losses: `tf.compat.v1.losses.mean_squared_error`, `absolute_difference` and
//! `huber_loss`.

use super::cross_entropy::float_type;
use super::describe;
use super::reduce::{weighted_loss, Reduction};
use crate::model::Graph;
use tessel_compiler::trace::Tensor;

/// TF's `mean_squared_error(labels, predictions, weights, reduction)`: elementwise
/// `(predictions - labels)^2`, weighted and reduced.
#[track_caller]
pub fn mean_squared_error(
    g: &Graph,
    labels: &Tensor,
    predictions: &Tensor,
    weights: Option<&Tensor>,
    reduction: Reduction,
) -> Tensor {
    const OP: &str = "mean_squared_error";
    match difference(OP, labels, predictions) {
        Ok(d) => weighted_loss(g, OP, &(&d * &d), weights, reduction),
        Err(failed) => failed,
    }
}

/// TF's `absolute_difference(labels, predictions, weights, reduction)`: elementwise
/// `|predictions - labels|`, weighted and reduced.
#[track_caller]
pub fn absolute_difference(
    g: &Graph,
    labels: &Tensor,
    predictions: &Tensor,
    weights: Option<&Tensor>,
    reduction: Reduction,
) -> Tensor {
    const OP: &str = "absolute_difference";
    match difference(OP, labels, predictions) {
        Ok(d) => weighted_loss(g, OP, &d.abs(), weights, reduction),
        Err(failed) => failed,
    }
}

/// TF's `huber_loss(labels, predictions, weights, delta, reduction)`: with `a = |predictions
/// - labels|`, `0.5 * q^2 + delta * (a - q)` where `q = min(a, delta)`, weighted and reduced.
#[track_caller]
pub fn huber_loss(
    g: &Graph,
    labels: &Tensor,
    predictions: &Tensor,
    weights: Option<&Tensor>,
    delta: f64,
    reduction: Reduction,
) -> Tensor {
    const OP: &str = "huber_loss";
    if !(delta > 0.0 && delta.is_finite()) {
        return predictions.fail(OP, format!("delta must be positive, got {delta}"));
    }
    let d = match difference(OP, labels, predictions) {
        Ok(d) => d,
        Err(failed) => return failed,
    };
    let abs_error = d.abs();
    let quadratic = abs_error.minimum(&abs_error.scalar_like(delta));
    let linear = &abs_error - &quadratic;
    let losses = &(&(&quadratic * &quadratic) * 0.5f32) + &(&linear * delta as f32);
    weighted_loss(g, OP, &losses, weights, reduction)
}

/// `predictions - labels` (labels cast to the predictions' float type), when both have the
/// same shape.
#[track_caller]
fn difference(op: &str, labels: &Tensor, predictions: &Tensor) -> Result<Tensor, Tensor> {
    let ty = float_type(op, "predictions", predictions)?;
    if !labels.is_ok() {
        return Err(labels.clone());
    }
    if labels.dims() != predictions.dims() {
        return Err(predictions.fail(
            op,
            format!(
                "labels {} and predictions {} must have the same shape",
                describe(labels),
                describe(predictions)
            ),
        ));
    }
    Ok(predictions - &labels.cast(ty))
}
