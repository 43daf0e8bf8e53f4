//! Global pooling of a channels-last input: the maximum or the mean over every dimension
//! between the batch and the channels (Keras's `GlobalMaxPooling1D/2D` and
//! `GlobalAveragePooling1D/2D`; in TF 1 code, `tf.reduce_max(x, axis=1)` over time or
//! `tf.reduce_mean(x, [1, 2])` over an image). Traced as the Keras builder traces them: one
//! reduce over those axes.

use super::{rank_error, LayerError};
use crate::model::graph::Graph;
use tessel_compiler::trace::Tensor;

/// `[N, W, C]` or `[N, H, W, C]` to `[N, C]`: the maximum over the time or spatial axes.
#[track_caller]
pub fn global_max_pooling(g: &mut Graph, inputs: &Tensor) -> Result<Tensor, LayerError> {
    pool(g, inputs, "global_max_pooling", |x, axes| {
        x.reduce_max(axes, false)
    })
}

/// `[N, W, C]` or `[N, H, W, C]` to `[N, C]`: the mean over the time or spatial axes.
#[track_caller]
pub fn global_average_pooling(g: &mut Graph, inputs: &Tensor) -> Result<Tensor, LayerError> {
    pool(g, inputs, "global_average_pooling", |x, axes| {
        x.reduce_mean(axes, false)
    })
}

#[track_caller]
fn pool(
    g: &mut Graph,
    inputs: &Tensor,
    base: &'static str,
    reduce: impl FnOnce(&Tensor, &[i64]) -> Tensor,
) -> Result<Tensor, LayerError> {
    if !inputs.is_ok() {
        return Ok(inputs.clone());
    }
    let name = g.unique_layer_name(base);
    let rank = inputs.rank() as i64;
    if !(3..=4).contains(&rank) {
        return Err(rank_error(
            base,
            &name,
            "a channels-last input of rank 3 (NWC) or 4 (NHWC)",
            inputs,
        ));
    }
    let axes: Vec<i64> = (1..rank - 1).collect();
    g.tracer.push_scope(&name);
    let y = reduce(inputs, &axes);
    g.tracer.pop_scope();
    Ok(y)
}
