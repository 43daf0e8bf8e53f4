//! Keras layers as traced functions of a [`Graph`]: each class reads its saved options
//! (refusing any it does not honour), says which weights it has, and computes its output from
//! its inputs and weights, in training or inference behaviour.
//!
//! | file | classes |
//! | --- | --- |
//! | `core.rs` | Dense, Activation, ReLU, LeakyReLU, Softmax, Embedding |
//! | `conv.rs` | Conv1D, Conv2D, DepthwiseConv2D, SeparableConv2D |
//! | `pooling.rs` | MaxPooling1D/2D, AveragePooling1D/2D, GlobalAverage/GlobalMaxPooling1D/2D |
//! | `reshaping.rs` | Flatten, Reshape, ZeroPadding2D |
//! | `normalization.rs` | BatchNormalization, LayerNormalization |
//! | `merging.rs` | Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate |
//! | `dropout.rs` | Dropout, SpatialDropout1D/2D |

mod conv;
mod core;
mod dropout;
mod merging;
mod normalization;
mod pooling;
mod reshaping;

use super::architecture::LayerConfig;
use super::error::KerasError;
use super::options::Options;
use super::regularizers::Regularizer;
use crate::model::{Graph, VariableId};
use tessel_compiler::trace::Tensor;

/// A weight a layer has, in Keras's `layer.weights` order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WeightSpec {
    pub(crate) name: &'static str,
    pub(crate) dims: Vec<i64>,
    pub(crate) trainable: bool,
}

impl WeightSpec {
    fn trainable(name: &'static str, dims: Vec<i64>) -> WeightSpec {
        WeightSpec {
            name,
            dims,
            trainable: true,
        }
    }

    fn frozen(name: &'static str, dims: Vec<i64>) -> WeightSpec {
        WeightSpec {
            name,
            dims,
            trainable: false,
        }
    }
}

/// A layer's variable in the graph.
#[derive(Clone, Debug)]
pub(crate) struct Weight {
    pub(crate) tensor: Tensor,
    pub(crate) id: VariableId,
}

/// What a layer's call sees besides its inputs.
pub(crate) struct Ctx<'a> {
    pub(crate) g: &'a mut Graph,
    /// Training behaviour (dropout on, batch statistics).
    pub(crate) training: bool,
    pub(crate) weights: &'a [Weight],
    /// The file was written by tf.keras 2.x (whose fused batch normalization feeds the
    /// unbiased variance to the moving average), not Keras 3.
    pub(crate) tf_keras: bool,
}

pub(crate) trait Layer: Send + Sync {
    /// The weights for inputs of these shapes (batch first).
    fn weights(&self, _inputs: &[Vec<i64>]) -> Result<Vec<WeightSpec>, String> {
        Ok(Vec::new())
    }

    /// The output for these inputs; `cx.weights` are the ones `weights` named.
    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String>;

    /// Penalties on weights (by index in `weights`) added to the loss.
    fn regularizers(&self) -> Vec<(usize, Regularizer)> {
        Vec::new()
    }
}

