//! `tf.layers.max_pooling2d`: the maximum of each window of an NHWC input.

use super::layer_name;
use crate::model::graph::Graph;
use tessel_compiler::trace::{Padding, Tensor};

/// Max pooling over `pool_size` windows moved by `strides` (TF's `padding` default is VALID).
#[track_caller]
pub fn max_pooling2d(
    g: &mut Graph,
    inputs: &Tensor,
    pool_size: [i64; 2],
    strides: [i64; 2],
    padding: Padding,
) -> Tensor {
    let name = layer_name(g, &None, "max_pooling2d");
    g.tracer.push_scope(&name);
    let y = inputs.max_pool(pool_size, strides, padding);
    g.tracer.pop_scope();
    y
}
