//! `tf.layers.dropout`: in training, zero each element with probability `rate` and scale the
//! others by `1 / (1 - rate)` (inverted dropout, so evaluation is the identity). The mask
//! comes from device randomness, different on every step and replica (see `random.rs`).

use super::{layer_name, rank_error, LayerError};
use crate::model::graph::Graph;
use crate::model::random::random_uniform;
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::Tensor;

/// Dropout when `training` (the guide's model_fn passes `mode == TRAIN`; here `g.mode == Mode::Train`),
/// the identity otherwise. The input's dimensions must be fixed (a batch with
/// `drop_remainder`).
#[track_caller]
pub fn dropout(
    g: &mut Graph,
    inputs: &Tensor,
    rate: f64,
    training: bool,
) -> Result<Tensor, LayerError> {
    let name = layer_name(g, &None, "dropout");
    if !(0.0..1.0).contains(&rate) {
        return Err(LayerError::Input {
            layer: "dropout",
            name,
            message: format!("the rate must be in [0, 1), got {rate}"),
        });
    }
    if !training || rate == 0.0 || !inputs.is_ok() {
        return Ok(inputs.clone());
    }
    let dims: Option<Vec<i64>> = inputs.dims().iter().map(|d| d.fixed()).collect();
    let Some(dims) = dims else {
        return Err(rank_error("dropout", &name, "fixed dimensions", inputs));
    };
    g.tracer.push_scope(&name);
    let noise = random_uniform(g, &dims);
    // `x * scale * cast(noise >= rate)`, the multiply form of TF's dropout: a select would
    // make the gradient a masked cotangent, and the differentiator then guards every
    // elementwise gradient below it (both conv layers' relu and bias gradients) with
    // `select(g == 0, 0, ..)`. Kept elements are bitwise TF's `x * scale`; dropped ones are a
    // zero (signed like x) that the next dense layer adds as zero, and a NaN or infinite x
    // stays NaN, so the NaN check still sees it.
    let keep = noise
        .greater_equal(&noise.scalar_like(rate))
        .cast(inputs.element_type().unwrap_or(ElementType::F32));
    let y = &(inputs * &inputs.scalar_like(1.0 / (1.0 - rate))) * &keep;
    g.tracer.pop_scope();
    Ok(y)
}