/// The layer `cfg` describes, its options checked.
pub(crate) fn from_config(cfg: &LayerConfig) -> Result<Box<dyn Layer>, KerasError> {
    let o = Options::new(&cfg.name, &cfg.class, &cfg.config);
    // Keras 2 / 3 spell some classes differently.
    let class = match cfg.class.as_str() {
        "Convolution1D" => "Conv1D",
        "Convolution2D" => "Conv2D",
        "SeparableConvolution2D" => "SeparableConv2D",
        "MaxPool1D" => "MaxPooling1D",
        "MaxPool2D" => "MaxPooling2D",
        "AvgPool1D" => "AveragePooling1D",
        "AvgPool2D" => "AveragePooling2D",
        "GlobalAvgPool1D" => "GlobalAveragePooling1D",
        "GlobalAvgPool2D" => "GlobalAveragePooling2D",
        "GlobalMaxPool1D" => "GlobalMaxPooling1D",
        "GlobalMaxPool2D" => "GlobalMaxPooling2D",
        other => other,
    };
    let layer: Box<dyn Layer> = match class {
        "Dense" => Box::new(core::Dense::new(&o)?),
        "Activation" => Box::new(core::ActivationLayer::new(&o)?),
        "ReLU" => Box::new(core::Relu::new(&o)?),
        "LeakyReLU" => Box::new(core::LeakyRelu::new(&o)?),
        "Softmax" => Box::new(core::Softmax::new(&o)?),
        "Embedding" => Box::new(core::Embedding::new(&o)?),
        "Conv1D" => Box::new(conv::Conv::new(&o, 1)?),
        "Conv2D" => Box::new(conv::Conv::new(&o, 2)?),
        "DepthwiseConv2D" => Box::new(conv::DepthwiseConv2D::new(&o)?),
        "SeparableConv2D" => Box::new(conv::SeparableConv2D::new(&o)?),
        "MaxPooling1D" => Box::new(pooling::Pooling::new(&o, 1, pooling::Kind::Max)?),
        "MaxPooling2D" => Box::new(pooling::Pooling::new(&o, 2, pooling::Kind::Max)?),
        "AveragePooling1D" => Box::new(pooling::Pooling::new(&o, 1, pooling::Kind::Average)?),
        "AveragePooling2D" => Box::new(pooling::Pooling::new(&o, 2, pooling::Kind::Average)?),
        "GlobalAveragePooling1D" => Box::new(pooling::Global::new(&o, 1, pooling::Kind::Average)?),
        "GlobalAveragePooling2D" => Box::new(pooling::Global::new(&o, 2, pooling::Kind::Average)?),
        "GlobalMaxPooling1D" => Box::new(pooling::Global::new(&o, 1, pooling::Kind::Max)?),
        "GlobalMaxPooling2D" => Box::new(pooling::Global::new(&o, 2, pooling::Kind::Max)?),
        "Flatten" => Box::new(reshaping::Flatten::new(&o)?),
        "Reshape" => Box::new(reshaping::Reshape::new(&o)?),
        "ZeroPadding2D" => Box::new(reshaping::ZeroPadding2D::new(&o)?),
        "BatchNormalization" => Box::new(normalization::BatchNormalization::new(&o)?),
        "LayerNormalization" => Box::new(normalization::LayerNormalization::new(&o)?),
        "Add" | "Subtract" | "Multiply" | "Average" | "Maximum" | "Minimum" => {
            Box::new(merging::Merge::new(&o, class)?)
        }
        "Concatenate" => Box::new(merging::Concatenate::new(&o)?),
        "Dropout" => Box::new(dropout::Dropout::new(&o, 0)?),
        "SpatialDropout1D" => Box::new(dropout::Dropout::new(&o, 1)?),
        "SpatialDropout2D" => Box::new(dropout::Dropout::new(&o, 2)?),
        _ => {
            return Err(KerasError::UnsupportedLayer {
                layer: cfg.name.clone(),
                class: cfg.class.clone(),
            })
        }
    };
    o.finish()?;
    Ok(layer)
}

/// The one input of a single-input layer.
fn single(inputs: &[Tensor]) -> Result<&Tensor, String> {
    match inputs {
        [x] => Ok(x),
        _ => Err(format!("takes one input, got {}", inputs.len())),
    }
}

/// The fixed dims of `x`.
fn dims_of(x: &Tensor) -> Result<Vec<i64>, String> {
    x.dims()
        .iter()
        .map(|d| d.fixed())
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| "needs an input of fixed shape".to_string())
}

/// An input's shape for `weights`, checking its rank.
fn input_dims(inputs: &[Vec<i64>], rank: Option<usize>) -> Result<&[i64], String> {
    let [x] = inputs else {
        return Err(format!("takes one input, got {}", inputs.len()));
    };
    match rank {
        Some(r) if x.len() != r => Err(format!(
            "needs an input of rank {r} (batch first), got shape {x:?}"
        )),
        _ => Ok(x),
    }
}
