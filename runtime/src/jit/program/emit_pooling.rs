//! A fusion the pooling routines compute (`routines/pool_match.rs`): one routine call over the
//! fusion's buffers instead of a generated kernel (why: `docs/jit.md`, "Max-pool fusions").

use super::compile::ProgramCx;
use crate::jit::buffer::{Addr, Loc};
use crate::jit::fused_kernels::reduce;
use crate::jit::routines::pool_match::{match_pool_fusion, PoolMatch};
use crate::jit::routines::pooling::{pool_routine, PoolPlan};
use crate::jit::JitError;
use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::ComputationId;

impl ProgramCx<'_> {
    /// Emits fusion `calls` as a pooling routine call and returns true, or returns false having
    /// emitted nothing when it is not one (or vectorizing is off: then the generated kernels
    /// run, the reference the routines are compared with).
    pub(super) fn emit_pool_fusion(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        calls: ComputationId,
        args: &[Loc],
        out: &Loc,
    ) -> Result<bool, JitError> {
        if !self.options.vectorize {
            return Ok(false);
        }
        let module = self.module;
        let comp = module.computation(calls);
        let Some(m) = match_pool_fusion(module, comp) else {
            return Ok(false);
        };
        let params: Option<Vec<Addr>> = args.iter().map(|a| a.as_array().map(|b| b.addr)).collect();
        let outputs: Option<Vec<Addr>> = match out {
            Loc::Tuple(outs) => outs.iter().map(|o| o.as_array().map(|b| b.addr)).collect(),
            _ => out.as_array().map(|b| vec![b.addr]),
        };
        let (Some(params), Some(outputs)) = (params, outputs) else {
            return Ok(false);
        };
        // The bias sum's second part goes to the scratch the buffer assignment planned for the
        // split reduce, cut where the generated kernels would cut it.
        let split = match &m {
            PoolMatch::Backward {
                outputs: Some((_, _, red)),
                ..
            } => reduce::reduce_split(module, comp, *red),
            _ => None,
        };
        let threads = self.options.gemm_threads;
        let choices = self.pool_choices_of(&m);
        if choices.is_none() {
            self.check_not_discarded()?;
        }
        let Some(probe) = PoolPlan::new(name, &m, &params, &outputs, None, choices, threads) else {
            return Ok(false);
        };
        let plan = match (split, &m) {
            (
                Some((mid, _)),
                PoolMatch::Backward {
                    outputs: Some((_, b, _)),
                    ..
                },
            ) => {
                let bytes = out_bytes(out, *b);
                let partial = self.take_partial_scratch(bytes)?;
                PoolPlan::new(
                    name,
                    &m,
                    &params,
                    &outputs,
                    Some((partial, mid as usize)),
                    choices,
                    threads,
                )
                .ok_or_else(|| JitError::Invalid(format!("{name}: pooling plan")))?
            }
            _ => probe,
        };
        self.call_plan(fb, arena, pool_routine as *const () as usize, plan);
        if choices.is_some() {
            match m {
                PoolMatch::Forward { .. } => {
                    self.choices_written.insert(self.current);
                }
                PoolMatch::Backward { .. } => self.choices_read += 1,
            }
        }
        Ok(true)
    }

    /// Fails if the instruction being emitted reads a value a convolution left unstored
    /// (`ProgramCx::discarded`): only a gradient reading window choices may name one, so this
    /// is a bug in the JIT, stopped before it can give a wrong answer.
    pub(super) fn check_not_discarded(&self) -> Result<(), JitError> {
        let (inst, id) = self.current;
        let comp = self.module.computation(self.plan.instances[inst]);
        let instr = comp.get(id);
        match instr
            .operands()
            .iter()
            .find(|&&o| self.discarded.contains(&(inst, o)))
        {
            Some(&o) => Err(JitError::Invalid(format!(
                "{}: reads {}, which its convolution did not store",
                instr.name,
                comp.get(o).name
            ))),
            None => Ok(()),
        }
    }

    /// The window choices (`pool_choices.rs`) the pooling fusion being emitted writes (a
    /// forward pool the assignment gave them to) or reads (a gradient whose forward pool was
    /// emitted writing them).
    fn pool_choices_of(&self, m: &PoolMatch) -> Option<Addr> {
        let (inst, id) = self.current;
        match m {
            PoolMatch::Forward { .. } => self.choices_buffer(inst, id),
            PoolMatch::Backward { .. } => {
                let (&writer, _) =
                    self.plan
                        .side_outputs
                        .iter()
                        .find(|(&(i, w), &(reader, _))| {
                            i == inst && reader == id && self.choices_written.contains(&(i, w))
                        })?;
                self.choices_buffer(writer.0, writer.1)
            }
        }
    }
}

/// The byte size of output `k` of a tuple location.
fn out_bytes(out: &Loc, k: usize) -> usize {
    match out {
        Loc::Tuple(outs) => outs[k].as_array().map_or(0, |b| b.byte_size()),
        _ => 0,
    }
}
