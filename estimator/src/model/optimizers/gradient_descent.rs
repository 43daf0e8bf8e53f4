//! `tf.compat.v1.train.GradientDescentOptimizer`: `var -= lr * grad`. No slots.

use super::{float_type, value, Gradient, LearningRate, Optimizer, OptimizerError};
use crate::model::graph::Graph;

/// Plain gradient descent.
#[derive(Clone, Debug)]
pub struct GradientDescent {
    learning_rate: LearningRate,
}

impl GradientDescent {
    pub fn new(learning_rate: impl Into<LearningRate>) -> GradientDescent {
        GradientDescent {
            learning_rate: learning_rate.into(),
        }
    }
}

impl Optimizer for GradientDescent {
    fn name(&self) -> &str {
        "GradientDescent"
    }

    fn apply_updates(
        &self,
        g: &mut Graph,
        grads_and_vars: &[Gradient],
    ) -> Result<(), OptimizerError> {
        for gv in grads_and_vars {
            let ty = float_type(g, gv.var)?;
            let lr = self.learning_rate.tensor(g, ty)?;
            // TF's ApplyGradientDescent: var -= grad * lr.
            let new = value(g, gv.var) - &gv.grad * &lr;
            g.assign(gv.var, new);
        }
        Ok(())
    }
}
