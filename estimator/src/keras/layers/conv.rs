//! Conv1D, Conv2D, DepthwiseConv2D and SeparableConv2D (channels_last; a 1-D convolution is
//! the 2-D one over a height of 1).

use super::core::{activation, no_activity_regularizer, regularizer};
use super::{dims_of, input_dims, single, Ctx, Layer, WeightSpec};
use crate::keras::activations::Activation;
use crate::keras::error::KerasError;
use crate::keras::ops;
use crate::keras::options::Options;
use crate::keras::regularizers::Regularizer;
use serde_json::Value;
use tessel_compiler::trace::{Padding, Tensor};

/// `padding`: "valid" or "same" ("causal" and others are refused).
pub(super) fn padding(o: &Options) -> Result<Padding, KerasError> {
    match o.str_or("padding", "valid")? {
        "valid" => Ok(Padding::Valid),
        "same" => Ok(Padding::Same),
        other => Err(o.unsupported(
            "padding",
            &Value::from(other),
            "only \"valid\" and \"same\" are supported",
        )),
    }
}

/// `dilation_rate` must be 1 everywhere.
fn no_dilation(o: &Options, n: usize) -> Result<(), KerasError> {
    if o.ints("dilation_rate", n, Some(1))?.iter().any(|&d| d != 1) {
        let v = o.get("dilation_rate").cloned().unwrap_or(Value::Null);
        return Err(o.unsupported(
            "dilation_rate",
            &v,
            "dilated convolutions are not supported",
        ));
    }
    Ok(())
}

/// The options every convolution shares.
struct Common {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    padding: Padding,
    activation: Activation,
    use_bias: bool,
    bias_regularizer: Option<Regularizer>,
}

fn common(o: &Options, n: usize) -> Result<Common, KerasError> {
    o.channels_last()?;
    no_dilation(o, n)?;
    no_activity_regularizer(o)?;
    o.no_constraints(&[
        "kernel_constraint",
        "bias_constraint",
        "depthwise_constraint",
        "pointwise_constraint",
    ])?;
    o.initializers(&[
        "kernel_initializer",
        "bias_initializer",
        "depthwise_initializer",
        "pointwise_initializer",
    ]);
    o.only("lora_rank", &[], "LoRA is not supported")?;
    o.only(
        "groups",
        &[Value::from(1)],
        "grouped convolutions are not supported",
    )?;
    Ok(Common {
        kernel: o.ints("kernel_size", n, None)?,
        strides: o.ints("strides", n, Some(1))?,
        padding: padding(o)?,
        activation: activation(o, "activation")?,
        use_bias: o.bool_or("use_bias", true)?,
        bias_regularizer: regularizer(o, "bias_regularizer")?,
    })
}

/// `[kh, kw]` and strides of the 2-D form of an `n`-D window.
fn as_2d(v: &[i64]) -> [i64; 2] {
    match v {
        [w] => [1, *w],
        [h, w] => [*h, *w],
        _ => [1, 1],
    }
}

/// An `[B, L, C]` input as `[B, 1, L, C]`, or the input itself when 2-D.
fn lift(x: &Tensor, n: usize) -> Result<Tensor, String> {
    let d = dims_of(x)?;
    if d.len() != n + 2 {
        return Err(format!(
            "needs an input of rank {} (batch first), got shape {d:?}",
            n + 2
        ));
    }
    Ok(if n == 1 {
        x.reshape(&[d[0], 1, d[1], d[2]])
    } else {
        x.clone()
    })
}

/// The 2-D result back to the `n`-D layout.
fn lower(y: Tensor, n: usize) -> Result<Tensor, String> {
    if n == 2 {
        return Ok(y);
    }
    let d = dims_of(&y)?;
    Ok(y.reshape(&[d[0], d[2], d[3]]))
}

fn finish(c: &Common, y: Tensor, bias: Option<&Tensor>) -> Tensor {
    let y = match bias {
        Some(b) => y + b,
        None => y,
    };
    c.activation.apply(&y)
}

/// Conv1D (`n` = 1) and Conv2D (`n` = 2).
pub(super) struct Conv {
    n: usize,
    filters: i64,
    c: Common,
    kernel_regularizer: Option<Regularizer>,
}

impl Conv {
    pub(super) fn new(o: &Options, n: usize) -> Result<Conv, KerasError> {
        Ok(Conv {
            n,
            filters: o.i64_req("filters")?,
            c: common(o, n)?,
            kernel_regularizer: regularizer(o, "kernel_regularizer")?,
        })
    }
}

