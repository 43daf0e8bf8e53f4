//! Dense, the activation layers (Activation, ReLU, LeakyReLU, Softmax) and Embedding.

use super::{dims_of, input_dims, single, Ctx, Layer, WeightSpec};
use crate::keras::activations::Activation;
use crate::keras::error::KerasError;
use crate::keras::options::Options;
use crate::keras::regularizers::Regularizer;
use serde_json::Value;
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::Tensor;

/// The activation option, or the layer's error naming it.
pub(super) fn activation(o: &Options, key: &str) -> Result<Activation, KerasError> {
    let v = o.get(key);
    Activation::parse(v).map_err(|why| o.unsupported(key, v.unwrap_or(&Value::Null), &why))
}

/// A regularizer option, or the layer's error naming it.
pub(super) fn regularizer(o: &Options, key: &str) -> Result<Option<Regularizer>, KerasError> {
    let v = o.get(key);
    Regularizer::parse(v).map_err(|why| o.unsupported(key, v.unwrap_or(&Value::Null), &why))
}

/// `activity_regularizer` is refused: it penalizes outputs, which tessel does not add.
pub(super) fn no_activity_regularizer(o: &Options) -> Result<(), KerasError> {
    o.only(
        "activity_regularizer",
        &[],
        "activity regularizers are not supported",
    )
}

/// Multiplies the last dimension of `x` by `kernel` `[in, out]` (Keras's `Dense` on any rank).
#[track_caller]
pub(super) fn dense_product(x: &Tensor, kernel: &Tensor) -> Result<Tensor, String> {
    let dims = dims_of(x)?;
    let k = dims_of(kernel)?;
    if dims.len() == 2 {
        return Ok(x.matmul(kernel));
    }
    let flat = x.reshape(&[-1, k[0]]).matmul(kernel);
    let mut out = dims[..dims.len() - 1].to_vec();
    out.push(k[1]);
    Ok(flat.reshape(&out))
}

pub(super) struct Dense {
    units: i64,
    activation: Activation,
    use_bias: bool,
    kernel_regularizer: Option<Regularizer>,
    bias_regularizer: Option<Regularizer>,
}

impl Dense {
    pub(super) fn new(o: &Options) -> Result<Dense, KerasError> {
        o.initializers(&["kernel_initializer", "bias_initializer"]);
        o.no_constraints(&["kernel_constraint", "bias_constraint"])?;
        no_activity_regularizer(o)?;
        o.only("lora_rank", &[], "LoRA is not supported")?;
        o.only("quantization_config", &[], "quantization is not supported")?;
        Ok(Dense {
            units: o.i64_req("units")?,
            activation: activation(o, "activation")?,
            use_bias: o.bool_or("use_bias", true)?,
            kernel_regularizer: regularizer(o, "kernel_regularizer")?,
            bias_regularizer: regularizer(o, "bias_regularizer")?,
        })
    }
}

impl Layer for Dense {
    fn weights(&self, inputs: &[Vec<i64>]) -> Result<Vec<WeightSpec>, String> {
        let x = input_dims(inputs, None)?;
        let fan_in = *x.last().ok_or("needs an input of rank 2 or more")?;
        let mut w = vec![WeightSpec::trainable("kernel", vec![fan_in, self.units])];
        if self.use_bias {
            w.push(WeightSpec::trainable("bias", vec![self.units]));
        }
        Ok(w)
    }

    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let mut y = dense_product(x, &cx.weights[0].tensor)?;
        if self.use_bias {
            y = y + &cx.weights[1].tensor;
        }
        Ok(self.activation.apply(&y))
    }

    fn regularizers(&self) -> Vec<(usize, Regularizer)> {
        let mut r: Vec<_> = self.kernel_regularizer.iter().map(|r| (0, *r)).collect();
        if self.use_bias {
            r.extend(self.bias_regularizer.iter().map(|r| (1, *r)));
        }
        r
    }
}

pub(super) struct ActivationLayer(Activation);

impl ActivationLayer {
    pub(super) fn new(o: &Options) -> Result<ActivationLayer, KerasError> {
        Ok(ActivationLayer(activation(o, "activation")?))
    }
}

impl Layer for ActivationLayer {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        Ok(self.0.apply(single(inputs)?))
    }
}

