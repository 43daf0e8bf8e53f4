//! Calls from the program function into Rust: routines `f(plan, arena) -> status` whose
//! non-zero status leaves the program, and the profile marks. Plans, functions and counters are
//! reached through symbols (`clif/symbols.rs`), never as immediates.

use super::compile::ProgramCx;
use super::emit_instruction::Walk;
use crate::jit::buffer::Loc;
use crate::jit::host::collectives::{collective_routine, CollectivePlan};
use crate::jit::host::gather_scatter::{gather_routine, scatter_routine, GatherPlan, ScatterPlan};
use crate::jit::host::infeed_outfeed::{infeed_routine, outfeed_routine, InfeedPlan, OutfeedPlan};
use crate::jit::host::profile::{tessel_profile_mark, ProfileCounters};
use crate::jit::routines::conv_select::{plan_convolution, ConvPrecision, ConvRoutine};
use crate::jit::routines::dot::{dot_routine, DotPlan};
use crate::jit::JitError;
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, Signature, Value};
use cranelift_frontend::FunctionBuilder;
use std::any::Any;
use std::sync::Arc;
use tessel_compiler::ir::{InstrId, Instruction, Module, Op};

impl ProgramCx<'_> {
    /// Keeps `plan` alive as long as the program and emits the call `f(plan, arena)`.
    pub(super) fn call_plan<P: Any + Send + Sync>(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        f: usize,
        plan: P,
    ) {
        self.call_boxed_plan(fb, arena, f, Box::new(plan));
    }

    /// [`Self::call_plan`] for a plan already boxed: `f` receives a pointer to the boxed value.
    pub(super) fn call_boxed_plan(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        f: usize,
        plan: Box<dyn Any + Send + Sync>,
    ) {
        let p = &*plan as *const (dyn Any + Send + Sync) as *const () as usize;
        self.symbols.name("plan", p, std::mem::size_of_val(&*plan));
        self.plans.push(plan);
        self.routine(fb, arena, f, p);
    }

    /// Calls a Rust routine `f(plan, arena) -> status`; a non-zero status leaves the program.
    pub(super) fn routine(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        f: usize,
        plan: usize,
    ) {
        let sigref = match self.routine_sig {
            Some(s) => s,
            None => {
                let mut sig = Signature::new(self.call_conv);
                sig.params.push(AbiParam::new(types::I64));
                sig.params.push(AbiParam::new(types::I64));
                sig.returns.push(AbiParam::new(types::I32));
                let s = fb.import_signature(sig);
                self.routine_sig = Some(s);
                s
            }
        };
        let callee = self.symbols.function(fb, f);
        let p = self.symbols.value(fb, plan);
        let call = fb.ins().call_indirect(sigref, callee, &[p, arena]);
        let status = fb.inst_results(call)[0];
        if let Some(prof) = &mut self.profile {
            let slot = prof.add_slot(&self.current_name, self.current_op);
            self.profile_mark(fb, slot);
        }
        let err = *self.error_block.get_or_insert_with(|| {
            let b = fb.create_block();
            fb.append_block_param(b, types::I32);
            b
        });
        let cont = fb.create_block();
        fb.ins().brif(status, err, &[status.into()], cont, &[]);
        fb.seal_block(cont);
        fb.switch_to_block(cont);
    }

    /// Emits a call to [`tessel_profile_mark`] when profiling (see `profile.rs`).
    pub(super) fn profile_mark(&mut self, fb: &mut FunctionBuilder, slot: u64) {
        let Some(p) = &self.profile else { return };
        let counters = &**p as *const ProfileCounters as usize;
        self.symbols
            .name("profile", counters, std::mem::size_of::<ProfileCounters>());
        let sigref = *self.mark_sig.get_or_insert_with(|| {
            let mut sig = Signature::new(self.call_conv);
            sig.params.push(AbiParam::new(types::I64));
            sig.params.push(AbiParam::new(types::I64));
            fb.import_signature(sig)
        });
        let callee = self
            .symbols
            .function(fb, tessel_profile_mark as *const () as usize);
        let c = self.symbols.value(fb, counters);
        let s = fb.ins().iconst(types::I64, slot as i64);
        fb.ins().call_indirect(sigref, callee, &[c, s]);
    }

    /// The module, shared by the plans of the host routines that evaluate its computations
    /// (collectives, scatter, sort); made on first use.
    pub(super) fn shared_module(&mut self) -> Arc<Module> {
        let module = self.module;
        self.shared_module
            .get_or_insert_with(|| Arc::new(module.clone()))
            .clone()
    }

    /// A collective: a host routine that meets the replica group (see `collectives.rs`); the
    /// replica count is only known when the program runs.
    pub(super) fn emit_collective(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        walk: &Walk,
        id: InstrId,
    ) -> Result<Loc, JitError> {
        let instr = walk.comp.get(id);
        let operands = walk.arrays(instr)?;
        let out = self.alloc_loc(&instr.shape)?;
        let shared = self.shared_module();
        let plan = CollectivePlan::new(&instr.name, shared, walk.cid, id, operands, &out)?;
        self.call_plan(fb, arena, collective_routine as *const () as usize, plan);
        Ok(out)
    }

    /// A gather or a scatter: a host routine over the arena (see `gather_scatter.rs`).
    pub(super) fn emit_gather_scatter(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        walk: &Walk,
        id: InstrId,
    ) -> Result<Loc, JitError> {
        let instr = walk.comp.get(id);
        let out = self.alloc_loc(&instr.shape)?;
        match &instr.op {
            Op::Gather {
                dims, slice_sizes, ..
            } => {
                let (a, i) = (walk.array(instr, 0)?, walk.array(instr, 1)?);
                let threads = self.options.gemm_threads;
                let plan = GatherPlan::new(&instr.name, dims, slice_sizes, a, i, &out, threads)?;
                self.call_plan(fb, arena, gather_routine as *const () as usize, plan);
            }
            Op::Scatter { .. } => {
                if instr.operands().len() != 3 {
                    return Err(JitError::Unsupported(format!(
                        "{}: a scatter of several arrays",
                        instr.name
                    )));
                }
                let operands = [
                    walk.array(instr, 0)?,
                    walk.array(instr, 1)?,
                    walk.array(instr, 2)?,
                ];
                let shared = self.shared_module();
                let threads = self.options.gemm_threads;
                let plan =
                    ScatterPlan::new(&instr.name, shared, walk.cid, id, operands, &out, threads)?;
                self.call_plan(fb, arena, scatter_routine as *const () as usize, plan);
            }
            _ => {
                return Err(JitError::Invalid(format!(
                    "{} is not a gather or scatter",
                    instr.name
                )))
            }
        }
        Ok(out)
    }

    /// A dot: the GEMM routine over a plan of the operands' buffers.
    pub(super) fn emit_dot(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        walk: &Walk,
        instr: &Instruction,
    ) -> Result<Loc, JitError> {
        let Op::Dot(dnums) = &instr.op else {
            return Err(JitError::Invalid(format!("{} is not a dot", instr.name)));
        };
        let (l, r) = (walk.array(instr, 0)?, walk.array(instr, 1)?);
        let out = self.alloc_loc(&instr.shape)?;
        let oaddr = out.as_array().expect("array").addr;
        let (backend, threads) = (self.options.gemm, self.options.gemm_threads);
        let plan = self.with_scratch(|scratch| {
            DotPlan::new(
                &instr.name,
                dnums,
                (l.addr, &l.shape),
                (r.addr, &r.shape),
                oaddr,
                backend,
                threads,
                scratch,
            )
        })?;
        self.call_plan(fb, arena, dot_routine as *const () as usize, plan);
        Ok(out)
    }

    /// A convolution: the routine `conv_select.rs` chooses, over a plan of the buffers; with
    /// the convolution that runs beside it, if any (`conv_pair.rs`).
    pub(super) fn emit_convolution(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        walk: &Walk,
        id: InstrId,
    ) -> Result<Loc, JitError> {
        if let Some(loc) = self.ran_beside(walk, id) {
            return Ok(loc);
        }
        let (conv, out) = self.plan_conv(walk, id)?;
        match self.pair_second(walk, id) {
            Some(second) => {
                let other = self.plan_second(walk, second)?;
                self.call_conv_pair(fb, arena, walk, [conv, other], [id, second]);
            }
            None => self.call_boxed_plan(fb, arena, conv.routine, conv.plan),
        }
        Ok(out)
    }

    /// Plans convolution `id` (the instruction being emitted) over its buffers, with the bias
    /// add and max-pool its routine takes; on one thread when it is paired.
    pub(super) fn plan_conv(
        &mut self,
        walk: &Walk,
        id: InstrId,
    ) -> Result<(ConvRoutine, Loc), JitError> {
        let instr = walk.comp.get(id);
        let Op::Convolution(conv) = &instr.op else {
            return Err(JitError::Invalid(format!(
                "{} is not a convolution",
                instr.name
            )));
        };
        let (l, r) = (walk.array(instr, 0)?, walk.array(instr, 1)?);
        let out = self.alloc_loc(&instr.shape)?;
        let ob = out.as_array().expect("array").clone();
        let paired = self
            .conv_pairs
            .pair_of(self.module, walk.cid, id, self.options)
            .is_some();
        let options = &if paired {
            self.options.one_thread()
        } else {
            self.options.clone()
        };
        let precision = ConvPrecision::of(&instr.extra_attrs);
        let bias_add = self.bias_add_after(walk, id);
        let mut conv = self.with_scratch(|scratch| {
            plan_convolution(
                &instr.name,
                conv,
                precision,
                (l.addr, &l.shape),
                (r.addr, &r.shape),
                (ob.addr, &ob.shape),
                options,
                scratch,
            )
        })?;
        let mut folded_bias = None;
        if let Some((fusion, bias)) = bias_add {
            if conv.take_bias(bias) {
                self.folded_bias_adds.insert((walk.inst, fusion));
                folded_bias = Some(fusion);
            }
        }
        if let Some((fusion, pool, to, bias)) = self.pool_after(walk, id, folded_bias) {
            if conv.take_pool(pool, to, bias) {
                self.folded_pools.insert((walk.inst, fusion));
                if to.choices.is_some() {
                    self.choices_written.insert((walk.inst, fusion));
                }
                if to.discard_output {
                    self.discarded
                        .insert((walk.inst, folded_bias.unwrap_or(id)));
                }
            }
        }
        Ok((conv, out))
    }

    /// An infeed: the host routine copies the replica's next value into the new buffers.
    pub(super) fn emit_infeed(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        instr: &Instruction,
    ) -> Result<Loc, JitError> {
        let out = self.alloc_loc(&instr.shape)?;
        let plan = InfeedPlan::new(&instr.name, &out)?;
        self.call_plan(fb, arena, infeed_routine as *const () as usize, plan);
        Ok(out)
    }

    /// An outfeed: the host routine hands the operand's value over to the host.
    pub(super) fn emit_outfeed(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        walk: &Walk,
        instr: &Instruction,
    ) -> Result<Loc, JitError> {
        let plan = OutfeedPlan::new(&instr.name, walk.operand(instr, 0)?);
        self.call_plan(fb, arena, outfeed_routine as *const () as usize, plan);
        Ok(Loc::Token)
    }
}
