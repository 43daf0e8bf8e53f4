//! `tf.layers.conv1d`: an NWC input `[batch, width, channels]`, a WIO kernel, optional bias
//! and activation. Traced as the Keras builder traces Conv1D: a `conv2d` of height 1 on the
//! input reshaped to `[batch, 1, width, channels]`, reshaped back.

use super::kernel_and_bias::kernel_and_bias;
use super::{fixed_dim, layer_name, rank_error, Activation, LayerError};
use crate::model::graph::Graph;
use crate::model::variables::Initializer;
use tessel_compiler::trace::{Padding, Tensor};

/// `conv1d`'s optional arguments, with TF's defaults (`strides=1`, `padding='valid'`).
#[derive(Clone, Debug)]
pub struct Conv1d {
    pub strides: i64,
    pub padding: Padding,
    pub activation: Activation,
    pub use_bias: bool,
    pub kernel_initializer: Initializer,
    pub bias_initializer: Initializer,
    /// The layer's name (default: `conv1d`, `conv1d_1`, ...).
    pub name: Option<String>,
}

impl Default for Conv1d {
    fn default() -> Conv1d {
        Conv1d {
            strides: 1,
            padding: Padding::Valid,
            activation: Activation::Linear,
            use_bias: true,
            kernel_initializer: Initializer::GlorotUniform,
            bias_initializer: Initializer::Zeros,
            name: None,
        }
    }
}

/// A 1-D convolution of `inputs` `[N, W, C]` with `filters` output channels and windows of
/// `kernel_size`: variables `conv1d/kernel` `[kernel_size, C, filters]` (glorot_uniform) and
/// `conv1d/bias` `[filters]` (zeros).
#[track_caller]
pub fn conv1d(
    g: &mut Graph,
    inputs: &Tensor,
    filters: i64,
    kernel_size: i64,
    options: Conv1d,
) -> Result<Tensor, LayerError> {
    if !inputs.is_ok() {
        return Ok(inputs.clone());
    }
    let name = layer_name(g, &options.name, "conv1d");
    if inputs.rank() != 3 {
        return Err(rank_error(
            "conv1d",
            &name,
            "an NWC input of rank 3",
            inputs,
        ));
    }
    if filters < 1 || kernel_size < 1 || options.strides < 1 {
        return Err(LayerError::Input {
            layer: "conv1d",
            name,
            message: format!(
                "filters {filters}, kernel_size {kernel_size} and strides {} must be at least 1",
                options.strides
            ),
        });
    }
    let width = fixed_dim(inputs, 1, "conv1d", &name, "a width")?;
    let channels = fixed_dim(inputs, 2, "conv1d", &name, "channels")?;
    let ty = inputs.element_type().expect("a traced tensor has a type");
    let (kernel, bias) = kernel_and_bias(
        g,
        &name,
        &[kernel_size, channels, filters],
        ty,
        (options.kernel_initializer, options.bias_initializer),
        options.use_bias,
    )?;
    g.tracer.push_scope(&name);
    let lifted = inputs.reshape(&[-1, 1, width, channels]);
    let kernel_2d = kernel.reshape(&[1, kernel_size, channels, filters]);
    let y = lifted.conv2d(&kernel_2d, [1, options.strides], options.padding);
    let out_width = y.dims().get(2).and_then(|d| d.fixed()).unwrap_or(-1);
    let y = y.reshape(&[-1, out_width, filters]);
    let y = match bias {
        Some(b) => y + b,
        None => y,
    };
    let y = options.activation.apply(y);
    g.tracer.pop_scope();
    Ok(y)
}
