//! `tf.compat.v1.tpu.CrossShardOptimizer`: data-parallel training on several replicas.
//!
//! `compute_gradients` scales the loss by `1 / num_shards` (or `1 / group size` with a
//! `group_assignment`) when the reduction is MEAN, then defers to the wrapped optimizer;
//! `apply_gradients` sums every gradient across replicas with
//! [`Tensor::cross_replica_sum`] (one HLO `all-reduce` per gradient) and lets the wrapped
//! optimizer apply the sums (on one shard the gradients are applied as they are: nothing to
//! sum). The runtime adds the replicas' values in replica-id order, so
//! a replicated step is bitwise deterministic run to run.
//!
//! Errors use TF's wording: a `group_assignment` that is not a permutation of the replicas
//! (ids out of range, missing or repeated), groups of different sizes, and TPUEstimator's
//! `CrossShardOptimizer must be used for model training on TPUs.` (see
//! [`TrainOp::validate_for_replicas`]).

use super::graph::Graph;
use super::optimizers::{GradAndVar, Gradient, Optimizer, OptimizerError, TrainOp};
use std::collections::BTreeSet;
use tessel_compiler::trace::Tensor;

/// How the shards' losses combine (TF's `losses.Reduction.MEAN` / `SUM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reduction {
    /// Average over the shards (TF's default): the loss is scaled by `1 / shards`.
    #[default]
    Mean,
    /// Sum over the shards.
    Sum,
}

/// Errors of cross-replica training, worded as TF words them.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CrossShardError {
    #[error("Argument `group_assignment` must be a permutation of range({num_shards}). Received: {groups}")]
    NotPermutation { num_shards: usize, groups: String },
    #[error("The size of each subgroup in `group_assignment` must be equal. Received: {groups}")]
    UnequalGroups { groups: String },
    #[error("CrossShardOptimizer must be used for model training on TPUs.")]
    Missing,
}

/// Wraps an optimizer so that gradients are summed across replicas before it applies them.
pub struct CrossShardOptimizer<O: Optimizer> {
    opt: O,
    reduction: Reduction,
    group_assignment: Option<Vec<Vec<usize>>>,
}

impl<O: Optimizer> CrossShardOptimizer<O> {
    /// TF's defaults: MEAN over all replicas.
    pub fn new(opt: O) -> CrossShardOptimizer<O> {
        CrossShardOptimizer {
            opt,
            reduction: Reduction::Mean,
            group_assignment: None,
        }
    }

    pub fn with_reduction(mut self, reduction: Reduction) -> CrossShardOptimizer<O> {
        self.reduction = reduction;
        self
    }

    /// Sum within each group only (`[[0, 1], [2, 3]]`); an empty list means all replicas.
    pub fn with_group_assignment(mut self, groups: Vec<Vec<usize>>) -> CrossShardOptimizer<O> {
        self.group_assignment = Some(groups);
        self
    }

    /// The wrapped optimizer.
    pub fn inner(&self) -> &O {
        &self.opt
    }

    /// The groups to sum over (`&[]`: all replicas).
    fn groups(&self) -> &[Vec<usize>] {
        self.group_assignment.as_deref().unwrap_or(&[])
    }
}

/// TF's `_verify_and_get_subgroup_size`: `None` without groups, else the groups' common size.
/// Unlike TF, a repeated replica id is refused here (TF's set comparison lets
/// `[[0, 1], [1, 0]]` through to fail later in XLA).
pub fn verify_group_assignment(
    groups: &[Vec<usize>],
    num_shards: usize,
) -> Result<Option<usize>, CrossShardError> {
    if groups.is_empty() {
        return Ok(None);
    }
    let text = format!("{groups:?}");
    let ids: Vec<usize> = groups.iter().flatten().copied().collect();
    let distinct: BTreeSet<usize> = ids.iter().copied().collect();
    let expected: BTreeSet<usize> = (0..num_shards).collect();
    if distinct != expected || ids.len() != distinct.len() {
        return Err(CrossShardError::NotPermutation {
            num_shards,
            groups: text,
        });
    }
    let size = groups[0].len();
    if groups.iter().any(|g| g.len() != size) {
        return Err(CrossShardError::UnequalGroups { groups: text });
    }
    Ok(Some(size))
}

impl<O: Optimizer> Optimizer for CrossShardOptimizer<O> {
    fn name(&self) -> &str {
        self.opt.name()
    }

    fn apply_updates(&self, g: &mut Graph, gradients: &[Gradient]) -> Result<(), OptimizerError> {
        self.opt.apply_updates(g, gradients)
    }

    fn compute_gradients(
        &self,
        g: &mut Graph,
        loss: &Tensor,
    ) -> Result<Vec<GradAndVar>, OptimizerError> {
        let num_shards = g.num_shards();
        let subgroup = verify_group_assignment(self.groups(), num_shards)?;
        if num_shards > 1 && self.reduction == Reduction::Mean {
            let scale = 1.0 / subgroup.unwrap_or(num_shards) as f64;
            // TF's `loss *= scale`, the scale a constant of the loss's type.
            let scaled = loss * &loss.scalar_like(scale);
            return self.opt.compute_gradients(g, &scaled);
        }
        self.opt.compute_gradients(g, loss)
    }

    fn apply_gradients(
        &self,
        g: &mut Graph,
        grads_and_vars: &[GradAndVar],
    ) -> Result<TrainOp, OptimizerError> {
        verify_group_assignment(self.groups(), g.num_shards())?;
        if g.num_shards() == 1 {
            // A sum over one replica is the gradient itself: no all-reduce, which the
            // device would run as a copy of every gradient each step.
            let op = self.opt.apply_gradients(g, grads_and_vars)?;
            return Ok(TrainOp::new(op.updated, true));
        }
        let summed: Vec<GradAndVar> = grads_and_vars
            .iter()
            .map(|gv| GradAndVar {
                // TF skips `None` gradients.
                grad: gv.grad.as_ref().map(|t| t.cross_replica_sum(self.groups())),
                var: gv.var,
            })
            .collect();
        let op = self.opt.apply_gradients(g, &summed)?;
        Ok(TrainOp::new(op.updated, true))
    }
}
