//! The bias add a convolution routine computes in its stores (`routines/bias_match.rs`): which
//! fusion after a convolution may be folded, and where its bias is.
//!
//! A fusion is folded only when the buffer assignment put it in place over the convolution's
//! result (so the routine's output already is the fusion's buffer, and nothing between the
//! two can see the early bias) and the convolution has no other reader. The folded fusion
//! then emits no code (`emit_instruction.rs`).

use super::compile::ProgramCx;
use super::emit_instruction::Walk;
use crate::jit::buffer::Addr;
use crate::jit::routines::bias_match::lone_bias_add;
use tessel_compiler::ir::InstrId;

impl ProgramCx<'_> {
    /// The bias-add fusion after convolution `conv_id` that its routine may compute, with the
    /// bias buffer; `None` when there is none or folding it is off.
    pub(super) fn bias_add_after(&self, walk: &Walk, conv_id: InstrId) -> Option<(InstrId, Addr)> {
        if !self.options.fold_bias_add {
            return None;
        }
        let (fusion_id, m) = lone_bias_add(self.module, walk.comp, conv_id)?;
        let operands = walk.comp.get(fusion_id).operands();
        // The bias must already have its buffer; the shape was checked by the match.
        let bias = walk
            .locs
            .get(operands.get(m.bias as usize)?)?
            .as_array()?
            .addr;
        let inst = walk.inst;
        let buffers = |id| self.plan.value_buffers.get(&(inst, id));
        let in_place = matches!(buffers(conv_id), Some(b) if b.len() == 1 && b[0].is_some())
            && buffers(conv_id) == buffers(fusion_id);
        let no_scratch = self
            .plan
            .scratch_buffers
            .get(&(inst, fusion_id))
            .is_none_or(|s| s.is_empty());
        (in_place && no_scratch).then_some((fusion_id, bias))
    }
}
