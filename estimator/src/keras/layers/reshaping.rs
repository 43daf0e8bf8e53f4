//! Flatten, Reshape and ZeroPadding2D.

use super::{dims_of, single, Ctx, Layer};
use crate::keras::error::KerasError;
use crate::keras::ops;
use crate::keras::options::Options;
use serde_json::Value;
use tessel_compiler::trace::Tensor;

pub(super) struct Flatten;

impl Flatten {
    pub(super) fn new(o: &Options) -> Result<Flatten, KerasError> {
        o.channels_last()?;
        Ok(Flatten)
    }
}

impl Layer for Flatten {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let d = dims_of(x)?;
        let rest: i64 = d[1..].iter().product();
        Ok(x.reshape(&[d[0], rest]))
    }
}

pub(super) struct Reshape {
    target: Vec<i64>,
}

impl Reshape {
    pub(super) fn new(o: &Options) -> Result<Reshape, KerasError> {
        let target = o
            .get("target_shape")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(Value::as_i64).collect::<Option<Vec<i64>>>())
            .ok_or_else(|| {
                KerasError::Config(format!("Reshape `{}` has no integer target_shape", o.layer))
            })?;
        Ok(Reshape { target })
    }
}

impl Layer for Reshape {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let d = dims_of(x)?;
        let total: i64 = d[1..].iter().product();
        let known: i64 = self.target.iter().filter(|&&t| t != -1).product();
        let mut out = vec![d[0]];
        for &t in &self.target {
            // Keras allows one -1: the size that makes the element count.
            out.push(if t == -1 && known > 0 {
                total / known
            } else {
                t
            });
        }
        if out[1..].iter().product::<i64>() != total {
            return Err(format!(
                "cannot reshape {d:?} to target_shape {:?}",
                self.target
            ));
        }
        Ok(x.reshape(&out))
    }
}

/// Zeros around height and width: `((top, bottom), (left, right))`.
pub(super) struct ZeroPadding2D {
    pads: [[i64; 2]; 2],
}

impl ZeroPadding2D {
    pub(super) fn new(o: &Options) -> Result<ZeroPadding2D, KerasError> {
        o.channels_last()?;
        let v = o.get("padding").cloned().unwrap_or(Value::from(1));
        let bad = || o.unsupported("padding", &v, "expected an integer, 2 integers or 2 pairs");
        let pads = match &v {
            Value::Number(n) => {
                let p = n.as_i64().ok_or_else(bad)?;
                [[p, p], [p, p]]
            }
            Value::Array(a) if a.len() == 2 => {
                let mut pads = [[0; 2]; 2];
                for (i, item) in a.iter().enumerate() {
                    pads[i] = match item {
                        Value::Number(n) => {
                            let p = n.as_i64().ok_or_else(bad)?;
                            [p, p]
                        }
                        Value::Array(pq) if pq.len() == 2 => [
                            pq[0].as_i64().ok_or_else(bad)?,
                            pq[1].as_i64().ok_or_else(bad)?,
                        ],
                        _ => return Err(bad()),
                    };
                }
                pads
            }
            _ => return Err(bad()),
        };
        Ok(ZeroPadding2D { pads })
    }
}

impl Layer for ZeroPadding2D {
    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let [[t, b], [l, r]] = self.pads;
        ops::zero_pad(cx.g, x, &[0, t, l, 0], &[0, b, r, 0])
    }
}
