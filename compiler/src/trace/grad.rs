//! `grad`: gradients of a traced scalar loss, through [`crate::autodiff::gradients`].

use super::tensor::Tensor;
use super::tracer::{source_location, Tracer};
use std::panic::Location;
use std::rc::Rc;

impl Tracer {
    /// The gradients of the scalar float `loss` with respect to each of `params`, added to
    /// the trace (reverse-mode autodiff of everything traced so far). Failures (a non-scalar
    /// loss, tensors of another trace) are trace errors reported by [`Tracer::finish`], like
    /// shape mistakes; every gradient is then a failed tensor.
    #[track_caller]
    pub fn grad(&mut self, loss: &Tensor, params: &[&Tensor]) -> Vec<Tensor> {
        let loc = Location::caller();
        let failed = |t: &Tracer| params.iter().map(|_| Tensor::failed(&t.state)).collect();
        let foreign = std::iter::once(loss)
            .chain(params.iter().copied())
            .any(|x| !Rc::ptr_eq(&x.state, &self.state));
        if foreign {
            let msg = "a tensor belongs to a different tracer".to_string();
            self.state
                .borrow_mut()
                .record("grad", msg, source_location(loc));
            return failed(self);
        }
        let (Some(loss_id), Some(param_ids)) = (
            loss.id,
            params.iter().map(|p| p.id).collect::<Option<Vec<_>>>(),
        ) else {
            return failed(self);
        };
        let result =
            self.with_module(|m, entry| crate::autodiff::gradients(m, entry, loss_id, &param_ids));
        match result {
            Ok(ids) => ids
                .into_iter()
                .map(|id| Tensor::new(&self.state, id))
                .collect(),
            Err(e) => {
                self.state
                    .borrow_mut()
                    .record("grad", e.to_string(), source_location(loc));
                failed(self)
            }
        }
    }
}
