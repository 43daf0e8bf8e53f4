//! Keras's optimizers (Keras 3 and tf.keras 2.11+, not TF1's): SGD (momentum, nesterov),
//! Adam (epsilon 1e-7, amsgrad), AdamW, RMSprop (accumulators from zero, centered, momentum),
//! Adagrad, with `clipvalue`, `clipnorm`, `global_clipnorm` and `weight_decay`, and the
//! learning rate of [`Schedule`] at Keras's `iterations` (the global step).
//!
//! Slots are non-trainable variables named `VAR/momentum`, `VAR/m`, `VAR/v`, `VAR/vhat`,
//! `VAR/velocity`, `VAR/average_gradient`, `VAR/accumulator`.

use super::compile::class_and_config;
use super::error::KerasError;
use super::schedules::Schedule;
use crate::model::optimizers::{create_slot, value};
use crate::model::{Gradient, Graph, Initializer, Optimizer, OptimizerError};
use serde_json::{Map, Value};
use tessel_compiler::trace::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Rule {
    Sgd {
        momentum: f64,
        nesterov: bool,
    },
    Adam {
        beta_1: f64,
        beta_2: f64,
        epsilon: f64,
        amsgrad: bool,
    },
    RmsProp {
        rho: f64,
        momentum: f64,
        epsilon: f64,
        centered: bool,
    },
    Adagrad {
        initial: f64,
        epsilon: f64,
    },
}

/// A Keras optimizer from its saved config.
#[derive(Clone, Debug, PartialEq)]
pub struct KerasOptimizer {
    pub(crate) class: String,
    pub(crate) rule: Rule,
    pub(crate) learning_rate: Schedule,
    pub(crate) weight_decay: Option<f64>,
    pub(crate) clipnorm: Option<f64>,
    pub(crate) global_clipnorm: Option<f64>,
    pub(crate) clipvalue: Option<f64>,
}

fn unsupported(name: &str, why: &str) -> KerasError {
    KerasError::UnsupportedCompile {
        what: "optimizer",
        name: name.to_string(),
        why: why.to_string(),
    }
}

impl KerasOptimizer {
    /// `{"class_name": "SGD" | "Adam" | ..., "config": {...}}`, or a name (Keras's defaults).
    pub(crate) fn parse(v: &Value) -> Result<KerasOptimizer, KerasError> {
        let empty = Map::new();
        let (class, c) = class_and_config(v).ok_or_else(|| {
            unsupported(
                &v.to_string(),
                "an optimizer is a name or a serialized optimizer",
            )
        })?;
        let c = c.unwrap_or(&empty);
        let num = |k: &str| c.get(k).and_then(Value::as_f64);
        let flag = |k: &str| c.get(k).and_then(Value::as_bool).unwrap_or(false);
        if c.get("is_legacy_optimizer").and_then(Value::as_bool) == Some(true) {
            return Err(unsupported(
                class,
                "a legacy (TF1-style) optimizer: give a Keras optimizer in the options",
            ));
        }
        if flag("use_ema") {
            return Err(unsupported(
                class,
                "use_ema (exponential moving average of weights) is not supported",
            ));
        }
        if num("gradient_accumulation_steps").is_some_and(|s| s > 1.0) {
            return Err(unsupported(
                class,
                "gradient_accumulation_steps is not supported",
            ));
        }
        if num("loss_scale_factor").is_some_and(|s| s != 1.0) {
            return Err(unsupported(class, "loss_scale_factor is not supported"));
        }
        // tf.keras 2.11+ saves its optimizers in a legacy `.h5` as `Custom>SGD`.
        let class = class.strip_prefix("Custom>").unwrap_or(class);
        let lower = class.to_ascii_lowercase();
        let rule = match lower.as_str() {
            "sgd" => Rule::Sgd {
                momentum: num("momentum").unwrap_or(0.0),
                nesterov: flag("nesterov"),
            },
            "adam" | "adamw" => Rule::Adam {
                beta_1: num("beta_1").unwrap_or(0.9),
                beta_2: num("beta_2").unwrap_or(0.999),
                epsilon: num("epsilon").unwrap_or(1e-7),
                amsgrad: flag("amsgrad"),
            },
            "rmsprop" => Rule::RmsProp {
                rho: num("rho").unwrap_or(0.9),
                momentum: num("momentum").unwrap_or(0.0),
                epsilon: num("epsilon").unwrap_or(1e-7),
                centered: flag("centered"),
            },
            "adagrad" => Rule::Adagrad {
                initial: num("initial_accumulator_value").unwrap_or(0.1),
                epsilon: num("epsilon").unwrap_or(1e-7),
            },
            _ => {
                return Err(unsupported(
                    class,
                    "supported: SGD, Adam, AdamW, RMSprop, Adagrad",
                ))
            }
        };
        let default_lr = match lower.as_str() {
            "adam" | "adamw" | "rmsprop" => 0.001,
            _ => 0.01,
        };
        let learning_rate = match c.get("learning_rate").or_else(|| c.get("lr")) {
            None | Some(Value::Null) => Schedule::Constant(default_lr),
            v => Schedule::parse(v)?,
        };
        let mut weight_decay = num("weight_decay").filter(|&w| w != 0.0);
        if lower == "adamw" && weight_decay.is_none() {
            weight_decay = Some(c.get("weight_decay").map_or(0.004, |_| 0.0)).filter(|&w| w != 0.0);
        }
        Ok(KerasOptimizer {
            class: class.to_string(),
            rule,
            learning_rate,
            weight_decay,
            clipnorm: num("clipnorm"),
            global_clipnorm: num("global_clipnorm"),
            clipvalue: num("clipvalue"),
        })
    }

