//! Keras learning-rate schedules (`keras.optimizers.schedules`) as traced functions of the
//! step count Keras calls `iterations` (here the global step, which starts at 0 in a fresh
//! model_dir as Keras's does in a fresh fit).

use super::error::KerasError;
use crate::model::schedules;
use serde_json::Value;
use std::f64::consts::PI;
use tessel_compiler::ir::{ElementType, UnaryOp};
use tessel_compiler::trace::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Schedule {
    Constant(f64),
    Exponential {
        initial: f64,
        decay_steps: f64,
        rate: f64,
        staircase: bool,
    },
    Piecewise {
        boundaries: Vec<i64>,
        values: Vec<f64>,
    },
    Cosine {
        initial: f64,
        decay_steps: f64,
        alpha: f64,
    },
    InverseTime {
        initial: f64,
        decay_steps: f64,
        rate: f64,
        staircase: bool,
    },
    Polynomial {
        initial: f64,
        decay_steps: f64,
        end: f64,
        power: f64,
    },
}

fn unsupported(name: &str, why: &str) -> KerasError {
    KerasError::UnsupportedCompile {
        what: "learning-rate schedule",
        name: name.to_string(),
        why: why.to_string(),
    }
}

impl Schedule {
    /// `learning_rate` as an optimizer config saves it: a number or a serialized schedule.
    pub(crate) fn parse(v: Option<&Value>) -> Result<Schedule, KerasError> {
        let v = match v {
            None | Some(Value::Null) => return Ok(Schedule::Constant(0.01)),
            Some(v) => v,
        };
        if let Some(x) = v.as_f64() {
            return Ok(Schedule::Constant(x));
        }
        let class = v.get("class_name").and_then(Value::as_str).unwrap_or("");
        let c = v
            .get("config")
            .and_then(Value::as_object)
            .ok_or_else(|| unsupported(class, "no config"))?;
        let num = |k: &str| c.get(k).and_then(Value::as_f64);
        let req = |k: &str| num(k).ok_or_else(|| unsupported(class, &format!("`{k}` is missing")));
        let flag = |k: &str| c.get(k).and_then(Value::as_bool).unwrap_or(false);
        let schedule = match class {
            "ExponentialDecay" => Schedule::Exponential {
                initial: req("initial_learning_rate")?,
                decay_steps: req("decay_steps")?,
                rate: req("decay_rate")?,
                staircase: flag("staircase"),
            },
            "PiecewiseConstantDecay" => {
                let list = |k: &str| c.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
                let boundaries = list("boundaries")
                    .iter()
                    .map(|b| b.as_f64().map(|x| x as i64))
                    .collect::<Option<Vec<i64>>>()
                    .ok_or_else(|| unsupported(class, "boundaries must be numbers"))?;
                let values = list("values")
                    .iter()
                    .map(Value::as_f64)
                    .collect::<Option<Vec<f64>>>()
                    .ok_or_else(|| unsupported(class, "values must be numbers"))?;
                Schedule::Piecewise { boundaries, values }
            }
            "CosineDecay" => {
                if num("warmup_steps").is_some_and(|w| w != 0.0) {
                    return Err(unsupported(class, "warmup is not supported"));
                }
                Schedule::Cosine {
                    initial: req("initial_learning_rate")?,
                    decay_steps: req("decay_steps")?,
                    alpha: num("alpha").unwrap_or(0.0),
                }
            }
            "InverseTimeDecay" => Schedule::InverseTime {
                initial: req("initial_learning_rate")?,
                decay_steps: req("decay_steps")?,
                rate: req("decay_rate")?,
                staircase: flag("staircase"),
            },
            "PolynomialDecay" => {
                if flag("cycle") {
                    return Err(unsupported(class, "cycle=True is not supported"));
                }
                Schedule::Polynomial {
                    initial: req("initial_learning_rate")?,
                    decay_steps: req("decay_steps")?,
                    end: num("end_learning_rate").unwrap_or(1e-4),
                    power: num("power").unwrap_or(1.0),
                }
            }
            other => {
                return Err(unsupported(other, "supported: ExponentialDecay, PiecewiseConstantDecay, CosineDecay (no warmup), InverseTimeDecay, PolynomialDecay (no cycle)"))
            }
        };
        if let Schedule::Exponential { decay_steps, .. }
        | Schedule::Cosine { decay_steps, .. }
        | Schedule::InverseTime { decay_steps, .. }
        | Schedule::Polynomial { decay_steps, .. } = &schedule
        {
            if *decay_steps <= 0.0 {
                return Err(unsupported(class, "decay_steps must be positive"));
            }
        }
        if let Schedule::Piecewise { boundaries, values } = &schedule {
            if values.len() != boundaries.len() + 1 {
                return Err(unsupported(
                    class,
                    "values must be one longer than boundaries",
                ));
            }
        }
        Ok(schedule)
    }

    /// The rate at `step` (an s32 scalar), as an f32 scalar.
    #[track_caller]
    pub(crate) fn rate(&self, step: &Tensor) -> Result<Tensor, KerasError> {
        let s = step.cast(ElementType::F32);
        Ok(match self {
            Schedule::Constant(lr) => s.scalar_like(*lr).reshape(&[]),
            Schedule::Exponential {
                initial,
                decay_steps,
                rate,
                staircase,
            } => {
                let mut p = &s / *decay_steps as f32;
                if *staircase {
                    p = p.unary(UnaryOp::Floor);
                }
                s.scalar_like(*rate).pow(&p) * *initial as f32
            }
            Schedule::Piecewise { boundaries, values } => {
                let vals: Vec<f32> = values.iter().map(|&v| v as f32).collect();
                schedules::piecewise_constant(step, boundaries, &vals)
                    .map_err(|e| unsupported("PiecewiseConstantDecay", &e.to_string()))?
            }
            Schedule::Cosine {
                initial,
                decay_steps,
                alpha,
            } => {
                let p = s.minimum(&s.scalar_like(*decay_steps)) / *decay_steps as f32;
                let cosine = ((p * PI as f32).unary(UnaryOp::Cosine) + 1.0) * 0.5;
                (cosine * (1.0 - *alpha as f32) + *alpha as f32) * *initial as f32
            }
            Schedule::InverseTime {
                initial,
                decay_steps,
                rate,
                staircase,
            } => {
                let mut p = &s / *decay_steps as f32;
                if *staircase {
                    p = p.unary(UnaryOp::Floor);
                }
                *initial as f32 / (p * *rate as f32 + 1.0)
            }
            Schedule::Polynomial {
                initial,
                decay_steps,
                end,
                power,
            } => {
                let p = s.minimum(&s.scalar_like(*decay_steps)) / *decay_steps as f32;
                let f = (1.0 - p).pow(&s.scalar_like(*power));
                f * (*initial - *end) as f32 + *end as f32
            }
        })
    }
}
