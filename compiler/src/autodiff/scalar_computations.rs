//! The small scalar computations gradient rules call: `add` for sums, `GE`/`LE` selectors for
//! select-and-scatter. Each is made once per module and element type.

use crate::builder::Builder;
use crate::ir::{
    BinaryOp, ComparisonDirection, Computation, ComputationId, ElementType, Module, Op, Shape,
};
use hashbrown::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ScalarKind {
    /// `(a, b) -> a + b`
    Add,
    /// `(a, b) -> a >= b`: select-and-scatter picks the first maximum.
    Ge,
    /// `(a, b) -> a <= b`: select-and-scatter picks the first minimum.
    Le,
}

/// Computations made so far, so that each is made once.
#[derive(Default)]
pub(crate) struct ScalarComputations {
    made: HashMap<(ScalarKind, ElementType), ComputationId>,
}

impl ScalarComputations {
    pub(crate) fn get(
        &mut self,
        module: &mut Module,
        kind: ScalarKind,
        ty: ElementType,
    ) -> ComputationId {
        if let Some(&id) = self.made.get(&(kind, ty)) {
            return id;
        }
        let id = make(module, kind, ty);
        self.made.insert((kind, ty), id);
        id
    }
}

fn make(module: &mut Module, kind: ScalarKind, ty: ElementType) -> ComputationId {
    let base = match kind {
        ScalarKind::Add => "grad_add",
        ScalarKind::Ge => "grad_select_ge",
        ScalarKind::Le => "grad_select_le",
    };
    let name = module.unique_name(&format!("{base}_{ty}"));
    let id = module.add_computation(Computation::new(name));
    let mut b = Builder::new(module, id);
    let scalar = Shape::scalar(ty);
    let x = b.add_with_shape(Op::Parameter(0), scalar.clone(), &[]);
    let y = b.add_with_shape(Op::Parameter(1), scalar.clone(), &[]);
    let root = match kind {
        ScalarKind::Add => b.add_with_shape(Op::Binary(BinaryOp::Add), scalar, &[x, y]),
        ScalarKind::Ge | ScalarKind::Le => {
            let direction = if kind == ScalarKind::Ge {
                ComparisonDirection::Ge
            } else {
                ComparisonDirection::Le
            };
            b.add_with_shape(
                Op::Compare {
                    direction,
                    comparison_type: None,
                },
                Shape::scalar(ElementType::Pred),
                &[x, y],
            )
        }
    };
    module.computation_mut(id).set_root(root);
    id
}
