//! TF1's optimizers (`tf.compat.v1.train.*Optimizer`) on a traced [`Graph`].
//!
//! [`Optimizer::minimize`] is TF1's: [`Optimizer::compute_gradients`] (the loss's gradients
//! with respect to every trainable variable, by the tracer's autodiff), then
//! [`Optimizer::apply_gradients`] (each optimizer's update rule, recorded with
//! [`Graph::assign`], and the global step incremented by one with
//! [`Graph::set_next_global_step`]). The split is TF1's so that
//! [`crate::model::cross_shard::CrossShardOptimizer`] can sit between the two.
//!
//! Slots are non-trainable variables named as TF names them (`VAR/Momentum`, `VAR/Adam`,
//! `VAR/Adam_1`, `beta1_power`, ...), so checkpoints carry them under TF's names. Each
//! optimizer creates every slot before recording any update, as TF1's `_create_slots` does, so
//! the slots' entry parameters come in TF's order.
//!
//! | file | optimizer |
//! | --- | --- |
//! | `gradient_descent.rs` | `GradientDescent` |
//! | `momentum.rs` | `Momentum` (with Nesterov) |
//! | `adam.rs` | `Adam` (TF1's, with `beta1_power`/`beta2_power`) |
//! | `rmsprop.rs` | `RmsProp` (with `centered`) |
//! | `adagrad.rs` | `Adagrad` |
//! | `gradients.rs` | TF1's `compute_gradients` (`None` for variables the loss does not reach) |

mod adagrad;
mod adam;
mod gradient_descent;
mod gradients;
mod momentum;
mod rmsprop;

pub use adagrad::Adagrad;
pub use adam::Adam;
pub use gradient_descent::GradientDescent;
pub use momentum::Momentum;
pub use rmsprop::RmsProp;

use super::cross_shard::CrossShardError;
use super::graph::Graph;
use super::variables::{Initializer, VariableId};
use tessel_compiler::ir::{ElementType, Shape};
use tessel_compiler::trace::Tensor;

/// A learning rate: a constant, or a traced scalar (a schedule of the global step).
#[derive(Clone, Debug)]
pub enum LearningRate {
    Constant(f32),
    Tensor(Tensor),
}

impl From<f32> for LearningRate {
    fn from(lr: f32) -> LearningRate {
        LearningRate::Constant(lr)
    }
}

impl From<Tensor> for LearningRate {
    fn from(lr: Tensor) -> LearningRate {
        LearningRate::Tensor(lr)
    }
}

impl From<&Tensor> for LearningRate {
    fn from(lr: &Tensor) -> LearningRate {
        LearningRate::Tensor(lr.clone())
    }
}

impl LearningRate {
    /// The rate as a scalar of `ty` in `g`'s trace.
    pub fn tensor(&self, g: &mut Graph, ty: ElementType) -> Result<Tensor, OptimizerError> {
        match self {
            LearningRate::Constant(lr) => Ok(g.tracer.scalar(*lr as f64, ty)),
            LearningRate::Tensor(t) => match t.shape() {
                // A failed tensor: its trace error is reported by `Tracer::finish`.
                None => Ok(t.clone()),
                Some(s) if s.rank() == 0 && s.element_type.is_float() => Ok(t.cast(ty)),
                Some(s) => Err(OptimizerError::LearningRate {
                    shape: Shape::Array(s).to_text(false),
                }),
            },
        }
    }
}

/// A gradient and the variable it belongs to (TF's `(grad, var)` pair); `grad` is `None`
/// when the loss does not depend on the variable (TF's `None` gradient), and
/// `apply_gradients` then leaves the variable and its slots alone.
#[derive(Clone, Debug)]
pub struct GradAndVar {
    pub grad: Option<Tensor>,
    pub var: VariableId,
}

/// A gradient that is there, as an optimizer's update rule takes it.
#[derive(Clone, Debug)]
pub struct Gradient {
    pub grad: Tensor,
    pub var: VariableId,
}

/// What `minimize` / `apply_gradients` return: which variables the step updates and whether
/// the gradients were summed across replicas (TF's `train_op`; the updates themselves are
/// recorded in the [`Graph`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainOp {
    pub updated: Vec<VariableId>,
    cross_shard: bool,
}

impl TrainOp {
    pub(crate) fn new(updated: Vec<VariableId>, cross_shard: bool) -> TrainOp {
        TrainOp {
            updated,
            cross_shard,
        }
    }

    /// True when the gradients were all-reduced across replicas (a
    /// [`crate::model::cross_shard::CrossShardOptimizer`]).
    pub fn is_cross_shard(&self) -> bool {
        self.cross_shard
    }

    /// TPUEstimator's check before training: with more than one replica the gradients must
    /// be summed across replicas, or each replica would train its own copy of the model.
    pub fn validate_for_replicas(&self, num_replicas: usize) -> Result<(), CrossShardError> {
        if num_replicas > 1 && !self.cross_shard {
            return Err(CrossShardError::Missing);
        }
        Ok(())
    }
}

