//! Two convolutions run side by side (`routines/conv_pair.rs`): the first's turn in the walk
//! plans both, each over its own buffers and scratch, and emits one call that runs them on the
//! two workers; the second's turn then emits nothing and names the buffer it wrote.
//!
//! A pair runs only where the buffer assignment wrote the second's value (and scratch) at the
//! first's position (`BufferAssignment::written_early`), so the two cannot disagree.

use super::compile::ProgramCx;
use super::emit_instruction::Walk;
use crate::jit::buffer::Loc;
use crate::jit::routines::conv_pair::{conv_pair_routine, ConvPairPlan};
use crate::jit::routines::conv_select::ConvRoutine;
use crate::jit::JitError;
use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::InstrId;

impl ProgramCx<'_> {
    /// The convolution that runs beside convolution `first`, where the buffer assignment
    /// wrote it at `first`'s position.
    pub(super) fn pair_second(&self, walk: &Walk, first: InstrId) -> Option<InstrId> {
        let (a, second) = self
            .conv_pairs
            .pair_of(self.module, walk.cid, first, self.options)?;
        let written_there = self.plan.written_early.get(&(walk.inst, second)) == Some(&first);
        (a == first && written_there).then_some(second)
    }

    /// Plans convolution `second` to run beside the one being emitted, over the value buffer
    /// and scratch the assignment gave it; its own turn then returns that buffer
    /// ([`Self::ran_beside`]).
    pub(super) fn plan_second(
        &mut self,
        walk: &Walk,
        second: InstrId,
    ) -> Result<ConvRoutine, JitError> {
        let (first, first_name) = (self.current, self.current_name.clone());
        self.begin_instruction(walk.inst, second);
        self.current_name.clone_from(&walk.comp.get(second).name);
        let (routine, loc) = self.plan_conv(walk, second)?;
        if !self.scratch.is_empty() {
            return Err(JitError::Invalid(format!(
                "{}: scratch planned by the buffer assignment and not used",
                self.current_name
            )));
        }
        self.paired_values.insert((walk.inst, second), loc);
        self.current = first;
        self.current_name = first_name;
        Ok(routine)
    }

    /// The value of convolution `id` when it ran beside an earlier one: its buffers were
    /// planned there, so nothing is emitted (and its scratch was used there).
    pub(super) fn ran_beside(&mut self, walk: &Walk, id: InstrId) -> Option<Loc> {
        let loc = self.paired_values.remove(&(walk.inst, id))?;
        self.scratch.clear();
        Some(loc)
    }

    /// Emits the call that runs `convs` (instructions `ids`) on the two workers.
    pub(super) fn call_conv_pair(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        walk: &Walk,
        convs: [ConvRoutine; 2],
        ids: [InstrId; 2],
    ) {
        let names = ids.map(|id| walk.comp.get(id).name.clone());
        let name = format!("{} + {}", names[0], names[1]);
        let plan = ConvPairPlan {
            name: name.clone(),
            routines: convs.map(|c| (c.routine, c.plan)),
        };
        let own_name = std::mem::replace(&mut self.current_name, name);
        self.call_plan(fb, arena, conv_pair_routine as *const () as usize, plan);
        self.current_name = own_name;
        self.paired_convolutions += 1;
    }
}
