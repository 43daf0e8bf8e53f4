//! Learning-rate schedules as traced functions of the global step, with TF's formulas
//! (`tf.compat.v1.train.exponential_decay`, `piecewise_constant`, `polynomial_decay`,
//! `cosine_decay`).
//!
//! The global step is an s32 scalar on the device: TPUs have no 64-bit values, so the host
//! keeps the i64 step and the estimator refuses to start a loop that would take the step past
//! `i32::MAX` (2^31 - 1, about 2.1 billion steps). Each schedule casts the step to f32 on the
//! device and computes in f32 as TF does with an f32 learning rate; past 2^24 steps the cast
//! rounds, as TF's own `cast(global_step, float32)` does.
//!
//! Each function takes the step tensor (`&g.global_step`) and returns the rate as an f32
//! scalar tensor, which any optimizer takes as its learning rate.

use std::f64::consts::PI;
use tessel_compiler::ir::{ElementType, UnaryOp};
use tessel_compiler::trace::Tensor;

/// Schedule arguments that TF would turn into NaN, infinities or a runtime failure.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScheduleError {
    #[error("decay_steps must be positive, got {0}")]
    DecaySteps(i64),
    /// TF's message.
    #[error("The length of boundaries should be 1 less than the length of values")]
    Lengths,
    #[error("boundaries must be strictly increasing, got {0:?}")]
    NotIncreasing(Vec<i64>),
    #[error("boundary {0} does not fit the device's s32 global step")]
    BoundaryRange(i64),
}

fn check_decay_steps(decay_steps: i64) -> Result<(), ScheduleError> {
    if decay_steps <= 0 {
        return Err(ScheduleError::DecaySteps(decay_steps));
    }
    Ok(())
}

/// `lr * decay_rate ^ (step / decay_steps)`, the exponent floored when `staircase`.
#[track_caller]
pub fn exponential_decay(
    learning_rate: f32,
    global_step: &Tensor,
    decay_steps: i64,
    decay_rate: f32,
    staircase: bool,
) -> Result<Tensor, ScheduleError> {
    check_decay_steps(decay_steps)?;
    let step = global_step.cast(ElementType::F32);
    let mut p = &step / &step.scalar_like(decay_steps as f64);
    if staircase {
        p = p.unary(UnaryOp::Floor);
    }
    let rate = step.scalar_like(decay_rate as f64).pow(&p);
    Ok(rate * learning_rate)
}

/// `values[0]` while `step <= boundaries[0]`, `values[i]` while `boundaries[i-1] < step <=
/// boundaries[i]`, and the last value past the last boundary. Boundaries are steps and must
/// increase.
#[track_caller]
pub fn piecewise_constant(
    global_step: &Tensor,
    boundaries: &[i64],
    values: &[f32],
) -> Result<Tensor, ScheduleError> {
    if values.len() != boundaries.len() + 1 {
        return Err(ScheduleError::Lengths);
    }
    if let Some(&b) = boundaries.iter().find(|&&b| i32::try_from(b).is_err()) {
        return Err(ScheduleError::BoundaryRange(b));
    }
    if boundaries.windows(2).any(|w| w[0] >= w[1]) {
        return Err(ScheduleError::NotIncreasing(boundaries.to_vec()));
    }
    let step = global_step.cast(ElementType::S32);
    let f32_const = |v: f32| step.cast(ElementType::F32).scalar_like(v as f64);
    let mut rate = f32_const(values[0]);
    for (&b, &v) in boundaries.iter().zip(&values[1..]) {
        let past = step.greater(&step.scalar_like(b as f64));
        rate = past.where_(&f32_const(v), &rate);
    }
    Ok(rate)
}

/// `(lr - end_lr) * (1 - step / decay_steps) ^ power + end_lr`, the step held at
/// `decay_steps`; with `cycle`, `decay_steps` grows to the first multiple above the step.
#[track_caller]
pub fn polynomial_decay(
    learning_rate: f32,
    global_step: &Tensor,
    decay_steps: i64,
    end_learning_rate: f32,
    power: f32,
    cycle: bool,
) -> Result<Tensor, ScheduleError> {
    check_decay_steps(decay_steps)?;
    let mut step = global_step.cast(ElementType::F32);
    let mut steps = step.scalar_like(decay_steps as f64);
    if cycle {
        // TF: where(step == 0, 1.0, ceil(step / decay_steps)).
        let zero = step.equal(&step.scalar_like(0.0));
        let ceil = (&step / &steps).unary(UnaryOp::Ceil);
        let multiplier = zero.where_(&step.scalar_like(1.0), &ceil);
        steps = steps * multiplier;
    } else {
        step = step.minimum(&steps);
    }
    let p = &step / &steps;
    let decay = (1.0 - p).pow(&step.scalar_like(power as f64));
    let span = step.scalar_like(learning_rate as f64) - step.scalar_like(end_learning_rate as f64);
    Ok(span * decay + end_learning_rate)
}

/// `lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha)`.
#[track_caller]
pub fn cosine_decay(
    learning_rate: f32,
    global_step: &Tensor,
    decay_steps: i64,
    alpha: f32,
) -> Result<Tensor, ScheduleError> {
    check_decay_steps(decay_steps)?;
    let step = global_step.cast(ElementType::F32);
    let steps = step.scalar_like(decay_steps as f64);
    let fraction = step.minimum(&steps) / &steps;
    let cos = (step.scalar_like(PI) * fraction).unary(UnaryOp::Cosine);
    let cosine_decayed = (cos + 1.0) * 0.5;
    // TF computes `1 - alpha` in Python (double) before it meets the f32 tensor.
    let one_minus_alpha = step.scalar_like(1.0 - alpha as f64);
    let decayed = one_minus_alpha * cosine_decayed + alpha;
    Ok(decayed * learning_rate)
}
