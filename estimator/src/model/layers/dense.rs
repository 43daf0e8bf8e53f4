//! `tf.layers.dense`: `activation(inputs · kernel + bias)` over the last dimension.

use super::kernel_and_bias::kernel_and_bias;
use super::{fixed_dim, layer_name, Activation, LayerError};
use crate::model::graph::Graph;
use crate::model::variables::Initializer;
use tessel_compiler::trace::Tensor;

/// `dense`'s optional arguments, with TF's defaults.
#[derive(Clone, Debug)]
pub struct Dense {
    pub activation: Activation,
    pub use_bias: bool,
    pub kernel_initializer: Initializer,
    pub bias_initializer: Initializer,
    /// The layer's name (default: `dense`, `dense_1`, ...).
    pub name: Option<String>,
}

impl Default for Dense {
    fn default() -> Dense {
        Dense {
            activation: Activation::Linear,
            use_bias: true,
            kernel_initializer: Initializer::GlorotUniform,
            bias_initializer: Initializer::Zeros,
            name: None,
        }
    }
}

/// A fully connected layer of `units` outputs on `inputs` `[.., in]`: variables
/// `dense/kernel` `[in, units]` (glorot_uniform) and `dense/bias` `[units]` (zeros).
#[track_caller]
pub fn dense(
    g: &mut Graph,
    inputs: &Tensor,
    units: i64,
    options: Dense,
) -> Result<Tensor, LayerError> {
    if !inputs.is_ok() {
        return Ok(inputs.clone());
    }
    let name = layer_name(g, &options.name, "dense");
    let fan_in = fixed_dim(inputs, -1, "dense", &name, "the last dimension")?;
    let ty = inputs.element_type().expect("a traced tensor has a type");
    let (kernel, bias) = kernel_and_bias(
        g,
        &name,
        &[fan_in, units],
        ty,
        (options.kernel_initializer, options.bias_initializer),
        options.use_bias,
    )?;
    g.tracer.push_scope(&name);
    // TF's dense contracts the last dimension (a tensordot for rank > 2); this flattens the
    // leading dimensions, multiplies, and restores them.
    let dims = inputs.dims();
    let y = if dims.len() == 2 {
        inputs.matmul(&kernel)
    } else {
        let flat = inputs.reshape(&[-1, fan_in]).matmul(&kernel);
        let mut out: Vec<i64> = dims[..dims.len() - 1]
            .iter()
            .map(|d| d.fixed().unwrap_or(-1))
            .collect();
        out.push(units);
        flat.reshape(&out)
    };
    let y = match bias {
        Some(b) => y + b,
        None => y,
    };
    let y = options.activation.apply(y);
    g.tracer.pop_scope();
    Ok(y)
}
