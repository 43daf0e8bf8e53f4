//! Cross-entropy losses: `tf.compat.v1.losses.softmax_cross_entropy`,
//! `sparse_softmax_cross_entropy` and `sigmoid_cross_entropy`.

use super::describe;
use super::reduce::{weighted_loss, Reduction};
use crate::model::Graph;
use tessel_compiler::ir::{ElementType, UnaryOp};
use tessel_compiler::trace::{Dim, Tensor};

/// TF's `softmax_cross_entropy(onehot_labels, logits, weights, label_smoothing, reduction)`:
/// per example `-sum(labels * log_softmax(logits))` over the last axis, then weighted and
/// reduced ([`super::compute_weighted_loss`]). The labels (probabilities, e.g. a `one_hot`)
/// are cast to the logits' type; `label_smoothing` in `[0, 1]` moves them towards
/// `1 / classes` as TF does.
#[track_caller]
pub fn softmax_cross_entropy(
    g: &Graph,
    onehot_labels: &Tensor,
    logits: &Tensor,
    weights: Option<&Tensor>,
    label_smoothing: f64,
    reduction: Reduction,
) -> Tensor {
    const OP: &str = "softmax_cross_entropy";
    let ty = match smoothed_logits_type(OP, logits, label_smoothing) {
        Ok(ty) => ty,
        Err(failed) => return failed,
    };
    let mut labels = onehot_labels.cast(ty);
    if label_smoothing > 0.0 {
        let Some(Dim::Fixed(classes)) = logits.dims().last().copied() else {
            return logits.fail(
                OP,
                format!(
                    "label_smoothing needs a known number of classes, got logits {}",
                    describe(logits)
                ),
            );
        };
        labels =
            &(&labels * (1.0 - label_smoothing) as f32) + (label_smoothing / classes as f64) as f32;
    }
    let losses = logits.softmax_cross_entropy_with_logits(&labels);
    weighted_loss(g, OP, &losses, weights, reduction)
}

/// TF's `sparse_softmax_cross_entropy(labels, logits, weights, reduction)`: integer class
/// labels `[batch]` (or `[batch, 1]`) against logits `[batch, classes]`. A label outside
/// `0..classes` has no class to match and contributes a loss of 0 (TF's CPU kernel raises an
/// error, its GPU kernel gives NaN).
#[track_caller]
pub fn sparse_softmax_cross_entropy(
    g: &Graph,
    labels: &Tensor,
    logits: &Tensor,
    weights: Option<&Tensor>,
    reduction: Reduction,
) -> Tensor {
    const OP: &str = "sparse_softmax_cross_entropy";
    let ty = match float_type(OP, "logits", logits) {
        Ok(ty) => ty,
        Err(failed) => return failed,
    };
    match labels.element_type() {
        None => return labels.clone(),
        Some(t) if t.is_float() => {
            return labels.fail(
                OP,
                format!(
                    "labels must be integer class ids, got {} (cast them, or use softmax_cross_entropy for probabilities)",
                    describe(labels)
                ),
            )
        }
        Some(_) => {}
    }
    let logit_dims = logits.dims();
    let mut label_dims = labels.dims();
    let mut labels = labels.clone();
    // TF's `_remove_squeezable_dimensions`: labels `[batch, 1]` become `[batch]`.
    if label_dims.len() == logit_dims.len() && label_dims.last() == Some(&Dim::Fixed(1)) {
        label_dims.pop();
        let fixed: Option<Vec<i64>> = label_dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => Some(*n),
                Dim::Unknown => None,
            })
            .collect();
        match fixed {
            Some(dims) => labels = labels.reshape(&dims),
            None => {
                return labels.fail(
                    OP,
                    format!(
                        "cannot squeeze labels {} of unknown shape",
                        describe(&labels)
                    ),
                )
            }
        }
    }
    let classes = match logit_dims.split_last() {
        Some((Dim::Fixed(c), rest)) if rest == label_dims.as_slice() => *c,
        _ => {
            return logits.fail(
                OP,
                format!(
                    "labels {} and logits {} do not match: the logits need the labels' shape and then the classes",
                    describe(&labels),
                    describe(logits)
                ),
            )
        }
    };
    let losses = logits.softmax_cross_entropy_with_logits(&labels.one_hot(classes, ty));
    weighted_loss(g, OP, &losses, weights, reduction)
}

/// TF's `sigmoid_cross_entropy(multi_class_labels, logits, weights, label_smoothing,
/// reduction)`: elementwise `max(x, 0) - x * z + log(1 + exp(-|x|))` for logits `x` and
/// labels `z` of the same shape (cast to the logits' type); `label_smoothing` moves the
/// labels towards 1/2.
#[track_caller]
pub fn sigmoid_cross_entropy(
    g: &Graph,
    multi_class_labels: &Tensor,
    logits: &Tensor,
    weights: Option<&Tensor>,
    label_smoothing: f64,
    reduction: Reduction,
) -> Tensor {
    const OP: &str = "sigmoid_cross_entropy";
    let ty = match smoothed_logits_type(OP, logits, label_smoothing) {
        Ok(ty) => ty,
        Err(failed) => return failed,
    };
    if multi_class_labels.is_ok() && multi_class_labels.dims() != logits.dims() {
        return logits.fail(
            OP,
            format!(
                "labels {} and logits {} must have the same shape",
                describe(multi_class_labels),
                describe(logits)
            ),
        );
    }
    let mut z = multi_class_labels.cast(ty);
    if label_smoothing > 0.0 {
        z = &(&z * (1.0 - label_smoothing) as f32) + (0.5 * label_smoothing) as f32;
    }
    // TF's `sigmoid_cross_entropy_with_logits`, in its `where` form so the gradient at x = 0
    // is sigmoid(0) - z, as TF's.
    let x = logits;
    let zeros = x.scalar_like(0.0).broadcast_like(x);
    let positive = x.greater_equal(&zeros);
    let relu = positive.where_(x, &zeros);
    let neg_abs = positive.where_(&-x, x);
    let losses = &(&relu - &(x * &z)) + &neg_abs.exp().unary(UnaryOp::Log1p);
    weighted_loss(g, OP, &losses, weights, reduction)
}

/// The logits' float type, checked with `label_smoothing` (in `[0, 1]`) for the two losses
/// that smooth their labels; or the failed tensor to return.
#[track_caller]
fn smoothed_logits_type(
    op: &str,
    logits: &Tensor,
    label_smoothing: f64,
) -> Result<ElementType, Tensor> {
    let ty = float_type(op, "logits", logits)?;
    if !(0.0..=1.0).contains(&label_smoothing) {
        return Err(logits.fail(
            op,
            format!("label_smoothing must be in [0, 1], got {label_smoothing}"),
        ));
    }
    Ok(ty)
}

/// `t`'s element type, or the failed tensor to return: its own when it failed
/// already (no second error), a new error when they are not floating point.
#[track_caller]
pub(crate) fn float_type(op: &str, what: &str, t: &Tensor) -> Result<ElementType, Tensor> {
    match t.element_type() {
        None => Err(t.clone()),
        Some(ty) if ty.is_float() => Ok(ty),
        Some(_) => Err(t.fail(
            op,
            format!("{what} must be floating point, got {}", describe(t)),
        )),
    }
}
