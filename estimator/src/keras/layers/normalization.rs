//! BatchNormalization (batch statistics and moving-average updates in training, the moving
//! statistics in inference) and LayerNormalization.

use super::core::regularizer;
use super::{dims_of, input_dims, single, Ctx, Layer, WeightSpec};
use crate::keras::error::KerasError;
use crate::keras::options::Options;
use crate::keras::regularizers::Regularizer;
use serde_json::Value;
use tessel_compiler::trace::Tensor;

/// `axis`: an integer or a list (Keras 2 saves `[3]`).
fn axes(o: &Options, default: i64) -> Result<Vec<i64>, KerasError> {
    match o.get("axis") {
        None => Ok(vec![default]),
        Some(Value::Number(n)) => Ok(vec![n.as_i64().unwrap_or(default)]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_i64())
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| {
                KerasError::Config(format!("layer `{}`: axis {a:?} is not integers", o.layer))
            }),
        Some(v) => Err(KerasError::Config(format!(
            "layer `{}`: axis {v} is not an integer",
            o.layer
        ))),
    }
}

fn resolve(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    axes.iter()
        .map(|&a| {
            let r = if a < 0 { a + rank as i64 } else { a };
            (0..rank as i64)
                .contains(&r)
                .then_some(r as usize)
                .ok_or_else(|| format!("axis {a} is outside an input of rank {rank}"))
        })
        .collect()
}

pub(super) struct BatchNormalization {
    axis: i64,
    momentum: f64,
    epsilon: f64,
    center: bool,
    scale: bool,
    /// tf.keras's `fused` (None: fused when it can be).
    fused: Option<bool>,
    gamma_regularizer: Option<Regularizer>,
    beta_regularizer: Option<Regularizer>,
}

impl BatchNormalization {
    pub(super) fn new(o: &Options) -> Result<BatchNormalization, KerasError> {
        let axis = axes(o, -1)?;
        let [axis] = axis[..] else {
            let v = o.get("axis").cloned().unwrap_or_default();
            return Err(o.unsupported("axis", &v, "only one normalized axis is supported"));
        };
        o.initializers(&[
            "beta_initializer",
            "gamma_initializer",
            "moving_mean_initializer",
            "moving_variance_initializer",
        ]);
        o.no_constraints(&["beta_constraint", "gamma_constraint"])?;
        o.only(
            "renorm",
            &[Value::Bool(false)],
            "batch renormalization is not supported",
        )?;
        o.only(
            "virtual_batch_size",
            &[],
            "virtual batches are not supported",
        )?;
        o.only("adjustment", &[], "adjustment is not supported")?;
        // Keras 3's `synchronized` is what tessel does across shards only with one shard.
        o.only(
            "synchronized",
            &[Value::Bool(false)],
            "synchronized batch statistics are not supported",
        )?;
        for key in ["renorm_clipping", "renorm_momentum"] {
            o.get(key);
        }
        let fused = o.get("fused").and_then(Value::as_bool);
        Ok(BatchNormalization {
            axis,
            momentum: o.f64_or("momentum", 0.99)?,
            epsilon: o.f64_or("epsilon", 1e-3)?,
            center: o.bool_or("center", true)?,
            scale: o.bool_or("scale", true)?,
            fused,
            gamma_regularizer: regularizer(o, "gamma_regularizer")?,
            beta_regularizer: regularizer(o, "beta_regularizer")?,
        })
    }

    fn channels(&self, x: &[i64]) -> Result<(usize, i64), String> {
        let a = resolve(&[self.axis], x.len())?[0];
        Ok((a, x[a]))
    }
}