impl Layer for Conv {
    fn weights(&self, inputs: &[Vec<i64>]) -> Result<Vec<WeightSpec>, String> {
        let x = input_dims(inputs, Some(self.n + 2))?;
        let mut k = self.c.kernel.clone();
        k.extend([x[self.n + 1], self.filters]);
        let mut w = vec![WeightSpec::trainable("kernel", k)];
        if self.c.use_bias {
            w.push(WeightSpec::trainable("bias", vec![self.filters]));
        }
        Ok(w)
    }

    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = lift(single(inputs)?, self.n)?;
        let k = &cx.weights[0].tensor;
        let k = if self.n == 1 {
            let d = dims_of(k)?;
            k.reshape(&[1, d[0], d[1], d[2]])
        } else {
            k.clone()
        };
        let y = lower(x.conv2d(&k, as_2d(&self.c.strides), self.c.padding), self.n)?;
        Ok(finish(&self.c, y, cx.weights.get(1).map(|w| &w.tensor)))
    }

    fn regularizers(&self) -> Vec<(usize, Regularizer)> {
        let mut r: Vec<_> = self.kernel_regularizer.iter().map(|r| (0, *r)).collect();
        if self.c.use_bias {
            r.extend(self.c.bias_regularizer.iter().map(|r| (1, *r)));
        }
        r
    }
}

pub(super) struct DepthwiseConv2D {
    multiplier: i64,
    c: Common,
    depthwise_regularizer: Option<Regularizer>,
}

impl DepthwiseConv2D {
    pub(super) fn new(o: &Options) -> Result<DepthwiseConv2D, KerasError> {
        Ok(DepthwiseConv2D {
            multiplier: o.ints("depth_multiplier", 1, Some(1))?[0],
            c: common(o, 2)?,
            depthwise_regularizer: regularizer(o, "depthwise_regularizer")?,
        })
    }
}

impl Layer for DepthwiseConv2D {
    fn weights(&self, inputs: &[Vec<i64>]) -> Result<Vec<WeightSpec>, String> {
        let x = input_dims(inputs, Some(4))?;
        let mut k = self.c.kernel.clone();
        k.extend([x[3], self.multiplier]);
        let mut w = vec![WeightSpec::trainable("depthwise_kernel", k)];
        if self.c.use_bias {
            w.push(WeightSpec::trainable("bias", vec![x[3] * self.multiplier]));
        }
        Ok(w)
    }

    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let y = ops::depthwise_conv2d(
            cx.g,
            x,
            &cx.weights[0].tensor,
            as_2d(&self.c.strides),
            self.c.padding,
        )?;
        Ok(finish(&self.c, y, cx.weights.get(1).map(|w| &w.tensor)))
    }

    fn regularizers(&self) -> Vec<(usize, Regularizer)> {
        let mut r: Vec<_> = self.depthwise_regularizer.iter().map(|r| (0, *r)).collect();
        if self.c.use_bias {
            r.extend(self.c.bias_regularizer.iter().map(|r| (1, *r)));
        }
        r
    }
}

/// A depthwise convolution (strides and padding) then a 1x1 pointwise one.
pub(super) struct SeparableConv2D {
    filters: i64,
    multiplier: i64,
    c: Common,
    depthwise_regularizer: Option<Regularizer>,
    pointwise_regularizer: Option<Regularizer>,
}

impl SeparableConv2D {
    pub(super) fn new(o: &Options) -> Result<SeparableConv2D, KerasError> {
        Ok(SeparableConv2D {
            filters: o.i64_req("filters")?,
            multiplier: o.ints("depth_multiplier", 1, Some(1))?[0],
            c: common(o, 2)?,
            depthwise_regularizer: regularizer(o, "depthwise_regularizer")?,
            pointwise_regularizer: regularizer(o, "pointwise_regularizer")?,
        })
    }
}

impl Layer for SeparableConv2D {
    fn weights(&self, inputs: &[Vec<i64>]) -> Result<Vec<WeightSpec>, String> {
        let x = input_dims(inputs, Some(4))?;
        let mut k = self.c.kernel.clone();
        k.extend([x[3], self.multiplier]);
        let mut w = vec![
            WeightSpec::trainable("depthwise_kernel", k),
            WeightSpec::trainable(
                "pointwise_kernel",
                vec![1, 1, x[3] * self.multiplier, self.filters],
            ),
        ];
        if self.c.use_bias {
            w.push(WeightSpec::trainable("bias", vec![self.filters]));
        }
        Ok(w)
    }

    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let d = ops::depthwise_conv2d(
            cx.g,
            x,
            &cx.weights[0].tensor,
            as_2d(&self.c.strides),
            self.c.padding,
        )?;
        let y = d.conv2d(&cx.weights[1].tensor, [1, 1], Padding::Valid);
        Ok(finish(&self.c, y, cx.weights.get(2).map(|w| &w.tensor)))
    }

    fn regularizers(&self) -> Vec<(usize, Regularizer)> {
        let mut r: Vec<_> = self.depthwise_regularizer.iter().map(|r| (0, *r)).collect();
        r.extend(self.pointwise_regularizer.iter().map(|r| (1, *r)));
        if self.c.use_bias {
            r.extend(self.c.bias_regularizer.iter().map(|r| (2, *r)));
        }
        r
    }
}
