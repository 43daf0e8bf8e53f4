//! Where the program's values live: every arena offset is the compiler's buffer assignment's
//! (`arena_plan.rs` states the JIT's needs to it), looked up by instruction instance for
//! values, scratch and loop-copy temporaries; constants live in the constant pool. Also the
//! in-line copies between buffers (loop state, conditional results).

use super::compile::ProgramCx;
use crate::jit::buffer::{Addr, Buffer, Loc};
use crate::jit::clif::lane_values::int_to_i64;
use crate::jit::clif::types::scalar_type;
use crate::jit::fused_kernels::reduce;
use crate::jit::JitError;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::{InstrId, Literal, Shape};
use tessel_compiler::passes::{Instance, LoopCopy};

impl ProgramCx<'_> {
    /// The arena offset of buffer `b` of the assignment.
    fn buffer_addr(&self, b: Option<usize>) -> Addr {
        // Zero-sized leaves have no buffer: nothing reads or writes them.
        Addr::Arena(b.map_or(0, |b| self.plan.buffers[b].offset.max(0) as usize))
    }

    /// Sets the instruction being emitted: its value's buffers and its scratch come from the
    /// assignment's entries for it.
    pub(super) fn begin_instruction(&mut self, inst: Instance, id: InstrId) {
        self.current = (inst, id);
        let scratch = self
            .plan
            .scratch_buffers
            .get(&(inst, id))
            .cloned()
            .unwrap_or_default();
        self.scratch = scratch
            .into_iter()
            .map(|b| self.buffer_addr(Some(b)))
            .collect();
        self.scratch.reverse();
    }

    /// The next scratch buffer the assignment planned for the instruction being emitted
    /// (scratch is asked for in the same order `arena_plan::scratch_requests` states it).
    pub(super) fn take_scratch(&mut self, bytes: usize) -> Result<Addr, JitError> {
        if bytes == 0 {
            return Ok(Addr::Arena(0));
        }
        self.scratch_log.push((self.current_name.clone(), bytes));
        self.scratch.pop().ok_or_else(|| {
            JitError::Invalid(format!(
                "{}: {bytes} bytes of scratch the buffer assignment did not plan",
                self.current_name
            ))
        })
    }

    /// The next scratch buffer when it was planned for a split reduce's partial result of
    /// `bytes` bytes (`arena_plan::split_reduce_partials`): where the result goes, between its
    /// guards (`reduce::partial_scratch_bytes`).
    pub(super) fn take_partial_scratch(&mut self, bytes: usize) -> Result<Addr, JitError> {
        let scratch = self.take_scratch(reduce::partial_scratch_bytes(bytes))?;
        Ok(reduce::partial_in(scratch))
    }

    /// Builds a routine's plan with the scratch space the assignment planned for it.
    pub(super) fn with_scratch<T>(
        &mut self,
        build: impl FnOnce(&mut dyn FnMut(usize) -> Addr) -> Result<T, JitError>,
    ) -> Result<T, JitError> {
        let mut missing = None;
        let plan = build(&mut |n: usize| match self.take_scratch(n) {
            Ok(a) => a,
            Err(e) => {
                missing = Some(e);
                Addr::Arena(0)
            }
        });
        match missing {
            Some(e) => Err(e),
            None => plan,
        }
    }

    /// The location the buffer assignment gives the value of the instruction being emitted.
    pub(super) fn alloc_loc(&mut self, shape: &Shape) -> Result<Loc, JitError> {
        let key = self.current;
        let buffers = self.plan.value_buffers.get(&key).cloned().ok_or_else(|| {
            JitError::Invalid(format!(
                "{}: the buffer assignment has no buffer for it",
                self.current_name
            ))
        })?;
        let mut next = buffers.into_iter();
        let loc = self.planned_loc(shape, &mut next)?;
        let offsets = loc
            .leaves()
            .iter()
            .filter_map(|b| match b.addr {
                Addr::Arena(off) if b.byte_size() > 0 => Some(off),
                _ => None,
            })
            .collect();
        self.placements.push((key, offsets));
        Ok(loc)
    }

    fn planned_loc(
        &self,
        shape: &Shape,
        next: &mut impl Iterator<Item = Option<usize>>,
    ) -> Result<Loc, JitError> {
        Ok(match shape {
            Shape::Array(a) => {
                scalar_type(a.element_type)?;
                if !a.is_static() {
                    return Err(JitError::Unsupported(format!("dynamic shape {shape}")));
                }
                let b = next.next().ok_or_else(|| {
                    JitError::Invalid(format!(
                        "{}: the buffer assignment has fewer buffers than the value",
                        self.current_name
                    ))
                })?;
                Loc::Array(Buffer {
                    addr: self.buffer_addr(b),
                    shape: a.clone(),
                })
            }
            Shape::Tuple(t) => Loc::Tuple(
                t.iter()
                    .map(|s| self.planned_loc(s, next))
                    .collect::<Result<_, _>>()?,
            ),
            Shape::Token => Loc::Token,
        })
    }

    /// The temporaries the assignment planned for a loop's state copy.
    pub(super) fn loop_copy_temps(&self, key: (Instance, InstrId, LoopCopy)) -> Vec<Addr> {
        let temps = self.plan.loop_copy_temps.get(&key);
        temps
            .into_iter()
            .flatten()
            .map(|&b| self.buffer_addr(Some(b)))
            .collect()
    }

    pub(super) fn const_loc(&mut self, lit: &Literal) -> Result<Loc, JitError> {
        Ok(match lit {
            Literal::Array(a) => {
                scalar_type(a.element_type())?;
                let addr = self.symbols.constant(&a.data.to_le_bytes());
                Loc::Array(Buffer {
                    addr: Addr::Absolute(addr),
                    shape: a.shape.clone(),
                })
            }
            Literal::Tuple(t) => Loc::Tuple(
                t.iter()
                    .map(|l| self.const_loc(l))
                    .collect::<Result<_, _>>()?,
            ),
            Literal::Token => Loc::Token,
        })
    }

    pub(super) fn addr_value(&self, fb: &mut FunctionBuilder, arena: Value, a: Addr) -> Value {
        match a {
            Addr::Arena(off) => fb.ins().iadd_imm_s(arena, off as i64),
            Addr::Absolute(p) => self.symbols.value(fb, p),
        }
    }

    pub(super) fn copy_buffer(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        dst: Addr,
        src: Addr,
        bytes: usize,
    ) {
        if dst == src || bytes == 0 {
            return;
        }
        let d = self.addr_value(fb, arena, dst);
        let s = self.addr_value(fb, arena, src);
        let n = fb.ins().iconst(types::I64, bytes as i64);
        let config = self.isa.frontend_config();
        fb.call_memcpy(config, d, s, n);
    }

    /// Sets `bytes` bytes at `dst` to zero.
    pub(super) fn zero_buffer(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        dst: Addr,
        bytes: usize,
    ) {
        if bytes == 0 {
            return;
        }
        let d = self.addr_value(fb, arena, dst);
        let n = fb.ins().iconst(types::I64, bytes as i64);
        let zero = fb.ins().iconst(types::I8, 0);
        let config = self.isa.frontend_config();
        fb.call_memset(config, d, zero, n);
    }

    /// Copies every array of `src` into the same position of `dst`, through `temps` (planned
    /// by the buffer assignment, in element order) when a source buffer is also a different
    /// destination (a permutation of the loop state).
    pub(super) fn copy_loc(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        dst: &Loc,
        src: &Loc,
        temps: Vec<Addr>,
    ) -> Result<(), JitError> {
        let d: Vec<Buffer> = dst.leaves().into_iter().cloned().collect();
        let s: Vec<Buffer> = src.leaves().into_iter().cloned().collect();
        if d.len() != s.len() {
            return Err(JitError::Invalid(
                "loop state and body result differ in shape".into(),
            ));
        }
        let dst_addrs: Vec<Addr> = d
            .iter()
            .filter(|b| b.byte_size() > 0)
            .map(|b| b.addr)
            .collect();
        let mut temps = temps.into_iter();
        let mut srcs: Vec<Addr> = Vec::with_capacity(s.len());
        for (i, b) in s.iter().enumerate() {
            if b.byte_size() > 0 && b.addr != d[i].addr && dst_addrs.contains(&b.addr) {
                let tmp = temps.next().ok_or_else(|| {
                    JitError::Invalid(
                        "a state copy needs a temporary the buffer assignment did not plan".into(),
                    )
                })?;
                self.copy_buffer(fb, arena, tmp, b.addr, b.byte_size());
                srcs.push(tmp);
            } else {
                srcs.push(b.addr);
            }
        }
        for (i, b) in d.iter().enumerate() {
            self.copy_buffer(fb, arena, b.addr, srcs[i], b.byte_size());
        }
        Ok(())
    }

    pub(super) fn load_scalar_i64(
        &self,
        fb: &mut FunctionBuilder,
        arena: Value,
        b: &Buffer,
    ) -> Result<Value, JitError> {
        let a = self.addr_value(fb, arena, b.addr);
        let ty = scalar_type(b.shape.element_type)?;
        let v = fb.ins().load(ty, MemFlagsData::new().with_notrap(), a, 0);
        Ok(int_to_i64(fb, v, b.shape.element_type))
    }
}
