//! Keras's activations by name, as traced functions: relu, gelu (exact and tanh-approximate),
//! swish/silu, tanh, sigmoid, softmax, elu, selu, softplus, linear.

use serde_json::Value;
use std::f64::consts::PI;
use tessel_compiler::ir::UnaryOp;
use tessel_compiler::trace::Tensor;

/// One of Keras's activations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Activation {
    Linear,
    Relu,
    /// `approximate`: the tanh form.
    Gelu {
        approximate: bool,
    },
    Swish,
    Tanh,
    Sigmoid,
    Softmax,
    Elu,
    Selu,
    Softplus,
}

/// The names tessel runs, for messages and docs.
pub(crate) const SUPPORTED: &str =
    "relu, gelu, swish/silu, tanh, sigmoid, softmax, elu, selu, softplus, linear";

impl Activation {
    /// An activation as Keras saves it: a name, or (Keras 3) a serialized function object.
    pub(crate) fn parse(v: Option<&Value>) -> Result<Activation, String> {
        let name = match v {
            None | Some(Value::Null) => return Ok(Activation::Linear),
            Some(Value::String(s)) => s.as_str(),
            Some(Value::Object(o)) => o
                .get("config")
                .and_then(|c| c.as_str().or_else(|| c.get("name").and_then(Value::as_str)))
                .or_else(|| o.get("class_name").and_then(Value::as_str))
                .ok_or_else(|| {
                    format!(
                        "an activation object without a name: {}",
                        Value::Object(o.clone())
                    )
                })?,
            Some(other) => return Err(format!("an activation should be a name, got {other}")),
        };
        Activation::by_name(name)
    }

    pub(crate) fn by_name(name: &str) -> Result<Activation, String> {
        Ok(match name {
            "linear" | "None" => Activation::Linear,
            "relu" => Activation::Relu,
            "gelu" => Activation::Gelu { approximate: false },
            "swish" | "silu" => Activation::Swish,
            "tanh" => Activation::Tanh,
            "sigmoid" => Activation::Sigmoid,
            "softmax" => Activation::Softmax,
            "elu" => Activation::Elu,
            "selu" => Activation::Selu,
            "softplus" => Activation::Softplus,
            other => {
                return Err(format!(
                    "activation `{other}` is not supported (supported: {SUPPORTED})"
                ))
            }
        })
    }

    #[track_caller]
    pub(crate) fn apply(self, x: &Tensor) -> Tensor {
        match self {
            Activation::Linear => x.clone(),
            Activation::Relu => x.relu(),
            Activation::Gelu { approximate: false } => {
                // 0.5 x (1 + erf(x / sqrt(2)))
                let e = (x * (1.0 / 2f64.sqrt()) as f32).unary(UnaryOp::Erf);
                x * 0.5 * (e + 1.0)
            }
            Activation::Gelu { approximate: true } => {
                // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
                let inner = (x + &(x * x * x * 0.044715)) * (2.0 / PI).sqrt() as f32;
                x * 0.5 * (inner.tanh() + 1.0)
            }
            Activation::Swish => x * &x.sigmoid(),
            Activation::Tanh => x.tanh(),
            Activation::Sigmoid => x.sigmoid(),
            Activation::Softmax => x.softmax(-1),
            Activation::Elu => elu(x, 1.0),
            Activation::Selu => {
                const ALPHA: f64 = 1.673_263_242_354_377_3;
                const SCALE: f64 = 1.050_700_987_355_480_5;
                elu(x, ALPHA) * SCALE as f32
            }
            Activation::Softplus => {
                // max(x, 0) + log1p(exp(-|x|)): log(1 + exp(x)) without overflow.
                let tail = (-x.abs()).exp().unary(UnaryOp::Log1p);
                x.relu() + tail
            }
        }
    }
}

/// `x` where positive, `alpha * (exp(x) - 1)` elsewhere.
#[track_caller]
pub(crate) fn elu(x: &Tensor, alpha: f64) -> Tensor {
    let negative = x.minimum(&x.scalar_like(0.0)).unary(UnaryOp::Expm1) * alpha as f32;
    x.greater(&x.scalar_like(0.0)).where_(x, &negative)
}