    /// Keras's `_clip_gradients`: clipvalue, then clipnorm per gradient, then the global norm.
    fn clip(&self, grads: &[Gradient]) -> Vec<Tensor> {
        let mut out: Vec<Tensor> = grads.iter().map(|gv| gv.grad.clone()).collect();
        if let Some(v) = self.clipvalue {
            out = out
                .iter()
                .map(|gr| gr.maximum(&gr.scalar_like(-v)).minimum(&gr.scalar_like(v)))
                .collect();
        }
        if let Some(c) = self.clipnorm {
            out = out.iter().map(|gr| scale_to_norm(gr, &l2(gr), c)).collect();
        }
        if let Some(c) = self.global_clipnorm {
            let squares: Vec<Tensor> = out.iter().map(sum_squares).collect();
            if let Some((first, rest)) = squares.split_first() {
                let total = rest.iter().fold(first.clone(), |a, b| a + b).sqrt();
                out = out.iter().map(|gr| scale_to_norm(gr, &total, c)).collect();
            }
        }
        out
    }
}

fn sum_squares(t: &Tensor) -> Tensor {
    let all: Vec<i64> = (0..t.rank() as i64).collect();
    (t * t).reduce_sum(&all, false)
}

fn l2(t: &Tensor) -> Tensor {
    sum_squares(t).sqrt()
}

/// `t * c / max(norm, c)`: unchanged below the norm `c`, scaled to it above.
fn scale_to_norm(t: &Tensor, norm: &Tensor, c: f64) -> Tensor {
    let limit = norm.scalar_like(c);
    t * (&limit / norm.maximum(&limit))
}

impl Optimizer for KerasOptimizer {
    fn name(&self) -> &str {
        &self.class
    }

