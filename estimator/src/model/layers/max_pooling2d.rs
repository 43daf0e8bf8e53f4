//! `tf.layers.max_pooling2d`: the maximum of each window of an NHWC input.

use super::{layer_name, pooling_error, LayerError};
use crate::model::graph::Graph;
use tessel_compiler::trace::{Padding, Tensor};

/// Max pooling over `pool_size` windows moved by `strides` (TF's `padding` default is VALID).
/// An input that is not rank 4 (NHWC), or a window or stride below 1, is the layer's error.
#[track_caller]
pub fn max_pooling2d(
    g: &mut Graph,
    inputs: &Tensor,
    pool_size: [i64; 2],
    strides: [i64; 2],
    padding: Padding,
) -> Result<Tensor, LayerError> {
    if !inputs.is_ok() {
        return Ok(inputs.clone());
    }
    let name = layer_name(g, &None, "max_pooling2d");
    if let Some(e) = pooling_error("max_pooling2d", &name, inputs, pool_size, strides) {
        return Err(e);
    }
    g.tracer.push_scope(&name);
    let y = inputs.max_pool(pool_size, strides, padding);
    g.tracer.pop_scope();
    Ok(y)
}
