//! `tf.layers.conv2d`: NHWC input, HWIO kernel, optional bias and activation.

use super::kernel_and_bias::kernel_and_bias;
use super::{fixed_dim, layer_name, rank_error, Activation, LayerError};
use crate::model::graph::Graph;
use crate::model::variables::Initializer;
use tessel_compiler::trace::{Padding, Tensor};

/// `conv2d`'s optional arguments, with TF's defaults (`strides=(1, 1)`, `padding='valid'`).
#[derive(Clone, Debug)]
pub struct Conv2d {
    pub strides: [i64; 2],
    pub padding: Padding,
    pub activation: Activation,
    pub use_bias: bool,
    pub kernel_initializer: Initializer,
    pub bias_initializer: Initializer,
    /// The layer's name (default: `conv2d`, `conv2d_1`, ...).
    pub name: Option<String>,
}

impl Default for Conv2d {
    fn default() -> Conv2d {
        Conv2d {
            strides: [1, 1],
            padding: Padding::Valid,
            activation: Activation::Linear,
            use_bias: true,
            kernel_initializer: Initializer::GlorotUniform,
            bias_initializer: Initializer::Zeros,
            name: None,
        }
    }
}

/// A 2-D convolution of `inputs` `[N, H, W, C]` with `filters` output channels:
/// variables `conv2d/kernel` `[kh, kw, C, filters]` (glorot_uniform) and `conv2d/bias`
/// `[filters]` (zeros).
#[track_caller]
pub fn conv2d(
    g: &mut Graph,
    inputs: &Tensor,
    filters: i64,
    kernel_size: [i64; 2],
    options: Conv2d,
) -> Result<Tensor, LayerError> {
    if !inputs.is_ok() {
        return Ok(inputs.clone());
    }
    let name = layer_name(g, &options.name, "conv2d");
    if inputs.rank() != 4 {
        return Err(rank_error(
            "conv2d",
            &name,
            "an NHWC input of rank 4",
            inputs,
        ));
    }
    let channels = fixed_dim(inputs, 3, "conv2d", &name, "channels")?;
    let ty = inputs.element_type().expect("a traced tensor has a type");
    let kernel_dims = [kernel_size[0], kernel_size[1], channels, filters];
    let (kernel, bias) = kernel_and_bias(
        g,
        &name,
        &kernel_dims,
        ty,
        (options.kernel_initializer, options.bias_initializer),
        options.use_bias,
    )?;
    g.tracer.push_scope(&name);
    let y = inputs.conv2d(&kernel, options.strides, options.padding);
    let y = match bias {
        Some(b) => y + b,
        None => y,
    };
    let y = options.activation.apply(y);
    g.tracer.pop_scope();
    Ok(y)
}
