//! `tf.compat.v1.train.RMSPropOptimizer`: `ms += (grad^2 - ms) * (1 - decay)`,
//! `mom = momentum * mom + lr * grad / sqrt(ms + epsilon)`, `var -= mom`; centered also keeps
//! `mg += (grad - mg) * (1 - decay)` and divides by `sqrt(ms - mg^2 + epsilon)`.
//!
//! Slots in TF's order and names: `rms` (`VAR/RMSProp`, initialized to ONES as in TF1), then
//! `mg` when centered, then `momentum` (`VAR/RMSProp_1`, or `VAR/RMSProp_2` when centered).

use super::{create_slot, float_types, value, Gradient, LearningRate, Optimizer, OptimizerError};
use crate::model::graph::Graph;
use crate::model::variables::Initializer;

/// RMSProp with TF1's defaults: decay 0.9, momentum 0, epsilon 1e-10, not centered.
#[derive(Clone, Debug)]
pub struct RmsProp {
    learning_rate: LearningRate,
    decay: f32,
    momentum: f32,
    epsilon: f32,
    centered: bool,
}

impl RmsProp {
    pub fn new(learning_rate: impl Into<LearningRate>) -> RmsProp {
        RmsProp {
            learning_rate: learning_rate.into(),
            decay: 0.9,
            momentum: 0.0,
            epsilon: 1e-10,
            centered: false,
        }
    }

    pub fn decay(mut self, decay: f32) -> RmsProp {
        self.decay = decay;
        self
    }

    pub fn momentum(mut self, momentum: f32) -> RmsProp {
        self.momentum = momentum;
        self
    }

    pub fn epsilon(mut self, epsilon: f32) -> RmsProp {
        self.epsilon = epsilon;
        self
    }

    pub fn centered(mut self, centered: bool) -> RmsProp {
        self.centered = centered;
        self
    }
}

impl Optimizer for RmsProp {
    fn name(&self) -> &str {
        "RMSProp"
    }

    fn apply_updates(
        &self,
        g: &mut Graph,
        grads_and_vars: &[Gradient],
    ) -> Result<(), OptimizerError> {
        let types = float_types(g, grads_and_vars)?;
        let mut slots = Vec::new();
        for gv in grads_and_vars {
            let rms = create_slot(g, gv.var, self.name(), Initializer::Ones);
            let mg = self
                .centered
                .then(|| create_slot(g, gv.var, self.name(), Initializer::Zeros));
            let mom = create_slot(g, gv.var, self.name(), Initializer::Zeros);
            slots.push((rms, mg, mom));
        }
        for ((gv, &ty), &(rms, mg, mom)) in grads_and_vars.iter().zip(&types).zip(&slots) {
            let lr = self.learning_rate.tensor(g, ty)?;
            let one_minus_rho = g.tracer.scalar(1.0 - self.decay as f64, ty);
            let momentum = g.tracer.scalar(self.momentum as f64, ty);
            let epsilon = g.tracer.scalar(self.epsilon as f64, ty);
            let grad = &gv.grad;
            // TF's ApplyRMSProp / ApplyCenteredRMSProp kernels, in their order of operations.
            let ms_old = value(g, rms);
            let ms = &ms_old + (grad * grad - &ms_old) * &one_minus_rho;
            let denom = match mg {
                Some(mg) => {
                    let mg_old = value(g, mg);
                    let mg_new = &mg_old + (grad - &mg_old) * &one_minus_rho;
                    let denom = (&ms - &mg_new * &mg_new) + &epsilon;
                    g.assign(mg, mg_new);
                    denom
                }
                None => &ms + &epsilon,
            };
            let mom_new = value(g, mom) * &momentum + (grad * &lr) / denom.sqrt();
            let new = value(g, gv.var) - &mom_new;
            g.assign(rms, ms);
            g.assign(mom, mom_new);
            g.assign(gv.var, new);
        }
        Ok(())
    }
}
