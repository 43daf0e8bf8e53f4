//! Where the program's values live: arena blocks allocated as values are produced and freed
//! after their last reader (live references per block), scratch space of one routine call,
//! constants, and the in-line copies between buffers (loop state, conditional results).

use super::compile::ProgramCx;
use crate::jit::buffer::{Addr, Buffer, Loc};
use crate::jit::clif::element_ops::int_to_i64;
use crate::jit::clif::types::scalar_type;
use crate::jit::JitError;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::{Literal, Shape};

impl ProgramCx<'_> {
    pub(super) fn alloc(&mut self, bytes: usize) -> Addr {
        Addr::Arena(self.layout.alloc(bytes))
    }

    pub(super) fn retain(&mut self, loc: &Loc) {
        for b in loc.leaves() {
            if let Addr::Arena(off) = b.addr {
                *self.refs.entry(off).or_insert(0) += 1;
            }
        }
    }

    pub(super) fn release(&mut self, loc: &Loc) {
        for b in loc.leaves() {
            if let Addr::Arena(off) = b.addr {
                let r = self.refs.entry(off).or_insert(0);
                *r = r.saturating_sub(1);
                if *r == 0 {
                    self.refs.remove(&off);
                    self.layout.free(off);
                }
            }
        }
    }

    /// Builds a routine's plan with scratch space that only that routine call uses: the
    /// scratch is allocated while planning and freed right after, so later values reuse it.
    pub(super) fn with_scratch<T>(
        &mut self,
        build: impl FnOnce(&mut dyn FnMut(usize) -> Addr) -> Result<T, JitError>,
    ) -> Result<T, JitError> {
        let mut used = Vec::new();
        let plan = build(&mut |n: usize| {
            let a = self.alloc(n);
            used.push(a);
            a
        });
        self.free_scratch(used);
        plan
    }

    /// Frees scratch space used by one routine call only.
    pub(super) fn free_scratch(&mut self, scratch: Vec<Addr>) {
        for a in scratch {
            if let Addr::Arena(off) = a {
                self.layout.free(off);
            }
        }
    }

    pub(super) fn alloc_loc(&mut self, shape: &Shape) -> Result<Loc, JitError> {
        Ok(match shape {
            Shape::Array(a) => {
                scalar_type(a.element_type)?;
                if !a.is_static() {
                    return Err(JitError::Unsupported(format!("dynamic shape {shape}")));
                }
                Loc::Array(Buffer {
                    addr: self.alloc(a.byte_size() as usize),
                    shape: a.clone(),
                })
            }
            Shape::Tuple(t) => Loc::Tuple(
                t.iter()
                    .map(|s| self.alloc_loc(s))
                    .collect::<Result<_, _>>()?,
            ),
            Shape::Token => Loc::Token,
        })
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

    /// Copies every array of `src` into the same position of `dst`, through temporaries when
    /// a source buffer is also a different destination (a permutation of the loop state).
    pub(super) fn copy_loc(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        dst: &Loc,
        src: &Loc,
    ) -> Result<(), JitError> {
        let d: Vec<Buffer> = dst.leaves().into_iter().cloned().collect();
        let s: Vec<Buffer> = src.leaves().into_iter().cloned().collect();
        if d.len() != s.len() {
            return Err(JitError::Invalid(
                "loop state and body result differ in shape".into(),
            ));
        }
        let dst_addrs: Vec<Addr> = d.iter().map(|b| b.addr).collect();
        let mut srcs: Vec<Addr> = Vec::with_capacity(s.len());
        let mut temps = Vec::new();
        for (i, b) in s.iter().enumerate() {
            if b.addr != d[i].addr && dst_addrs.contains(&b.addr) {
                let tmp = self.alloc(b.byte_size());
                self.copy_buffer(fb, arena, tmp, b.addr, b.byte_size());
                srcs.push(tmp);
                temps.push(tmp);
            } else {
                srcs.push(b.addr);
            }
        }
        for (i, b) in d.iter().enumerate() {
            self.copy_buffer(fb, arena, b.addr, srcs[i], b.byte_size());
        }
        self.free_scratch(temps);
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
