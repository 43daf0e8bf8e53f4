//! Building instructions with inferred shapes and fresh module-unique names.
//!
//! Used by tracing, autodiff and passes: `b.add(op, &operands)` checks the operands and
//! infers the result shape, so a mistake surfaces as a [`ShapeError`] at the op that made it.

use crate::ir::{ComputationId, InstrId, Instruction, Metadata, Module, Op, Shape};
use crate::shape_inference::{check_given_shape, infer_shape, ShapeError};

/// Adds instructions to one computation of a module.
pub struct Builder<'m> {
    pub module: &'m mut Module,
    pub comp: ComputationId,
    /// Metadata given to every instruction added (op name scope, source location).
    pub metadata: Metadata,
}

impl<'m> Builder<'m> {
    pub fn new(module: &'m mut Module, comp: ComputationId) -> Builder<'m> {
        Builder {
            module,
            comp,
            metadata: Metadata::default(),
        }
    }

    pub fn shape(&self, id: InstrId) -> &Shape {
        &self.module.computation(self.comp).get(id).shape
    }

    /// Adds `op` applied to `operands`, with its inferred shape.
    pub fn add(&mut self, op: Op, operands: &[InstrId]) -> Result<InstrId, ShapeError> {
        let comp = self.module.computation(self.comp);
        let shapes: Vec<&Shape> = operands.iter().map(|&o| &comp.get(o).shape).collect();
        let shape = infer_shape(self.module, &op, &shapes)?;
        Ok(self.add_with_shape(op, shape, operands))
    }

    /// Adds `op` with a given result shape after checking it against the operands with
    /// [`check_given_shape`]: for ops whose shape HLO states rather than implies (broadcast,
    /// reshape, convert, constant, iota, ...).
    pub(crate) fn add_given(
        &mut self,
        op: Op,
        shape: Shape,
        operands: &[InstrId],
    ) -> Result<InstrId, ShapeError> {
        let comp = self.module.computation(self.comp);
        let shapes: Vec<&Shape> = operands.iter().map(|&o| &comp.get(o).shape).collect();
        check_given_shape(self.module, &op, &shapes, &shape)?;
        Ok(self.add_with_shape(op, shape, operands))
    }

    /// Adds `op` with a shape the caller vouches for (parameters, constants, parsed text).
    pub fn add_with_shape(&mut self, op: Op, shape: Shape, operands: &[InstrId]) -> InstrId {
        let name = self.module.unique_name(op_base_name(&op));
        let mut instr = Instruction::new(name, op, shape);
        instr.metadata = self.metadata.clone();
        self.module.computation_mut(self.comp).add(instr, operands)
    }
}

/// The base of generated names: `add`, `broadcast`, `get-tuple-element`, ...
fn op_base_name(op: &Op) -> &'static str {
    op.opcode_name()
}
