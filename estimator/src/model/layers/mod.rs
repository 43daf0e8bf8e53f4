//! Layers as `tf.compat.v1.layers` makes them: the same variable names (`conv2d/kernel`,
//! `conv2d_1/bias`), initializers and defaults. Each layer is a function of the [`Graph`]:
//! it creates its variables with `get_variable` in a variable scope named after the layer
//! (TF's numbering: `dense`, `dense_1`, ...) and traces its ops in a name scope of that
//! name, so op names read `conv2d/convolution`. Layers are `#[track_caller]`: every op's
//! metadata points at the model_fn line that called the layer.
//!
//! | file | layer |
//! | --- | --- |
//! | `conv1d.rs` | `conv1d`, options [`Conv1d`] |
//! | `conv2d.rs` | `conv2d`, options [`Conv2d`] |
//! | `dense.rs` | `dense`, options [`Dense`] |
//! | `embedding.rs` | `embedding` (a gather of rows), options [`Embedding`] |
//! | `global_pooling.rs` | `global_max_pooling`, `global_average_pooling` |
//! | `max_pooling2d.rs`, `average_pooling2d.rs` | pooling (TF's SAME averaging of border windows) |
//! | `flatten.rs` | `flatten` |
//! | `dropout.rs` | `dropout` with device randomness |
//! | `batch_normalization.rs` | `batch_normalization`, options [`BatchNorm`] |

mod average_pooling2d;
mod batch_normalization;
mod conv1d;
mod conv2d;
mod dense;
mod dropout;
mod embedding;
mod flatten;
mod global_pooling;
mod kernel_and_bias;
mod max_pooling2d;

pub use average_pooling2d::average_pooling2d;
pub use batch_normalization::{batch_normalization, BatchNorm};
pub use conv1d::{conv1d, Conv1d};
pub use conv2d::{conv2d, Conv2d};
pub use dense::{dense, Dense};
pub use dropout::dropout;
pub use embedding::{embedding, Embedding};
pub use flatten::flatten;
pub use global_pooling::{global_average_pooling, global_max_pooling};
pub use max_pooling2d::max_pooling2d;
pub use tessel_compiler::trace::Padding;

use super::get_variable::VariableError;
use super::graph::Graph;
use tessel_compiler::trace::{Dim, Tensor};

/// A layer's activation (TF's `activation=` argument).
#[derive(Clone, Copy, Debug, Default)]
pub enum Activation {
    /// None: the layer's output as it is.
    #[default]
    Linear,
    Relu,
    Sigmoid,
    Tanh,
    /// Any function of the output.
    Custom(fn(&Tensor) -> Tensor),
}

impl Activation {
    #[track_caller]
    pub fn apply(self, x: Tensor) -> Tensor {
        match self {
            Activation::Linear => x,
            Activation::Relu => x.relu(),
            Activation::Sigmoid => x.sigmoid(),
            Activation::Tanh => x.tanh(),
            Activation::Custom(f) => f(&x),
        }
    }
}

/// Why a layer could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LayerError {
    #[error(transparent)]
    Variable(#[from] VariableError),
    #[error("{layer} `{name}`: {message}")]
    Input {
        layer: &'static str,
        name: String,
        message: String,
    },
}

/// The layer's name: the one given, or TF's next unique name for `base`.
fn layer_name(g: &mut Graph, given: &Option<String>, base: &str) -> String {
    given.clone().unwrap_or_else(|| g.unique_layer_name(base))
}

/// The fixed size of dimension `axis` (negative counts from the end) of `x`, or the layer's
/// input error.
fn fixed_dim(
    x: &Tensor,
    axis: i64,
    layer: &'static str,
    name: &str,
    what: &str,
) -> Result<i64, LayerError> {
    let dims = x.dims();
    let rank = dims.len() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    match (0..rank).contains(&a).then(|| dims[a as usize]) {
        Some(Dim::Fixed(n)) => Ok(n),
        _ => Err(LayerError::Input {
            layer,
            name: name.to_string(),
            message: format!(
                "needs {what} of fixed size (dimension {axis}), got an input of shape {}",
                describe(&dims)
            ),
        }),
    }
}

/// `[?,28,28,1]` for messages.
fn describe(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}

/// The error of a layer whose input has the wrong rank.
fn rank_error(layer: &'static str, name: &str, want: &str, x: &Tensor) -> LayerError {
    LayerError::Input {
        layer,
        name: name.to_string(),
        message: format!(
            "needs {want}, got an input of shape {}",
            describe(&x.dims())
        ),
    }
}

/// A pooling layer's input error: the input is not NHWC, or a window or stride is below 1.
fn pooling_error(
    layer: &'static str,
    name: &str,
    x: &Tensor,
    pool_size: [i64; 2],
    strides: [i64; 2],
) -> Option<LayerError> {
    if x.rank() != 4 {
        return Some(rank_error(layer, name, "an NHWC input of rank 4", x));
    }
    if pool_size.iter().chain(&strides).any(|&v| v < 1) {
        return Some(LayerError::Input {
            layer,
            name: name.to_string(),
            message: format!("pool_size {pool_size:?} and strides {strides:?} must be at least 1"),
        });
    }
    None
}
