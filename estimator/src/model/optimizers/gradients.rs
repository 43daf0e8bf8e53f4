//! TF1's `compute_gradients`: the loss's gradient for each trainable variable, `None` for a
//! variable the loss does not depend on.
//!
//! Autodiff would give such a variable a zero gradient, and Momentum or Adam would then
//! still move it (their slots decay); TF gives `None` and leaves the variable and its slots
//! alone, so the dependence is decided here, on the traced graph, before differentiating.

use super::{GradAndVar, Gradient, OptimizerError};
use crate::model::graph::Graph;
use crate::model::variables::VariableId;
use std::collections::HashSet;
use tessel_compiler::ir::InstrId;
use tessel_compiler::trace::Tensor;

/// Gradients of `loss` for every trainable variable, in creation order.
pub(crate) fn compute_gradients(
    g: &mut Graph,
    loss: &Tensor,
) -> Result<Vec<GradAndVar>, OptimizerError> {
    let vars: Vec<(VariableId, Tensor)> = g
        .variables
        .all()
        .filter(|(_, v)| v.trainable)
        .map(|(id, v)| (id, v.tensor.clone()))
        .collect();
    if vars.is_empty() {
        return Err(OptimizerError::NoVariables);
    }
    let reached = loss.id().and_then(|id| reachable(g, id));
    // A failed or foreign loss or variable: differentiate anyway, so that the trace reports
    // the mistake.
    let depends = |t: &Tensor| match (&reached, t.id()) {
        (Some(reached), Some(id)) => reached.contains(&id),
        _ => true,
    };
    let wanted: Vec<&(VariableId, Tensor)> = vars.iter().filter(|(_, t)| depends(t)).collect();
    let tensors: Vec<&Tensor> = wanted.iter().map(|(_, t)| t).collect();
    let mut grads = if tensors.is_empty() {
        Vec::new()
    } else {
        g.tracer.grad(loss, &tensors)
    }
    .into_iter();
    Ok(vars
        .iter()
        .map(|(var, t)| GradAndVar {
            grad: if depends(t) { grads.next() } else { None },
            var: *var,
        })
        .collect())
}

/// The pairs with a gradient; none at all is TF's error.
pub(crate) fn present(
    g: &Graph,
    grads_and_vars: &[GradAndVar],
) -> Result<Vec<Gradient>, OptimizerError> {
    let present: Vec<Gradient> = grads_and_vars
        .iter()
        .filter_map(|gv| gv.grad.clone().map(|grad| Gradient { grad, var: gv.var }))
        .collect();
    if present.is_empty() {
        return Err(OptimizerError::NoGradients {
            variables: names(g, grads_and_vars),
        });
    }
    Ok(present)
}

/// The variables' names, for messages.
pub(crate) fn names(g: &Graph, grads_and_vars: &[GradAndVar]) -> Vec<String> {
    grads_and_vars
        .iter()
        .map(|gv| g.variables.get(gv.var).name.clone())
        .collect()
}

/// Every instruction of the entry computation `root` is computed from (itself included);
/// `None` when `root` is not in this trace's entry (a tensor of another trace).
fn reachable(g: &Graph, root: InstrId) -> Option<HashSet<InstrId>> {
    g.tracer.with_module(|m, entry| {
        let comp = m.computation(entry);
        if !comp.contains(root) {
            return None;
        }
        let mut seen = HashSet::from([root]);
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            for &op in comp.get(id).operands() {
                if seen.insert(op) {
                    stack.push(op);
                }
            }
        }
        Some(seen)
    })
}
