//! Gradients inside a trace: `grad(&tracer, &loss, &[&w, &b])` gives tensors of the same
//! trace holding d loss / d w, d loss / d b, so a traced training step can apply them.

use super::{gradients, AutodiffError};
use crate::trace::{Tensor, Tracer};

/// The gradients of the traced float scalar `loss` w.r.t. `params` (any tensors of the same
/// trace, usually its parameters), as new tensors of the trace.
///
/// ```
/// use tessel_compiler::autodiff::grad;
/// use tessel_compiler::ir::ElementType::F32;
/// use tessel_compiler::trace::Tracer;
///
/// let mut t = Tracer::new("fit");
/// let x = t.parameter("x", &[4, 3], F32);
/// let w = t.parameter("w", &[3, 1], F32);
/// let err = x.matmul(&w);
/// let loss = (&err * &err).reduce_sum(&[0, 1], false);
/// let g = grad(&t, &loss, &[&w]).expect("differentiable");
/// let step = &w - &(&g[0] * 0.1f32);
/// let module = t.finish(&[&loss, &step]).expect("traced");
/// assert_eq!(module.entry().parameters().len(), 2);
/// ```
pub fn grad(
    tracer: &Tracer,
    loss: &Tensor,
    params: &[&Tensor],
) -> Result<Vec<Tensor>, AutodiffError> {
    let failed = || {
        AutodiffError::new("a tensor given to grad failed to trace; the tracer's issues say why")
    };
    let loss_id = loss.id().ok_or_else(failed)?;
    let ids = params
        .iter()
        .map(|p| p.id().ok_or_else(failed))
        .collect::<Result<Vec<_>, _>>()?;
    let grads = tracer.with_module(|module, entry| gradients(module, entry, loss_id, &ids))?;
    Ok(grads.into_iter().map(|id| tracer.tensor(id)).collect())
}
