//! `tf.layers.flatten`: `[N, ...]` to `[N, product of the rest]`.

use super::{layer_name, rank_error, LayerError};
use crate::model::graph::Graph;
use tessel_compiler::trace::{Dim, Tensor};

/// Keeps the batch dimension and flattens the others (they must be fixed).
#[track_caller]
pub fn flatten(g: &mut Graph, inputs: &Tensor) -> Result<Tensor, LayerError> {
    if !inputs.is_ok() {
        return Ok(inputs.clone());
    }
    let name = layer_name(g, &None, "flatten");
    let dims = inputs.dims();
    let rest: Option<i64> = dims.iter().skip(1).map(|d| d.fixed()).product();
    let (Some(rest), true) = (rest, !dims.is_empty()) else {
        return Err(rank_error(
            "flatten",
            &name,
            "rank >= 1 with fixed non-batch dimensions",
            inputs,
        ));
    };
    let batch = match dims[0] {
        Dim::Fixed(n) => n,
        Dim::Unknown => -1,
    };
    g.tracer.push_scope(&name);
    let y = inputs.reshape(&[batch, rest]);
    g.tracer.pop_scope();
    Ok(y)
}
