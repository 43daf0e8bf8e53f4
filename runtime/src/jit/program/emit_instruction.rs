//! One computation, instruction by instruction: the walk in dependency order with its
//! bookkeeping (locations, materialized values, references released after the last reader),
//! and the dispatch of each instruction to the emitter of its op class. Tuples,
//! get-tuple-element, reshape, bitcast and copy only rename buffers.

use super::compile::ProgramCx;
use crate::jit::buffer::{Buffer, Loc};
use crate::jit::clif::value_at_index::Leaf;
use crate::jit::fused_kernels::fusion_plan;
use crate::jit::host::sort::{sort_routine, SortPlan};
use crate::jit::host::threefry::{threefry_routine, ThreefryPlan};
use crate::jit::host::topk::{topk_routine, TopKPlan};
use crate::jit::JitError;
use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;
use std::collections::HashMap;
use tessel_compiler::ir::{Computation, ComputationId, InstrId, Instruction, Op};
use tessel_compiler::passes::threefry_rounds::THREEFRY_ROUNDS_TARGET;
use tessel_compiler::passes::Instance;

/// The state of one computation's walk.
pub(super) struct Walk<'c> {
    /// This emission of the computation, as the buffer assignment numbers them.
    pub inst: Instance,
    pub cid: ComputationId,
    pub comp: &'c Computation,
    /// The location of every value computed so far.
    pub locs: HashMap<InstrId, Loc>,
    /// Every materialized array so far: what a kernel reads instead of recomputing.
    pub materialized: HashMap<InstrId, Leaf>,
    /// The values whose last reader is the instruction at each position of the walk.
    pub dying: HashMap<usize, Vec<InstrId>>,
}

impl Walk<'_> {
    /// The location of operand `k` of `instr`.
    pub(super) fn operand(&self, instr: &Instruction, k: usize) -> Result<&Loc, JitError> {
        self.locs
            .get(&instr.operands()[k])
            .ok_or_else(|| JitError::Invalid(format!("{}: operand {k} not computed", instr.name)))
    }

    /// The buffer of array operand `k` of `instr`.
    pub(super) fn array(&self, instr: &Instruction, k: usize) -> Result<Buffer, JitError> {
        self.operand(instr, k)?.as_array().cloned().ok_or_else(|| {
            JitError::Invalid(format!("{}: operand {k} is not an array", instr.name))
        })
    }

    /// The buffers of all operands of `instr`, each an array.
    pub(super) fn arrays(&self, instr: &Instruction) -> Result<Vec<Buffer>, JitError> {
        (0..instr.operands().len())
            .map(|k| self.array(instr, k))
            .collect()
    }

    /// The locations of all operands of `instr`.
    pub(super) fn operands(&self, instr: &Instruction) -> Result<Vec<Loc>, JitError> {
        (0..instr.operands().len())
            .map(|k| self.operand(instr, k).cloned())
            .collect()
    }
}