    fn apply_updates(&self, g: &mut Graph, grads: &[Gradient]) -> Result<(), OptimizerError> {
        // Every slot first, as Keras builds them before the first update.
        let slots: Vec<Vec<_>> = grads
            .iter()
            .map(|gv| {
                let mut s = Vec::new();
                match &self.rule {
                    Rule::Sgd { momentum, .. } if *momentum != 0.0 => {
                        s.push(create_slot(g, gv.var, "momentum", Initializer::Zeros))
                    }
                    Rule::Sgd { .. } => {}
                    Rule::Adam { amsgrad, .. } => {
                        s.push(create_slot(g, gv.var, "m", Initializer::Zeros));
                        s.push(create_slot(g, gv.var, "v", Initializer::Zeros));
                        if *amsgrad {
                            s.push(create_slot(g, gv.var, "vhat", Initializer::Zeros));
                        }
                    }
                    Rule::RmsProp {
                        momentum, centered, ..
                    } => {
                        s.push(create_slot(g, gv.var, "velocity", Initializer::Zeros));
                        if *momentum > 0.0 {
                            s.push(create_slot(g, gv.var, "momentum", Initializer::Zeros));
                        }
                        if *centered {
                            s.push(create_slot(
                                g,
                                gv.var,
                                "average_gradient",
                                Initializer::Zeros,
                            ));
                        }
                    }
                    Rule::Adagrad { initial, .. } => s.push(create_slot(
                        g,
                        gv.var,
                        "accumulator",
                        Initializer::Constant(*initial),
                    )),
                }
                s
            })
            .collect();
        let step = g.global_step.clone();
        let lr = self
            .learning_rate
            .rate(&step)
            .map_err(|e| OptimizerError::LearningRate {
                shape: e.to_string(),
            })?;
        let clipped = self.clip(grads);
        for ((gv, grad), slots) in grads.iter().zip(&clipped).zip(&slots) {
            let mut var = value(g, gv.var);
            if let Some(wd) = self.weight_decay {
                // Keras's `_apply_weight_decay`, before the update.
                var = &var - &(&var * &lr) * wd as f32;
            }
            let new = match &self.rule {
                Rule::Sgd { momentum, nesterov } => {
                    if *momentum == 0.0 {
                        &var - grad * &lr
                    } else {
                        let m = value(g, slots[0]) * *momentum as f32 - grad * &lr;
                        let new = if *nesterov {
                            &var + &m * *momentum as f32 - grad * &lr
                        } else {
                            &var + &m
                        };
                        g.assign(slots[0], m);
                        new
                    }
                }
                Rule::Adam {
                    beta_1,
                    beta_2,
                    epsilon,
                    amsgrad,
                } => {
                    let t = (&step + 1.0).cast(tessel_compiler::ir::ElementType::F32);
                    let b1p = t.scalar_like(*beta_1).pow(&t);
                    let b2p = t.scalar_like(*beta_2).pow(&t);
                    let m0 = value(g, slots[0]);
                    let v0 = value(g, slots[1]);
                    let m = &m0 + (grad - &m0) * (1.0 - *beta_1 as f32);
                    let v = &v0 + (grad * grad - &v0) * (1.0 - *beta_2 as f32);
                    g.assign(slots[0], m.clone());
                    g.assign(slots[1], v.clone());
                    let v = if *amsgrad {
                        let vhat = value(g, slots[2]).maximum(&v);
                        g.assign(slots[2], vhat.clone());
                        vhat
                    } else {
                        v
                    };
                    let alpha = &lr * (1.0 - b2p).sqrt() / (1.0 - b1p);
                    &var - (&m * &alpha) / (v.sqrt() + *epsilon as f32)
                }
                Rule::RmsProp {
                    rho,
                    momentum,
                    epsilon,
                    centered,
                } => {
                    let r = *rho as f32;
                    let vel = value(g, slots[0]) * r + grad * grad * (1.0 - r);
                    g.assign(slots[0], vel.clone());
                    let denominator = if *centered {
                        let i = if *momentum > 0.0 { 2 } else { 1 };
                        let avg = value(g, slots[i]) * r + grad * (1.0 - r);
                        g.assign(slots[i], avg.clone());
                        &vel - &avg * &avg + *epsilon as f32
                    } else {
                        &vel + *epsilon as f32
                    };
                    let increment = &lr * grad / denominator.sqrt();
                    if *momentum > 0.0 {
                        let mom = value(g, slots[1]) * *momentum as f32 + increment;
                        g.assign(slots[1], mom.clone());
                        &var - mom
                    } else {
                        &var - increment
                    }
                }
                Rule::Adagrad { epsilon, .. } => {
                    let acc = value(g, slots[0]) + grad * grad;
                    g.assign(slots[0], acc.clone());
                    &var - &lr * grad / (acc + *epsilon as f32).sqrt()
                }
            };
            g.assign(gv.var, new);
        }
        Ok(())
    }
}
