//! `tf.layers.average_pooling2d`: the mean of each window of an NHWC input; with SAME
//! padding, border windows average only the input elements they cover, as TF does.

use super::layer_name;
use crate::model::graph::Graph;
use tessel_compiler::trace::{Padding, Tensor};

/// Average pooling over `pool_size` windows moved by `strides`.
#[track_caller]
pub fn average_pooling2d(
    g: &mut Graph,
    inputs: &Tensor,
    pool_size: [i64; 2],
    strides: [i64; 2],
    padding: Padding,
) -> Tensor {
    let name = layer_name(g, &None, "average_pooling2d");
    g.tracer.push_scope(&name);
    let y = inputs.avg_pool(pool_size, strides, padding);
    g.tracer.pop_scope();
    y
}