impl ProgramCx<'_> {
    /// Emits computation `cid` on `args`, its values in the buffers the assignment gives
    /// this emission (the next instance: the walk meets them in the assignment's order).
    pub(super) fn emit_computation(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        cid: ComputationId,
        args: &[Loc],
    ) -> Result<Loc, JitError> {
        let comp = self.module.computation(cid);
        let inst = self.next_instance;
        self.next_instance += 1;
        if self.plan.instances.get(inst) != Some(&cid) {
            return Err(JitError::Invalid(format!(
                "{}: emitted out of the buffer assignment's order",
                comp.name
            )));
        }
        let fused = fusion_plan::plan(comp);
        let mut walk = Walk {
            inst,
            cid,
            comp,
            locs: HashMap::new(),
            materialized: HashMap::new(),
            dying: fusion_plan::last_uses(comp, &fused),
        };
        let order: Vec<InstrId> = comp
            .post_order()
            .into_iter()
            .filter(|id| !fused.contains(id))
            .collect();
        for (pos, &id) in order.iter().enumerate() {
            let instr = comp.get(id);
            self.current_op = instr.op.opcode_name();
            self.current_name.clone_from(&instr.name);
            let loc = match self.renamed_value(&walk, instr, args)? {
                Some(loc) => loc,
                None => {
                    self.begin_instruction(inst, id);
                    let loc = self.emit_instruction(fb, arena, &walk, id)?;
                    if !self.scratch.is_empty() {
                        return Err(JitError::Invalid(format!(
                            "{}: scratch planned by the buffer assignment and not used",
                            instr.name
                        )));
                    }
                    loc
                }
            };
            if let Loc::Array(b) = &loc {
                walk.materialized.insert(
                    id,
                    Leaf {
                        addr: b.addr,
                        shape: b.shape.clone(),
                    },
                );
            }
            walk.locs.insert(id, loc);
            // A dead value is never read again: kernels stop looking at it.
            for dead in walk.dying.get(&pos).into_iter().flatten() {
                walk.materialized.remove(dead);
            }
        }
        walk.locs
            .remove(&comp.root())
            .ok_or_else(|| JitError::Invalid(format!("{} has no root", comp.name)))
    }

    /// The location of an instruction that emits no code (a parameter, a constant, or a new
    /// name for operand buffers); `None` for any other instruction.
    fn renamed_value(
        &mut self,
        walk: &Walk,
        instr: &Instruction,
        args: &[Loc],
    ) -> Result<Option<Loc>, JitError> {
        Ok(Some(match &instr.op {
            Op::Parameter(n) => args.get(*n as usize).cloned().ok_or_else(|| {
                JitError::Invalid(format!("{}: no argument for parameter {n}", walk.comp.name))
            })?,
            Op::Constant(lit) => self.const_loc(lit)?,
            Op::Tuple => Loc::Tuple(walk.operands(instr)?),
            Op::GetTupleElement { index } => match walk.operand(instr, 0)? {
                Loc::Tuple(t) => t.get(*index as usize).cloned().ok_or_else(|| {
                    JitError::Invalid(format!("{}: tuple index out of range", instr.name))
                })?,
                _ => {
                    return Err(JitError::Invalid(format!(
                        "{}: get-tuple-element of a non-tuple",
                        instr.name
                    )))
                }
            },
            Op::Reshape | Op::Bitcast | Op::Copy if instr.shape.is_array() => {
                let b = walk.array(instr, 0)?;
                let shape = instr.shape.as_array().cloned().expect("array");
                if shape.byte_size() != b.shape.byte_size() {
                    return Err(JitError::Invalid(format!(
                        "{}: reshape changes the size",
                        instr.name
                    )));
                }
                Loc::Array(Buffer {
                    addr: b.addr,
                    shape,
                })
            }
            Op::Copy => walk.operand(instr, 0)?.clone(),
            Op::AfterAll => Loc::Token,
            _ => return Ok(None),
        }))
    }

    /// Emits the code of instruction `id` by op class: a host
    /// routine, control flow, or a kernel.
    fn emit_instruction(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        walk: &Walk,
        id: InstrId,
    ) -> Result<Loc, JitError> {
        let instr = walk.comp.get(id);
        match &instr.op {
            Op::AllReduce { .. }
            | Op::AllGather { .. }
            | Op::ReduceScatter { .. }
            | Op::CollectivePermute { .. }
            | Op::AllToAll { .. }
            | Op::ReplicaId
            | Op::PartitionId => self.emit_collective(fb, arena, walk, id),
            Op::Call { to_apply } => {
                let a = walk.operands(instr)?;
                self.emit_computation(fb, arena, *to_apply, &a)
            }
            Op::While { condition, body } => {
                let init = walk.operand(instr, 0)?.clone();
                self.emit_while(
                    fb,
                    arena,
                    (walk.inst, id),
                    &instr.shape,
                    init,
                    *condition,
                    *body,
                )
            }
            Op::Conditional { branches } => {
                let a = walk.operands(instr)?;
                self.emit_conditional(fb, arena, &instr.shape, &a, branches)
            }
            Op::Dot(_) | Op::Convolution(_) if has_zero_extent(instr, walk)? => {
                // An empty result needs no code; an empty operand (a zero contraction or
                // feature dimension) makes every product sum empty: zeros. The routines'
                // plans divide by these extents.
                let out = self.alloc_loc(&instr.shape)?;
                // The routine's planned scratch goes unused.
                self.scratch.clear();
                if let Loc::Array(b) = &out {
                    self.zero_buffer(fb, arena, b.addr, b.byte_size());
                }
                Ok(out)
            }
            Op::Dot(_) => self.emit_dot(fb, arena, walk, instr),
            Op::Gather { .. } | Op::Scatter { .. } => self.emit_gather_scatter(fb, arena, walk, id),
            Op::Convolution(_) => self.emit_convolution(fb, arena, walk, id),
            Op::Infeed { .. } => self.emit_infeed(fb, arena, instr),
            Op::TopK { k, largest } => {
                let operand = walk.array(instr, 0)?;
                let out = self.alloc_loc(&instr.shape)?;
                let plan = TopKPlan::new(&instr.name, operand, &out, *k, *largest)
                    .map_err(JitError::Invalid)?;
                self.call_plan(fb, arena, topk_routine as *const () as usize, plan);
                Ok(out)
            }
            Op::Sort {
                dimension,
                to_apply,
                ..
            } => {
                let operands = walk.arrays(instr)?;
                let out = self.alloc_loc(&instr.shape)?;
                let shared = self.shared_module();
                let plan =
                    SortPlan::new(&instr.name, shared, *to_apply, *dimension, operands, &out)
                        .map_err(JitError::Invalid)?;
                self.call_plan(fb, arena, sort_routine as *const () as usize, plan);
                Ok(out)
            }
            Op::Outfeed { .. } => self.emit_outfeed(fb, arena, walk, instr),
            Op::CustomCall { target, .. } if target == THREEFRY_ROUNDS_TARGET => {
                let operands = walk.arrays(instr)?;
                let out = self.alloc_loc(&instr.shape)?;
                let plan =
                    ThreefryPlan::new(&instr.name, operands, &out, self.options.gemm_threads)
                        .map_err(JitError::Invalid)?;
                self.call_plan(fb, arena, threefry_routine as *const () as usize, plan);
                Ok(out)
            }
            Op::CustomCall { .. } => Err(JitError::Unsupported(format!(
                "{} ({})",
                instr.op.opcode_name(),
                instr.name
            ))),
            Op::Fusion { .. }
                if self.folded_bias_adds.contains(&(walk.inst, id))
                    || self.folded_pools.contains(&(walk.inst, id)) =>
            {
                // The convolution before it wrote its result into this buffer
                // (`conv_bias.rs`, `conv_pool.rs`).
                self.alloc_loc(&instr.shape)
            }
            Op::Fusion { calls, .. } => {
                let a = walk.operands(instr)?;
                let out = self.alloc_loc(&instr.shape)?;
                self.emit_fusion(fb, arena, &instr.name, *calls, &a, out)
            }
            // Any other op is a kernel rooted at this instruction; it reads the materialized
            // values and recomputes the fused instructions in between. Its buffer may be one
            // it reads (the assignment's in-place rule, `jit/arena_plan.rs`).
            _ => {
                let out = self.alloc_loc(&instr.shape)?;
                let leaves = walk.materialized.clone();
                self.emit_kernel_for(fb, arena, &instr.name, walk.cid, id, leaves, &out)?;
                Ok(out)
            }
        }
    }
}

/// Whether `instr`'s result or one of its array operands has no elements.
fn has_zero_extent(instr: &Instruction, walk: &Walk) -> Result<bool, JitError> {
    let empty = |shape: &tessel_compiler::ir::ArrayShape| shape.element_count() == 0;
    if instr.shape.as_array().is_some_and(empty) {
        return Ok(true);
    }
    for k in 0..instr.operands().len() {
        if walk
            .operand(instr, k)?
            .as_array()
            .is_some_and(|b| empty(&b.shape))
        {
            return Ok(true);
        }
    }
    Ok(false)
}
