//! The forward max-pool a convolution routine computes in its epilogue
//! (`routines/pool_fold.rs`): which pool fusion after a convolution is folded, and where its
//! output goes.
//!
//! A pool is folded only where the buffer assignment wrote its value early, at this
//! convolution (`BufferAssignment::written_early`, from `JitBufferNeeds::written_at`), so its
//! buffer is clear of everything live from the convolution on; and, when it reads a bias add,
//! only where that add was folded too (the routine's output then holds the biased values the
//! pool must read); a bias add inside the pool's fusion is handed to the routine with the
//! pool, when its buffer is already written. The folded fusion then emits no code
//! (`emit_instruction.rs`).

use super::compile::ProgramCx;
use super::emit_instruction::Walk;
use crate::jit::buffer::Addr;
use crate::jit::routines::conv_epilogue::PoolTargets;
use crate::jit::routines::pool_fold::{epilogue_pool, pool_source};
use tessel_compiler::ir::{InstrId, Op};
use tessel_compiler::passes::Instance;
use tessel_kernels::pooling::MaxPool;

impl ProgramCx<'_> {
    /// The pool fusion after convolution `conv_id` that its routine may compute, with the
    /// pool, where it writes (its output, and its window choices when its gradient reads
    /// them, `pool_choices.rs`) and the buffer of the bias inside the pool's fusion (the
    /// inference form); `folded_bias` is the bias-add fusion the routine computes, if any.
    pub(super) fn pool_after(
        &self,
        walk: &Walk,
        conv_id: InstrId,
        folded_bias: Option<InstrId>,
    ) -> Option<(InstrId, MaxPool, PoolTargets, Option<Addr>)> {
        let inst = walk.inst;
        let z = folded_bias.unwrap_or(conv_id);
        let pool_id = walk
            .comp
            .users(z)
            .into_iter()
            .find(|&u| self.plan.written_early.get(&(inst, u)) == Some(&conv_id))?;
        let source = pool_source(self.module, walk.comp, pool_id)?;
        if source.conv != conv_id || source.bias_add != folded_bias {
            return None;
        }
        let [Some(buffer)] = self.plan.value_buffers.get(&(inst, pool_id))?[..] else {
            return None;
        };
        let offset = usize::try_from(self.plan.buffers[buffer].offset).ok()?;
        // The fused bias must be written by the time the convolution runs.
        let fused_bias = match source.fused_bias {
            Some(k) => {
                let operand = *walk.comp.get(pool_id).operands().get(k as usize)?;
                Some(self.written_before(walk, operand)?)
            }
            None => None,
        };
        let pool = epilogue_pool(&source, self.options)?;
        let choices = self.choices_buffer(inst, pool_id);
        let to = PoolTargets {
            output: Addr::Arena(offset),
            choices,
            discard_output: choices.is_some() && self.read_only_through(walk, z, pool_id),
        };
        Some((pool_id, pool, to, fused_bias))
    }

    /// Whether value `z` is read by nothing but pool fusion `pool_id` and the gradient that
    /// reads that pool's window choices (`pool_choices.rs`) instead of `z`: then, with the
    /// pool folded into the convolution writing `z`, nothing reads `z`'s buffer and the
    /// routine need not store it (`PoolTargets::discard_output`).
    fn read_only_through(&self, walk: &Walk, z: InstrId, pool_id: InstrId) -> bool {
        let Some(&(reader, _)) = self.plan.side_outputs.get(&(walk.inst, pool_id)) else {
            return false;
        };
        let mut users = walk.comp.users(z);
        users.sort();
        users.dedup();
        let mut want = vec![pool_id, reader];
        want.sort();
        walk.comp.root() != z && users == want
    }

    /// The buffer the assignment gave the window choices of pool fusion `id`
    /// (`pool_choices.rs`), if it did.
    pub(super) fn choices_buffer(&self, inst: Instance, id: InstrId) -> Option<Addr> {
        let &(_, buffer) = self.plan.side_outputs.get(&(inst, id))?;
        let offset = usize::try_from(self.plan.buffers[buffer].offset).ok()?;
        Some(Addr::Arena(offset))
    }

    /// The buffer of `id`'s value if it is written before the instruction being emitted: it
    /// was emitted already, or it is (an element of) the computation's parameter, whose
    /// buffer the assignment gives from the computation's start.
    fn written_before(&self, walk: &Walk, id: InstrId) -> Option<Addr> {
        if let Some(loc) = walk.locs.get(&id) {
            return Some(loc.as_array()?.addr);
        }
        let mut v = id;
        while let Op::GetTupleElement { .. } = walk.comp.get(v).op {
            v = walk.comp.get(v).operand(0);
        }
        if !matches!(walk.comp.get(v).op, Op::Parameter(_)) {
            return None;
        }
        let [Some(b)] = self.plan.value_buffers.get(&(walk.inst, id))?[..] else {
            return None;
        };
        Some(Addr::Arena(
            usize::try_from(self.plan.buffers[b].offset).ok()?,
        ))
    }
}