/// Errors of building an optimizer's step.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OptimizerError {
    /// TF's message when the graph has no trainable variable.
    #[error("No variables to optimize.")]
    NoVariables,
    #[error("the learning rate must be a float scalar, got {shape}")]
    LearningRate { shape: String },
    #[error(
        "`{name}` is not a floating-point variable ({ty}); optimizers update float variables only"
    )]
    NotFloat { name: String, ty: String },
    /// TF's `minimize` message when the loss depends on no trainable variable.
    #[error("No gradients provided for any variable, check your graph for ops that do not support gradients, between variables {variables:?} and loss {loss}.")]
    NoGradientsForLoss {
        variables: Vec<String>,
        loss: String,
    },
    /// TF's `apply_gradients` message when every gradient is `None`.
    #[error("No gradients provided for any variable: {variables:?}.")]
    NoGradients { variables: Vec<String> },
    #[error(transparent)]
    CrossShard(#[from] CrossShardError),
}

/// A TF1 optimizer. Implementors give [`Optimizer::apply_updates`] (slots and update rule);
/// `compute_gradients`, `apply_gradients` and `minimize` are TF1's and shared.
pub trait Optimizer {
    /// TF's optimizer name, the suffix of its slots (`Momentum`, `Adam`, ...).
    fn name(&self) -> &str;

    /// Creates the slots for every variable of `grads_and_vars`, then records each
    /// variable's new value with [`Graph::assign`] (TF1's `_create_slots`, `_apply_dense`
    /// and `_finish`). Does not touch the global step.
    fn apply_updates(&self, g: &mut Graph, gradients: &[Gradient]) -> Result<(), OptimizerError>;

    /// The gradients of the scalar `loss` with respect to every trainable variable, in
    /// creation order (`compute_gradients` with the default `var_list`); `None` for a
    /// variable the loss does not depend on.
    fn compute_gradients(
        &self,
        g: &mut Graph,
        loss: &Tensor,
    ) -> Result<Vec<GradAndVar>, OptimizerError> {
        gradients::compute_gradients(g, loss)
    }

    /// Applies the gradients that are there and increments the global step by one. All
    /// gradients `None` is TF's "No gradients provided for any variable" error.
    fn apply_gradients(
        &self,
        g: &mut Graph,
        grads_and_vars: &[GradAndVar],
    ) -> Result<TrainOp, OptimizerError> {
        let present = gradients::present(g, grads_and_vars)?;
        self.apply_updates(g, &present)?;
        increment_global_step(g);
        Ok(TrainOp::new(
            present.iter().map(|gv| gv.var).collect(),
            false,
        ))
    }

    /// `compute_gradients` then `apply_gradients`: TF1's `minimize(loss, global_step)`.
    fn minimize(&self, g: &mut Graph, loss: &Tensor) -> Result<TrainOp, OptimizerError> {
        let grads_and_vars = self.compute_gradients(g, loss)?;
        if grads_and_vars.iter().all(|gv| gv.grad.is_none()) {
            return Err(OptimizerError::NoGradientsForLoss {
                variables: gradients::names(g, &grads_and_vars),
                loss: format!("{loss:?}"),
            });
        }
        self.apply_gradients(g, &grads_and_vars)
    }
}

/// `global_step + 1` as the step's new value (TF's `assign_add(global_step, 1)`).
pub(crate) fn increment_global_step(g: &mut Graph) {
    let next = &g.global_step + 1.0;
    g.set_next_global_step(next);
}

/// `base`, or `base_1`, `base_2`, ... when taken: TF's unique naming, which is why a second
/// slot of one optimizer is `VAR/Adam_1` and a second `beta1_power` is `beta1_power_1`.
pub(crate) fn unique_variable_name(g: &Graph, base: &str) -> String {
    if g.variables.find(base).is_none() {
        return base.to_string();
    }
    (1..)
        .map(|n| format!("{base}_{n}"))
        .find(|name| g.variables.find(name).is_none())
        .expect("some suffix is free")
}

/// A slot of `var` (TF's `_zeros_slot` / `_get_or_make_slot_with_initializer`): a
/// non-trainable variable of `var`'s shape and type named `VAR/OPTIMIZER` (made unique).
pub(crate) fn create_slot(
    g: &mut Graph,
    var: VariableId,
    optimizer: &str,
    initializer: Initializer,
) -> VariableId {
    let v = g.variables.get(var);
    let (dims, ty) = (v.dims.clone(), v.element_type);
    let name = unique_variable_name(g, &format!("{}/{optimizer}", v.name));
    g.variables
        .push(&mut g.tracer, &name, &dims, ty, initializer, false)
}

/// The variable's element type, which must be a float.
pub(crate) fn float_type(g: &Graph, var: VariableId) -> Result<ElementType, OptimizerError> {
    let v = g.variables.get(var);
    if v.element_type.is_float() {
        Ok(v.element_type)
    } else {
        Err(OptimizerError::NotFloat {
            name: v.name.clone(),
            ty: v.element_type.to_string(),
        })
    }
}

/// The variable's value before the step (its entry parameter).
pub(crate) fn value(g: &Graph, var: VariableId) -> Tensor {
    g.variables.get(var).tensor.clone()
}

/// Checks every variable is a float and returns their types.
pub(crate) fn float_types(
    g: &Graph,
    grads_and_vars: &[Gradient],
) -> Result<Vec<ElementType>, OptimizerError> {
    grads_and_vars
        .iter()
        .map(|gv| float_type(g, gv.var))
        .collect()
}
