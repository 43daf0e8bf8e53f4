//! Losses as `tf.compat.v1.losses` computes them, for a model_fn's `loss`.
//!
//! Each function computes per-element losses, multiplies them by `weights` (a scalar, or a
//! tensor of the losses' rank whose dimensions are equal or 1: TF's broadcasting rule) and
//! reduces them by a [`Reduction`] (TF's default: `SumByNonzeroWeights`, the mean over the
//! elements whose weight is not zero).
//!
//! **Padding.** In EVAL the estimator pads a short last batch with zero rows and gives the
//! graph a per-example mask ([`Graph::padding_mask`](crate::model::Graph::padding_mask), 1 real,
//! 0 padding). Every loss multiplies the mask into its weights (or uses it alone when
//! `weights` is `None`), so the loss of a padded batch is the mean over its real examples and a
//! model_fn written as in TF is right on the whole eval set. `SumOverBatchSize` then divides by
//! the real elements. In TRAIN and PREDICT there is no mask and the formulas are TF's exactly.
//!
//! Mistakes (shapes that do not match, integer logits, weights that do not broadcast) are
//! trace errors at the model_fn's line, like the ops' own (`docs/tracing.md`).
//!
//! | file | functions |
//! | --- | --- |
//! | `cross_entropy.rs` | `softmax_cross_entropy`, `sparse_softmax_cross_entropy`, `sigmoid_cross_entropy` |
//! | `regression.rs` | `mean_squared_error`, `absolute_difference`, `huber_loss` |
//! | `reduce.rs` | `Reduction`, `compute_weighted_loss`: weights, the padding mask and the reduction |

mod cross_entropy;
mod reduce;
mod regression;

pub use cross_entropy::{
    sigmoid_cross_entropy, softmax_cross_entropy, sparse_softmax_cross_entropy,
};
pub use reduce::{compute_weighted_loss, Reduction};
pub use regression::{absolute_difference, huber_loss, mean_squared_error};

use tessel_compiler::trace::Tensor;

/// `f32[?,10]` for messages.
pub(crate) fn describe(t: &Tensor) -> String {
    let dims: Vec<String> = t.dims().iter().map(|d| d.to_string()).collect();
    match t.element_type() {
        Some(ty) => format!("{ty}[{}]", dims.join(",")),
        None => "a failed tensor".to_string(),
    }
}

#[cfg(test)]
mod tests;