/// Keras's ReLU: `max_value` above it, `x` from `threshold`, `negative_slope * (x -
/// threshold)` below.
pub(super) struct Relu {
    max_value: Option<f64>,
    negative_slope: f64,
    threshold: f64,
}

impl Relu {
    pub(super) fn new(o: &Options) -> Result<Relu, KerasError> {
        let max_value = o.get("max_value").and_then(Value::as_f64);
        Ok(Relu {
            max_value,
            negative_slope: o.f64_or("negative_slope", 0.0)?,
            threshold: o.f64_or("threshold", 0.0)?,
        })
    }
}

impl Layer for Relu {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let y = if self.negative_slope == 0.0 && self.threshold == 0.0 {
            x.relu()
        } else {
            let t = x.scalar_like(self.threshold);
            let below = (x - &t) * self.negative_slope as f32;
            x.greater_equal(&t).where_(x, &below)
        };
        Ok(match self.max_value {
            Some(m) => y.minimum(&x.scalar_like(m)),
            None => y,
        })
    }
}

pub(super) struct LeakyRelu {
    slope: f64,
}

impl LeakyRelu {
    pub(super) fn new(o: &Options) -> Result<LeakyRelu, KerasError> {
        // tf.keras saves `alpha`, Keras 3 `negative_slope`; both default to 0.3.
        let slope = match o.get("negative_slope") {
            Some(v) => v.as_f64(),
            None => o.get("alpha").and_then(Value::as_f64),
        };
        Ok(LeakyRelu {
            slope: slope.unwrap_or(0.3),
        })
    }
}

impl Layer for LeakyRelu {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let zero = x.scalar_like(0.0);
        Ok(x.greater_equal(&zero).where_(x, &(x * self.slope as f32)))
    }
}

pub(super) struct Softmax;

impl Softmax {
    pub(super) fn new(o: &Options) -> Result<Softmax, KerasError> {
        let axis = o.get("axis");
        let last = axis.is_none()
            || axis == Some(&Value::from(-1))
            || axis == Some(&serde_json::json!([-1]));
        if !last {
            return Err(o.unsupported(
                "axis",
                axis.unwrap_or(&Value::Null),
                "only the last axis (-1) is supported",
            ));
        }
        Ok(Softmax)
    }
}

impl Layer for Softmax {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        Ok(single(inputs)?.softmax(-1))
    }
}

/// `Embedding`: integer ids `[..]` to rows of `embeddings` `[input_dim, output_dim]`, as a
/// one-hot product (exact: each output is one row's value plus zeros).
pub(super) struct Embedding {
    input_dim: i64,
    output_dim: i64,
    regularizer: Option<Regularizer>,
}

impl Embedding {
    pub(super) fn new(o: &Options) -> Result<Embedding, KerasError> {
        o.initializers(&["embeddings_initializer"]);
        o.no_constraints(&["embeddings_constraint"])?;
        no_activity_regularizer(o)?;
        o.only(
            "mask_zero",
            &[Value::Bool(false)],
            "masking is not supported",
        )?;
        o.only("lora_rank", &[], "LoRA is not supported")?;
        o.only(
            "sparse",
            &[Value::Bool(false)],
            "sparse gradients are not supported",
        )?;
        // tf.keras's input_length only fixes the input's shape, which the model's input has.
        o.get("input_length");
        Ok(Embedding {
            input_dim: o.i64_req("input_dim")?,
            output_dim: o.i64_req("output_dim")?,
            regularizer: regularizer(o, "embeddings_regularizer")?,
        })
    }
}

impl Layer for Embedding {
    fn weights(&self, _inputs: &[Vec<i64>]) -> Result<Vec<WeightSpec>, String> {
        Ok(vec![WeightSpec::trainable(
            "embeddings",
            vec![self.input_dim, self.output_dim],
        )])
    }

    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let ids = single(inputs)?;
        let ids = match ids.element_type() {
            Some(t) if t.is_integer() => ids.clone(),
            // Keras casts float ids to int32.
            _ => ids.cast(ElementType::S32),
        };
        let one_hot = ids.one_hot(self.input_dim, ElementType::F32);
        dense_product(&one_hot, &cx.weights[0].tensor)
    }

    fn regularizers(&self) -> Vec<(usize, Regularizer)> {
        self.regularizer.iter().map(|r| (0, *r)).collect()
    }
}
