//! `tf.compat.v1.train.AdamOptimizer`, TF1's form: `lr_t = lr * sqrt(1 - beta2^t) /
//! (1 - beta1^t)`, `m += (grad - m) * (1 - beta1)`, `v += (grad^2 - v) * (1 - beta2)`,
//! `var -= lr_t * m / (sqrt(v) + epsilon)` ("epsilon hat", 1e-8).
//!
//! `beta1^t` and `beta2^t` are the non-trainable scalar variables `beta1_power` and
//! `beta2_power` (initialized to beta1 and beta2, multiplied by them after each step, TF's
//! `_finish`), created before the slots `VAR/Adam` (m) and `VAR/Adam_1` (v), as in TF1.

use super::{
    create_slot, float_types, unique_variable_name, value, Gradient, LearningRate, Optimizer,
    OptimizerError,
};
use crate::model::graph::Graph;
use crate::model::variables::Initializer;

/// Adam with TF1's defaults: beta1 0.9, beta2 0.999, epsilon 1e-8.
#[derive(Clone, Debug)]
pub struct Adam {
    learning_rate: LearningRate,
    beta1: f32,
    beta2: f32,
    epsilon: f32,
}

impl Adam {
    pub fn new(learning_rate: impl Into<LearningRate>) -> Adam {
        Adam {
            learning_rate: learning_rate.into(),
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
        }
    }

    pub fn beta1(mut self, beta1: f32) -> Adam {
        self.beta1 = beta1;
        self
    }

    pub fn beta2(mut self, beta2: f32) -> Adam {
        self.beta2 = beta2;
        self
    }

    pub fn epsilon(mut self, epsilon: f32) -> Adam {
        self.epsilon = epsilon;
        self
    }
}

impl Optimizer for Adam {
    fn name(&self) -> &str {
        "Adam"
    }

    fn apply_updates(
        &self,
        g: &mut Graph,
        grads_and_vars: &[Gradient],
    ) -> Result<(), OptimizerError> {
        let types = float_types(g, grads_and_vars)?;
        let Some(&power_ty) = types.first() else {
            return Ok(());
        };
        // TF1 makes the powers with the first variable's dtype.
        let power = |g: &mut Graph, base: &str, beta: f32| {
            let name = unique_variable_name(g, base);
            let init = Initializer::Constant(beta as f64);
            g.variables
                .push(&mut g.tracer, &name, &[], power_ty, init, false)
        };
        let beta1_power = power(g, "beta1_power", self.beta1);
        let beta2_power = power(g, "beta2_power", self.beta2);
        let slots: Vec<_> = grads_and_vars
            .iter()
            .map(|gv| {
                let m = create_slot(g, gv.var, self.name(), Initializer::Zeros);
                let v = create_slot(g, gv.var, self.name(), Initializer::Zeros);
                (m, v)
            })
            .collect();
        let (b1p, b2p) = (value(g, beta1_power), value(g, beta2_power));
        for ((gv, &ty), &(m, v)) in grads_and_vars.iter().zip(&types).zip(&slots) {
            let lr = self.learning_rate.tensor(g, ty)?;
            let one = g.tracer.scalar(1.0, ty);
            let one_minus_beta1 = g.tracer.scalar(1.0 - self.beta1 as f64, ty);
            let one_minus_beta2 = g.tracer.scalar(1.0 - self.beta2 as f64, ty);
            let epsilon = g.tracer.scalar(self.epsilon as f64, ty);
            let (b1p, b2p) = (b1p.cast(ty), b2p.cast(ty));
            let grad = &gv.grad;
            // TF's ApplyAdam kernel, in its order of operations.
            let alpha = &lr * (&one - &b2p).sqrt() / (&one - &b1p);
            let m_old = value(g, m);
            let m_new = &m_old + (grad - &m_old) * &one_minus_beta1;
            let v_old = value(g, v);
            let v_new = &v_old + (grad * grad - &v_old) * &one_minus_beta2;
            let new = value(g, gv.var) - (&m_new * &alpha) / (v_new.sqrt() + &epsilon);
            g.assign(m, m_new);
            g.assign(v, v_new);
            g.assign(gv.var, new);
        }
        // TF's `_finish`: the powers advance after every variable's update.
        let b1_next = &b1p * self.beta1;
        let b2_next = &b2p * self.beta2;
        g.assign(beta1_power, b1_next);
        g.assign(beta2_power, b2_next);
        Ok(())
    }
}
