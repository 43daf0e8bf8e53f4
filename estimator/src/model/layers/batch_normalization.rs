//! `tf.layers.batch_normalization`: normalizes over every axis but `axis`, with learned
//! `gamma` / `beta` and the non-trainable `moving_mean` / `moving_variance`.
//!
//! In training the batch statistics normalize, and the moving averages are updated in the
//! same step with [`Graph::assign`] (TF puts these updates in `UPDATE_OPS`, which the user
//! must run with the train op; here they simply happen): `moving -= (moving - batch) * (1 -
//! momentum)`. As TF's fused kernel (used for rank-4 inputs normalized over channels) does,
//! the variance fed to the moving average is the unbiased one (`n / (n - 1)`); other ranks
//! use the biased variance, as TF's non-fused path. Otherwise the moving statistics
//! normalize.

use super::{fixed_dim, layer_name, LayerError};
use crate::model::get_variable::{get_variable, scoped_name, variable_scope, Reuse};
use crate::model::graph::Graph;
use crate::model::variables::{Initializer, VariableId};
use tessel_compiler::trace::{Dim, Tensor};

/// `batch_normalization`'s options, with TF's defaults.
#[derive(Clone, Debug)]
pub struct BatchNorm {
    /// The axis that keeps its own statistics (channels; -1 is the last).
    pub axis: i64,
    pub momentum: f64,
    pub epsilon: f64,
    /// Add the learned `beta`.
    pub center: bool,
    /// Multiply by the learned `gamma`.
    pub scale: bool,
    /// The layer's name (default: `batch_normalization`, `batch_normalization_1`, ...).
    pub name: Option<String>,
}

impl Default for BatchNorm {
    fn default() -> BatchNorm {
        BatchNorm {
            axis: -1,
            momentum: 0.99,
            epsilon: 1e-3,
            center: true,
            scale: true,
            name: None,
        }
    }
}

struct Variables {
    gamma: Option<Tensor>,
    beta: Option<Tensor>,
    moving_mean: (Tensor, VariableId),
    moving_variance: (Tensor, VariableId),
}

/// Batch normalization of `inputs` over every axis but `options.axis`; `training` selects
/// batch statistics (and records the moving-average updates) or the moving statistics.
#[track_caller]
pub fn batch_normalization(
    g: &mut Graph,
    inputs: &Tensor,
    options: BatchNorm,
    training: bool,
) -> Result<Tensor, LayerError> {
    if !inputs.is_ok() {
        return Ok(inputs.clone());
    }
    let name = layer_name(g, &options.name, "batch_normalization");
    let channels = fixed_dim(
        inputs,
        options.axis,
        "batch_normalization",
        &name,
        "the normalized axis",
    )?;
    let dims = inputs.dims();
    let rank = dims.len() as i64;
    let axis = if options.axis < 0 {
        options.axis + rank
    } else {
        options.axis
    };
    let ty = inputs.element_type().expect("a traced tensor has a type");
    let c = [channels];
    let vars = variable_scope(g, &name, Reuse::Inherit, |g| {
        let gamma = match options.scale {
            true => Some(get_variable(g, "gamma", &c, ty, Initializer::Ones, true)?),
            false => None,
        };
        let beta = match options.center {
            true => Some(get_variable(g, "beta", &c, ty, Initializer::Zeros, true)?),
            false => None,
        };
        let stat = |g: &mut Graph, n: &str, init| -> Result<(Tensor, VariableId), LayerError> {
            let t = get_variable(g, n, &c, ty, init, false)?;
            let full = scoped_name(g, n);
            Ok((t, g.variables.find(&full).expect("just made")))
        };
        let moving_mean = stat(g, "moving_mean", Initializer::Zeros)?;
        let moving_variance = stat(g, "moving_variance", Initializer::Ones)?;
        Ok::<_, LayerError>(Variables {
            gamma,
            beta,
            moving_mean,
            moving_variance,
        })
    })?;
    g.tracer.push_scope(&name);
    // Statistics have shape [C]; `shape` broadcasts them against the input ([1, C, 1, 1] for
    // axis 1 of NCHW; [C] itself when the axis is last).
    let shape: Vec<i64> = (0..rank)
        .map(|i| if i == axis { channels } else { 1 })
        .collect();
    let reduced: Vec<i64> = (0..rank).filter(|&i| i != axis).collect();
    let (mean, variance) = if training {
        let mean = inputs.reduce_mean(&reduced, true);
        let centered = inputs - &mean;
        let variance = (&centered * &centered).reduce_mean(&reduced, true);
        let mean_c = mean.reshape(&c);
        let variance_c = variance.reshape(&c);
        let fused = rank == 4 && (axis == 1 || axis == 3);
        let for_average = if fused {
            // TF's fused kernel divides by max(n - 1, 1): a batch of one element stays finite.
            let count = element_count(inputs, &dims, &reduced);
            let minus_one = (&count - 1.0).maximum(&count.scalar_like(1.0));
            &variance_c * &count / minus_one
        } else {
            variance_c
        };
        let decay = 1.0 - options.momentum as f32;
        let (mm, mm_id) = &vars.moving_mean;
        let (mv, mv_id) = &vars.moving_variance;
        let new_mean = mm - &((mm - &mean_c) * decay);
        let new_variance = mv - &((mv - &for_average) * decay);
        g.assign(*mm_id, new_mean);
        g.assign(*mv_id, new_variance);
        (mean, variance)
    } else {
        (
            vars.moving_mean.0.reshape(&shape),
            vars.moving_variance.0.reshape(&shape),
        )
    };
    let inv = (variance + options.epsilon as f32).rsqrt();
    let inv = match &vars.gamma {
        Some(gamma) => inv * gamma.reshape(&shape),
        None => inv,
    };
    let y = (inputs - &mean) * &inv;
    let y = match &vars.beta {
        Some(beta) => y + beta.reshape(&shape),
        None => y,
    };
    g.tracer.pop_scope();
    Ok(y)
}

/// The number of elements each statistic averages, as a scalar of the input's type
/// (computed on the device when a reduced dimension is unknown).
#[track_caller]
fn element_count(inputs: &Tensor, dims: &[Dim], reduced: &[i64]) -> Tensor {
    let fixed: Option<i64> = reduced.iter().map(|&i| dims[i as usize].fixed()).product();
    match fixed {
        Some(n) => inputs.scalar_like(n as f64),
        None => inputs
            .scalar_like(1.0)
            .broadcast_like(inputs)
            .reduce_sum(reduced, false)
            .slice(&[0], &[1])
            .reshape(&[]),
    }
}
