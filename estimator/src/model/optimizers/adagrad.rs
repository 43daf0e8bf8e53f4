//! `tf.compat.v1.train.AdagradOptimizer`: `accum += grad^2`, `var -= lr * grad / sqrt(accum)`.
//! Slot `VAR/Adagrad`, initialized to `initial_accumulator_value` (0.1).

use super::{create_slot, float_types, value, Gradient, LearningRate, Optimizer, OptimizerError};
use crate::model::graph::Graph;
use crate::model::variables::Initializer;

/// Adagrad.
#[derive(Clone, Debug)]
pub struct Adagrad {
    learning_rate: LearningRate,
    initial_accumulator_value: f32,
}

impl Adagrad {
    /// With TF's `initial_accumulator_value = 0.1`.
    pub fn new(learning_rate: impl Into<LearningRate>) -> Adagrad {
        Adagrad {
            learning_rate: learning_rate.into(),
            initial_accumulator_value: 0.1,
        }
    }

    pub fn initial_accumulator_value(mut self, value: f32) -> Adagrad {
        self.initial_accumulator_value = value;
        self
    }
}

impl Optimizer for Adagrad {
    fn name(&self) -> &str {
        "Adagrad"
    }

    fn apply_updates(
        &self,
        g: &mut Graph,
        grads_and_vars: &[Gradient],
    ) -> Result<(), OptimizerError> {
        let types = float_types(g, grads_and_vars)?;
        let init = Initializer::Constant(self.initial_accumulator_value as f64);
        let slots: Vec<_> = grads_and_vars
            .iter()
            .map(|gv| create_slot(g, gv.var, self.name(), init.clone()))
            .collect();
        for ((gv, &ty), &accum) in grads_and_vars.iter().zip(&types).zip(&slots) {
            let lr = self.learning_rate.tensor(g, ty)?;
            // TF's ApplyAdagrad: accum += grad^2; var -= grad * lr * rsqrt(accum).
            let acc = value(g, accum) + &gv.grad * &gv.grad;
            let new = value(g, gv.var) - &gv.grad * &lr * acc.rsqrt();
            g.assign(accum, acc);
            g.assign(gv.var, new);
        }
        Ok(())
    }
}