impl Layer for BatchNormalization {
    fn weights(&self, inputs: &[Vec<i64>]) -> Result<Vec<WeightSpec>, String> {
        let x = input_dims(inputs, None)?;
        let (_, c) = self.channels(x)?;
        let mut w = Vec::new();
        if self.scale {
            w.push(WeightSpec::trainable("gamma", vec![c]));
        }
        if self.center {
            w.push(WeightSpec::trainable("beta", vec![c]));
        }
        w.push(WeightSpec::frozen("moving_mean", vec![c]));
        w.push(WeightSpec::frozen("moving_variance", vec![c]));
        Ok(w)
    }

    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let d = dims_of(x)?;
        let (axis, c) = self.channels(&d)?;
        let mut w = cx.weights.iter();
        let gamma = self.scale.then(|| w.next()).flatten().cloned();
        let beta = self.center.then(|| w.next()).flatten().cloned();
        let (mm, mv) = match (w.next(), w.next()) {
            (Some(a), Some(b)) => (a.clone(), b.clone()),
            _ => return Err("has no moving statistics".into()),
        };
        let shape: Vec<i64> = (0..d.len())
            .map(|i| if i == axis { c } else { 1 })
            .collect();
        let reduced: Vec<i64> = (0..d.len() as i64).filter(|&i| i != axis as i64).collect();
        // A frozen layer (trainable = false) runs in inference mode, as in Keras.
        let training = cx.training && !self.frozen(cx);
        let (mean, variance) = if training {
            let mean = x.reduce_mean(&reduced, true);
            let centered = x - &mean;
            let variance = (&centered * &centered).reduce_mean(&reduced, true);
            let mean_c = mean.reshape(&[c]);
            let variance_c = variance.reshape(&[c]);
            // tf.keras 2.x normalizes rank-4 inputs over channels with TF's fused kernel,
            // which feeds the unbiased variance (n / (n - 1)) to the moving average; Keras 3
            // feeds the batch variance itself.
            let fused = cx.tf_keras
                && d.len() == 4
                && (axis == 1 || axis == 3)
                && self.fused != Some(false);
            let for_average = if fused {
                let n: i64 = reduced.iter().map(|&i| d[i as usize]).product();
                variance_c * (n as f64 / (n - 1).max(1) as f64) as f32
            } else {
                variance_c
            };
            let m = self.momentum as f32;
            cx.g.assign(mm.id, &mm.tensor * m + mean_c * (1.0 - m));
            cx.g.assign(mv.id, &mv.tensor * m + for_average * (1.0 - m));
            (mean, variance)
        } else {
            (mm.tensor.reshape(&shape), mv.tensor.reshape(&shape))
        };
        let mut inv = (variance + self.epsilon as f32).rsqrt();
        if let Some(g) = &gamma {
            inv = inv * g.tensor.reshape(&shape);
        }
        let mut y = (x - &mean) * &inv;
        if let Some(b) = &beta {
            y = y + b.tensor.reshape(&shape);
        }
        Ok(y)
    }

    fn regularizers(&self) -> Vec<(usize, Regularizer)> {
        let mut r = Vec::new();
        let mut i = 0;
        if self.scale {
            r.extend(self.gamma_regularizer.iter().map(|g| (i, *g)));
            i += 1;
        }
        if self.center {
            r.extend(self.beta_regularizer.iter().map(|b| (i, *b)));
        }
        r
    }
}

impl BatchNormalization {
    /// A layer saved with `trainable: false` has non-trainable gamma and beta.
    fn frozen(&self, cx: &Ctx) -> bool {
        let vars = &cx.g.variables;
        let learned = (self.scale as usize) + (self.center as usize);
        learned > 0
            && cx.weights[..learned]
                .iter()
                .all(|w| !vars.get(w.id).trainable)
    }
}

pub(super) struct LayerNormalization {
    axes: Vec<i64>,
    epsilon: f64,
    center: bool,
    scale: bool,
    gamma_regularizer: Option<Regularizer>,
    beta_regularizer: Option<Regularizer>,
}

impl LayerNormalization {
    pub(super) fn new(o: &Options) -> Result<LayerNormalization, KerasError> {
        o.initializers(&["beta_initializer", "gamma_initializer"]);
        o.no_constraints(&["beta_constraint", "gamma_constraint"])?;
        o.only(
            "rms_scaling",
            &[Value::Bool(false)],
            "RMS scaling is not supported",
        )?;
        Ok(LayerNormalization {
            axes: axes(o, -1)?,
            epsilon: o.f64_or("epsilon", 1e-3)?,
            center: o.bool_or("center", true)?,
            scale: o.bool_or("scale", true)?,
            gamma_regularizer: regularizer(o, "gamma_regularizer")?,
            beta_regularizer: regularizer(o, "beta_regularizer")?,
        })
    }
}

impl Layer for LayerNormalization {
    fn weights(&self, inputs: &[Vec<i64>]) -> Result<Vec<WeightSpec>, String> {
        let x = input_dims(inputs, None)?;
        let axes = resolve(&self.axes, x.len())?;
        let dims: Vec<i64> = axes.iter().map(|&a| x[a]).collect();
        let mut w = Vec::new();
        if self.scale {
            w.push(WeightSpec::trainable("gamma", dims.clone()));
        }
        if self.center {
            w.push(WeightSpec::trainable("beta", dims));
        }
        Ok(w)
    }

    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let d = dims_of(x)?;
        let axes = resolve(&self.axes, d.len())?;
        let reduce: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
        let shape: Vec<i64> = (0..d.len())
            .map(|i| if axes.contains(&i) { d[i] } else { 1 })
            .collect();
        let mean = x.reduce_mean(&reduce, true);
        let centered = x - &mean;
        let variance = (&centered * &centered).reduce_mean(&reduce, true);
        let mut y = centered * (variance + self.epsilon as f32).rsqrt();
        let mut w = cx.weights.iter();
        if self.scale {
            y = y * w.next().ok_or("has no gamma")?.tensor.reshape(&shape);
        }
        if self.center {
            y = y + w.next().ok_or("has no beta")?.tensor.reshape(&shape);
        }
        Ok(y)
    }

    fn regularizers(&self) -> Vec<(usize, Regularizer)> {
        let mut r = Vec::new();
        let mut i = 0;
        if self.scale {
            r.extend(self.gamma_regularizer.iter().map(|g| (i, *g)));
            i += 1;
        }
        if self.center {
            r.extend(self.beta_regularizer.iter().map(|b| (i, *b)));
        }
        r
    }
}
