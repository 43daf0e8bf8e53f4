//! TF's `compute_weighted_loss`: per-element losses times the weights (and, in EVAL, the
//! padding mask), reduced.

use super::describe;
use crate::model::Graph;
use tessel_compiler::trace::{Dim, Tensor};

/// TF's `tf.compat.v1.losses.Reduction`: how weighted per-element losses become the loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The weighted losses, unreduced (the losses' shape).
    None,
    /// Their sum.
    Sum,
    /// Their sum divided by the sum of the weights (broadcast to the losses).
    Mean,
    /// Their sum divided by the number of elements (in EVAL, of real elements).
    SumOverBatchSize,
    /// Their sum divided by the number of elements whose weight is not zero: TF's default.
    #[default]
    SumByNonzeroWeights,
}

/// TF's `tf.compat.v1.losses.compute_weighted_loss(losses, weights, reduction)`, with the
/// graph's padding mask multiplied into the weights in EVAL. `None` weights are TF's `1.0`.
/// A division by zero weights gives 0 (TF's `div_no_nan`).
#[track_caller]
pub fn compute_weighted_loss(
    g: &Graph,
    losses: &Tensor,
    weights: Option<&Tensor>,
    reduction: Reduction,
) -> Tensor {
    weighted_loss(g, "compute_weighted_loss", losses, weights, reduction)
}

/// [`compute_weighted_loss`] reporting mistakes as the loss `op`.
#[track_caller]
pub(crate) fn weighted_loss(
    g: &Graph,
    op: &str,
    losses: &Tensor,
    weights: Option<&Tensor>,
    reduction: Reduction,
) -> Tensor {
    let Some(ty) = losses.element_type() else {
        return losses.clone();
    };
    if !ty.is_float() {
        return losses.fail(
            op,
            format!("losses must be floating point, got {}", describe(losses)),
        );
    }
    let weights = match weights {
        None => None,
        Some(w) if !w.is_ok() => return w.clone(),
        Some(w) if broadcastable(&w.dims(), &losses.dims()) => Some(w.cast(ty)),
        Some(w) => {
            return losses.fail(
                op,
                format!(
                    "weights can not be broadcast to values. values.shape={}. weights.shape={}.",
                    describe(losses),
                    describe(w)
                ),
            )
        }
    };
    let mask = match g.padding_mask() {
        None => None,
        Some(m) => match mask_for(losses, m) {
            Ok(m) => Some(m.cast(ty)),
            Err(message) => return losses.fail(op, message),
        },
    };
    // Each element's weight; `None` is 1 everywhere.
    let w = match (weights, &mask) {
        (None, None) => None,
        (Some(w), None) => Some(w),
        (None, Some(m)) => Some(m.clone()),
        (Some(w), Some(m)) => Some(&w * m),
    };
    let weighted = match &w {
        Some(w) => losses * w,
        None => losses.clone(),
    };
    if reduction == Reduction::None {
        return weighted;
    }
    if w.is_none() && reduction != Reduction::Sum {
        // No weights and no padding: every mean is the plain mean (the hand-written loss's
        // `reduce_mean`, so a step ported to these functions computes the same).
        return losses.reduce_mean(&[], false);
    }
    let sum = weighted.reduce_sum(&[], false);
    let ones = losses.scalar_like(1.0).broadcast_like(losses);
    let denominator = match reduction {
        Reduction::None | Reduction::Sum => return sum,
        Reduction::Mean => count(&ones, w.as_ref()),
        Reduction::SumOverBatchSize => count(&ones, mask.as_ref()),
        Reduction::SumByNonzeroWeights => match &w {
            Some(w) => {
                let full = &ones * w;
                full.not_equal(&full.scalar_like(0.0))
                    .cast(ty)
                    .reduce_sum(&[], false)
            }
            None => count(&ones, None),
        },
    };
    div_no_nan(&sum, &denominator)
}

/// The sum of `per_element` (1 when `None`) broadcast to `ones`' shape.
#[track_caller]
fn count(ones: &Tensor, per_element: Option<&Tensor>) -> Tensor {
    match per_element {
        Some(e) => (ones * e).reduce_sum(&[], false),
        None => ones.reduce_sum(&[], false),
    }
}

/// TF's `assert_broadcastable`: a scalar, or the values' rank with every dimension 1 or equal.
fn broadcastable(weights: &[Dim], values: &[Dim]) -> bool {
    weights.is_empty()
        || (weights.len() == values.len()
            && weights
                .iter()
                .zip(values)
                .all(|(w, v)| *w == Dim::Fixed(1) || w == v))
}

/// The padding mask `[batch]` shaped `[batch, 1, ..]` to weight `losses` `[batch, ..]`.
#[track_caller]
fn mask_for(losses: &Tensor, mask: &Tensor) -> Result<Tensor, String> {
    let dims = losses.dims();
    let batch = mask.dims().first().copied();
    if dims.first().copied() != batch || batch.is_none() {
        return Err(format!(
            "in EVAL the estimator pads the last batch and weights every loss by the padding mask {}, which needs the batch as the losses' first dimension, but the losses are {}",
            describe(mask),
            describe(losses)
        ));
    }
    let Some(Dim::Fixed(b)) = batch else {
        return Ok(mask.clone());
    };
    let mut shape = vec![b];
    shape.resize(dims.len(), 1);
    Ok(mask.reshape(&shape))
}

/// `num / den`, or 0 where `den` is 0; the division never sees a zero, so its gradient stays
/// finite.
#[track_caller]
fn div_no_nan(num: &Tensor, den: &Tensor) -> Tensor {
    let zero = den.scalar_like(0.0);
    let is_zero = den.equal(&zero);
    let safe = is_zero.where_(&den.scalar_like(1.0), den);
    is_zero.where_(&zero, &(num / &safe))
}
