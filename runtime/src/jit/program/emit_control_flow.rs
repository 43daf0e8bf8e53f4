//! `while` and `conditional` as native control flow: a loop whose state buffers are updated in
//! place, and a chain of branches that copy the chosen branch's result into one buffer.

use super::compile::ProgramCx;
use crate::jit::buffer::Loc;
use crate::jit::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::{ComputationId, ElementType, InstrId, Shape};
use tessel_compiler::passes::{Instance, LoopCopy};

impl ProgramCx<'_> {
    /// A loop over the state buffers the assignment gives `while_instr`: the initial value is
    /// copied in unless the state took over its buffers, and each body result not already
    /// written in place is copied back.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_while(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        while_instr: (Instance, InstrId),
        shape: &Shape,
        init: Loc,
        cond: ComputationId,
        body: ComputationId,
    ) -> Result<Loc, JitError> {
        let state = self.alloc_loc(shape)?;
        let (inst, id) = while_instr;
        let temps = self.loop_copy_temps((inst, id, LoopCopy::Enter));
        self.copy_loc(fb, arena, &state, &init, temps)?;
        let header = fb.create_block();
        let body_block = fb.create_block();
        let exit = fb.create_block();
        fb.ins().jump(header, &[]);
        fb.switch_to_block(header);
        let c = self.emit_computation(fb, arena, cond, std::slice::from_ref(&state))?;
        let cb = c
            .as_array()
            .cloned()
            .ok_or_else(|| JitError::Invalid("while condition is not a pred".into()))?;
        let p = self.load_scalar_i64(fb, arena, &cb)?;
        fb.ins().brif(p, body_block, &[], exit, &[]);
        fb.switch_to_block(body_block);
        fb.seal_block(body_block);
        let r = self.emit_computation(fb, arena, body, std::slice::from_ref(&state))?;
        let temps = self.loop_copy_temps((inst, id, LoopCopy::Back));
        self.copy_loc(fb, arena, &state, &r, temps)?;
        fb.ins().jump(header, &[]);
        fb.seal_block(header);
        fb.switch_to_block(exit);
        fb.seal_block(exit);
        Ok(state)
    }

    pub(super) fn emit_conditional(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        shape: &Shape,
        args: &[Loc],
        branches: &[ComputationId],
    ) -> Result<Loc, JitError> {
        let result = self.alloc_loc(shape)?;
        let sel = args[0]
            .as_array()
            .cloned()
            .ok_or_else(|| JitError::Invalid("conditional selector is not an array".into()))?;
        let idx = self.load_scalar_i64(fb, arena, &sel)?;
        let n = branches.len() as i64;
        // pred: true runs branch 0; an index out of range runs the last branch.
        let idx = if sel.shape.element_type == ElementType::Pred {
            let one = fb.ins().iconst(types::I64, 1);
            fb.ins().isub(one, idx)
        } else {
            let bad_lo = fb.ins().icmp_imm_s(IntCC::SignedLessThan, idx, 0);
            let bad_hi = fb.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, idx, n);
            let bad = fb.ins().bor(bad_lo, bad_hi);
            let last = fb.ins().iconst(types::I64, n - 1);
            fb.ins().select(bad, last, idx)
        };
        let merge = fb.create_block();
        let blocks: Vec<_> = branches.iter().map(|_| fb.create_block()).collect();
        for (k, &b) in blocks.iter().enumerate() {
            if k + 1 == blocks.len() {
                fb.ins().jump(b, &[]);
            } else {
                let next = fb.create_block();
                let is_k = fb.ins().icmp_imm_s(IntCC::Equal, idx, k as i64);
                fb.ins().brif(is_k, b, &[], next, &[]);
                fb.seal_block(next);
                fb.switch_to_block(next);
            }
        }
        for (k, &b) in blocks.iter().enumerate() {
            fb.seal_block(b);
            fb.switch_to_block(b);
            let arg = args
                .get(k + 1)
                .cloned()
                .ok_or_else(|| JitError::Invalid("conditional branch without operand".into()))?;
            let r = self.emit_computation(fb, arena, branches[k], &[arg])?;
            // The result is defined after the branches' results are read: no buffer is both.
            self.copy_loc(fb, arena, &result, &r, Vec::new())?;
            fb.ins().jump(merge, &[]);
        }
        fb.seal_block(merge);
        fb.switch_to_block(merge);
        Ok(result)
    }
}
