//! `tf.compat.v1.train.MomentumOptimizer`: `accum = momentum * accum + grad`, then
//! `var -= lr * accum`, or with Nesterov `var -= lr * grad + lr * momentum * accum`.
//! Slot `VAR/Momentum` (zeros).

use super::{create_slot, float_types, value, Gradient, LearningRate, Optimizer, OptimizerError};
use crate::model::graph::Graph;
use crate::model::variables::Initializer;

/// Momentum, optionally Nesterov's.
#[derive(Clone, Debug)]
pub struct Momentum {
    learning_rate: LearningRate,
    momentum: f32,
    use_nesterov: bool,
}

impl Momentum {
    pub fn new(learning_rate: impl Into<LearningRate>, momentum: f32) -> Momentum {
        Momentum {
            learning_rate: learning_rate.into(),
            momentum,
            use_nesterov: false,
        }
    }

    /// TF's `use_nesterov`.
    pub fn nesterov(mut self, use_nesterov: bool) -> Momentum {
        self.use_nesterov = use_nesterov;
        self
    }
}

impl Optimizer for Momentum {
    fn name(&self) -> &str {
        "Momentum"
    }

    fn apply_updates(
        &self,
        g: &mut Graph,
        grads_and_vars: &[Gradient],
    ) -> Result<(), OptimizerError> {
        let types = float_types(g, grads_and_vars)?;
        let slots: Vec<_> = grads_and_vars
            .iter()
            .map(|gv| create_slot(g, gv.var, self.name(), Initializer::Zeros))
            .collect();
        for ((gv, &ty), &accum) in grads_and_vars.iter().zip(&types).zip(&slots) {
            let lr = self.learning_rate.tensor(g, ty)?;
            let momentum = g.tracer.scalar(self.momentum as f64, ty);
            // TF's ApplyMomentum kernel, in its order of operations.
            let acc = value(g, accum) * &momentum + &gv.grad;
            let step = if self.use_nesterov {
                &gv.grad * &lr + &acc * &momentum * &lr
            } else {
                &acc * &lr
            };
            let new = value(g, gv.var) - step;
            g.assign(accum, acc);
            g.assign(gv.var, new);
        }
        Ok(())
    }
}
