//! The elemental emitter: the value of an instruction at an index, as CLIF.
//!
//! A kernel is any computation of elementwise and shape ops. Its loop nest asks for the root's
//! value at each output index; this emitter walks the expression back to the leaves (values
//! read from buffers, constants, iota), mapping the index through broadcast, transpose,
//! reshape, slice, pad, ... exactly as XLA's elemental IR emitter does.
//!
//! An index is either a multi-index (one `i64` per dimension) or a linear index (reshape keeps
//! the row-major position and nothing else). In 4-lane code every index component carries a
//! compile-time lane coefficient: lane `l` is at `base + l * coef`. A leaf whose linear
//! coefficient is 1 is one vector load, 0 a splat, anything else a 4-element gather. Where a
//! lane-varying index must be split into dimensions (a linear index meeting a broadcast, or a
//! pad's bounds), the subtree is evaluated lane by lane.

use super::element_ops::{self, Libcalls};
use super::types::{is_low_precision, scalar_type, value_type};
use super::{convert, lane_values, low_precision};
use crate::jit::buffer::Addr;
use crate::jit::JitError;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;
use smallvec::SmallVec;
use std::collections::HashMap;
use tessel_compiler::ir::{
    ArrayShape, BinaryOp, Computation, ComputationId, ElementType, InstrId, Module, Op,
};

/// One index component: `base + lane * coef`.
pub(crate) type Comp = (Value, i64);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Index {
    Multi(SmallVec<[Comp; 4]>),
    Linear(Comp),
}

/// Where a kernel's leaf values come from.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    pub addr: Addr,
    pub shape: ArrayShape,
}

/// Memory flags for buffer accesses: never trap (every access is in bounds by construction).
pub(crate) fn mem() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

pub(crate) struct Elemental<'a, 'f> {
    pub fb: &'a mut FunctionBuilder<'f>,
    pub module: &'a Module,
    pub comp: &'a Computation,
    pub leaves: &'a HashMap<InstrId, Leaf>,
    pub arena: Value,
    pub has_fma: bool,
    /// Rust functions for ops with no CLIF form; their symbols also name constants.
    pub libcalls: Libcalls<'a>,
    cache: HashMap<(InstrId, Index, u32), Value>,
    base_addr: HashMap<Addr, Value>,
}

impl<'a, 'f> Elemental<'a, 'f> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        fb: &'a mut FunctionBuilder<'f>,
        module: &'a Module,
        comp: &'a Computation,
        leaves: &'a HashMap<InstrId, Leaf>,
        arena: Value,
        has_fma: bool,
        libcalls: Libcalls<'a>,
    ) -> Self {
        Elemental {
            fb,
            module,
            comp,
            leaves,
            arena,
            has_fma,
            libcalls,
            cache: HashMap::new(),
            base_addr: HashMap::new(),
        }
    }

    /// Records `v` as the value of `id` at `idx` for `lanes` lanes in the current block: a
    /// later [`Self::emit`] of the same instruction at the same index uses it (a kernel driven
    /// by another instruction's loop provides that instruction's value this way).
    pub(crate) fn provide(&mut self, id: InstrId, idx: &Index, lanes: u32, v: Value) {
        self.cache.insert((id, idx.clone(), lanes), v);
    }

    /// Forgets values computed in another block (call when starting a new loop body).
    pub(crate) fn new_scope(&mut self) {
        self.cache.clear();
    }

    /// Computes every leaf's base address in the current block (call in the entry block so
    /// that the addresses dominate all loops).
    pub(crate) fn hoist_addresses(&mut self, extra: &[Addr]) {
        // In instruction order, not the map's: one module gives the same CLIF every compile.
        let mut leaves: Vec<(&InstrId, &Leaf)> = self.leaves.iter().collect();
        leaves.sort_by_key(|(id, _)| **id);
        let mut addrs: Vec<Addr> = leaves.into_iter().map(|(_, l)| l.addr).collect();
        addrs.extend_from_slice(extra);
        for a in addrs {
            if !self.base_addr.contains_key(&a) {
                let v = self.addr_value(a);
                self.base_addr.insert(a, v);
            }
        }
    }

    fn addr_value(&mut self, a: Addr) -> Value {
        match a {
            Addr::Arena(off) => self.fb.ins().iadd_imm_s(self.arena, off as i64),
            Addr::Absolute(p) => self.libcalls.symbols.value(self.fb, p),
        }
    }

    pub(crate) fn base(&mut self, a: Addr) -> Value {
        if let Some(&v) = self.base_addr.get(&a) {
            return v;
        }
        let v = self.addr_value(a);
        self.base_addr.insert(a, v);
        v
    }

    pub(crate) fn shape(&self, id: InstrId) -> Result<&'a ArrayShape, JitError> {
        let comp: &'a Computation = self.comp;
        comp.get(id).shape.as_array().ok_or_else(|| {
            JitError::Unsupported(format!(
                "{} has a non-array shape inside a kernel",
                comp.get(id).name
            ))
        })
    }

    pub(crate) fn iconst(&mut self, v: i64) -> Value {
        self.fb.ins().iconst(types::I64, v)
    }

    /// A linear index of `shape` at a multi-index.
    pub(crate) fn linearize(&mut self, comps: &[Comp], shape: &ArrayShape) -> Comp {
        let strides = shape.strides();
        let mut base: Option<Value> = None;
        let mut coef = 0i64;
        for (k, &(v, c)) in comps.iter().enumerate() {
            let s = strides[k];
            if shape.dims[k] == 1 {
                continue;
            }
            coef += c * s;
            let term = if s == 1 {
                v
            } else {
                self.fb.ins().imul_imm_s(v, s)
            };
            base = Some(match base {
                None => term,
                Some(b) => self.fb.ins().iadd(b, term),
            });
        }
        let base = base.unwrap_or_else(|| self.iconst(0));
        (base, coef)
    }

    /// Splits a linear index into dimensions, or `None` when lanes would cross rows.
    fn delinearize(
        &mut self,
        lin: Comp,
        shape: &ArrayShape,
        lanes: u32,
    ) -> Option<SmallVec<[Comp; 4]>> {
        let rank = shape.rank();
        let (b, c) = lin;
        if rank == 0 {
            return Some(SmallVec::new());
        }
        if rank == 1 {
            return Some(smallvec::smallvec![(b, c)]);
        }
        if lanes > 1 && c != 0 {
            return None;
        }
        let strides = shape.strides();
        let mut out = SmallVec::new();
        for k in 0..rank {
            let mut v = b;
            if strides[k] != 1 {
                v = self.fb.ins().udiv_imm_s(v, strides[k]);
            }
            if k > 0 {
                v = self.fb.ins().urem_imm_s(v, shape.dims[k].max(1));
            }
            out.push((v, 0));
        }
        Some(out)
    }

    /// `idx` as one component per dimension of `shape`, or `None` when lanes would cross rows.
    pub(crate) fn multi(
        &mut self,
        idx: &Index,
        shape: &ArrayShape,
        lanes: u32,
    ) -> Option<SmallVec<[Comp; 4]>> {
        match idx {
            Index::Multi(m) => Some(m.clone()),
            Index::Linear(l) => self.delinearize(*l, shape, lanes),
        }
    }

    fn linear(&mut self, idx: &Index, shape: &ArrayShape) -> Comp {
        match idx {
            Index::Linear(l) => *l,
            Index::Multi(m) => self.linearize(m, shape),
        }
    }

    /// The value of `id` at `idx`, for `lanes` lanes.
    pub(crate) fn emit(&mut self, id: InstrId, idx: &Index, lanes: u32) -> Result<Value, JitError> {
        let key = (id, idx.clone(), lanes);
        if let Some(&v) = self.cache.get(&key) {
            return Ok(v);
        }
        let v = match self.emit_uncached(id, idx, lanes)? {
            Some(v) => v,
            None => self.lane_by_lane(id, idx)?,
        };
        self.cache.insert(key, v);
        Ok(v)
    }

    /// Evaluates `id` for each of four lanes with scalar code and packs the results.
    fn lane_by_lane(&mut self, id: InstrId, idx: &Index) -> Result<Value, JitError> {
        let ty = self.shape(id)?.element_type;
        let mut lanes_v = Vec::with_capacity(4);
        for l in 0..4i64 {
            let shift = |fb: &mut FunctionBuilder, (b, c): Comp| -> Comp {
                if c == 0 || l == 0 {
                    (b, 0)
                } else {
                    (fb.ins().iadd_imm_s(b, c * l), 0)
                }
            };
            let sidx = match idx {
                Index::Linear(c) => Index::Linear(shift(self.fb, *c)),
                Index::Multi(m) => Index::Multi(m.iter().map(|&c| shift(self.fb, c)).collect()),
            };
            lanes_v.push(self.emit(id, &sidx, 1)?);
        }
        Ok(lane_values::pack_lanes(self.fb, ty, &lanes_v))
    }

    fn emit_uncached(
        &mut self,
        id: InstrId,
        idx: &Index,
        lanes: u32,
    ) -> Result<Option<Value>, JitError> {
        if let Some(leaf) = self.leaves.get(&id) {
            let leaf = leaf.clone();
            let lin = self.linear(idx, &leaf.shape);
            return self
                .load(leaf.addr, leaf.shape.element_type, lin, lanes)
                .map(Some);
        }
        let comp: &'a Computation = self.comp;
        let instr = comp.get(id);
        let shape = self.shape(id)?;
        let ty = shape.element_type;
        let ops = instr.operands();
        match &instr.op {
            Op::Constant(lit) => {
                let arr = lit.as_array().ok_or_else(|| {
                    JitError::Unsupported(format!("tuple constant {} in a kernel", instr.name))
                })?;
                if arr.len() == 1 {
                    let s = lane_values::scalar_constant(self.fb, &arr.data, 0)?;
                    return Ok(Some(lane_values::splat_if(self.fb, ty, s, lanes)));
                }
                let addr = Addr::Absolute(self.libcalls.symbols.constant(&arr.data.to_le_bytes()));
                let lin = self.linear(idx, shape);
                self.load(addr, ty, lin, lanes).map(Some)
            }
            Op::Iota { dimension } => {
                let Some(m) = self.multi(idx, shape, lanes) else {
                    return Ok(None);
                };
                let (b, c) = m[*dimension as usize];
                Ok(Some(lane_values::iota_value(self.fb, ty, b, c, lanes)?))
            }
            Op::Broadcast { dimensions } => {
                let operand_shape = self.shape(ops[0])?;
                if operand_shape.rank() == 0 {
                    return self
                        .emit(ops[0], &Index::Multi(SmallVec::new()), lanes)
                        .map(Some);
                }
                let Some(m) = self.multi(idx, shape, lanes) else {
                    return Ok(None);
                };
                let sub = dimensions.iter().map(|&d| m[d as usize]).collect();
                self.emit(ops[0], &Index::Multi(sub), lanes).map(Some)
            }
            Op::Transpose { permutation } => {
                let Some(m) = self.multi(idx, shape, lanes) else {
                    return Ok(None);
                };
                // Output dimension i is operand dimension permutation[i].
                let mut sub: SmallVec<[Comp; 4]> = m.clone();
                for (i, &p) in permutation.iter().enumerate() {
                    sub[p as usize] = m[i];
                }
                self.emit(ops[0], &Index::Multi(sub), lanes).map(Some)
            }
            Op::Reshape | Op::Bitcast => {
                let lin = self.linear(idx, shape);
                self.emit(ops[0], &Index::Linear(lin), lanes).map(Some)
            }
            Op::Slice { dims } => {
                let Some(m) = self.multi(idx, shape, lanes) else {
                    return Ok(None);
                };
                let mut sub = SmallVec::new();
                for (k, &(b, c)) in m.iter().enumerate() {
                    let d = dims[k];
                    let b = if d.stride != 1 {
                        self.fb.ins().imul_imm_s(b, d.stride)
                    } else {
                        b
                    };
                    let b = if d.start != 0 {
                        self.fb.ins().iadd_imm_s(b, d.start)
                    } else {
                        b
                    };
                    sub.push((b, c * d.stride));
                }
                self.emit(ops[0], &Index::Multi(sub), lanes).map(Some)
            }
            Op::Reverse { dimensions } => {
                let Some(m) = self.multi(idx, shape, lanes) else {
                    return Ok(None);
                };
                let mut sub = m.clone();
                for &d in dimensions {
                    let (b, c) = m[d as usize];
                    let n = self.iconst(shape.dims[d as usize] - 1);
                    sub[d as usize] = (self.fb.ins().isub(n, b), -c);
                }
                self.emit(ops[0], &Index::Multi(sub), lanes).map(Some)
            }
            Op::Pad { dims } => {
                if lanes > 1 {
                    return Ok(None);
                }
                let Some(m) = self.multi(idx, shape, lanes) else {
                    return Ok(None);
                };
                let operand_shape = self.shape(ops[0])?;
                let mut inside: Option<Value> = None;
                let mut sub = SmallVec::new();
                for (k, &(b, _)) in m.iter().enumerate() {
                    let d = dims[k];
                    let n = operand_shape.dims[k];
                    let p = self.fb.ins().iadd_imm_s(b, -d.low);
                    let step = d.interior + 1;
                    let q = if step == 1 {
                        p
                    } else {
                        self.fb.ins().sdiv_imm_s(p, step)
                    };
                    let mut ok = self.fb.ins().icmp_imm_s(
                        cranelift_codegen::ir::condcodes::IntCC::SignedGreaterThanOrEqual,
                        p,
                        0,
                    );
                    let lt = self.fb.ins().icmp_imm_s(
                        cranelift_codegen::ir::condcodes::IntCC::SignedLessThan,
                        q,
                        n,
                    );
                    ok = self.fb.ins().band(ok, lt);
                    if step != 1 {
                        let r = self.fb.ins().srem_imm_s(p, step);
                        let on_grid = self.fb.ins().icmp_imm_s(
                            cranelift_codegen::ir::condcodes::IntCC::Equal,
                            r,
                            0,
                        );
                        ok = self.fb.ins().band(ok, on_grid);
                    }
                    let zero = self.iconst(0);
                    let safe = self.fb.ins().select(ok, q, zero);
                    sub.push((safe, 0));
                    inside = Some(match inside {
                        None => ok,
                        Some(i) => self.fb.ins().band(i, ok),
                    });
                }
                let v = self.emit(ops[0], &Index::Multi(sub), 1)?;
                let pad = self.emit(ops[1], &Index::Multi(SmallVec::new()), 1)?;
                Ok(Some(match inside {
                    None => v,
                    Some(c) => self.fb.ins().select(c, v, pad),
                }))
            }
            Op::Concatenate { dimension } => {
                let d = *dimension as usize;
                let Some(m) = self.multi(idx, shape, lanes) else {
                    return Ok(None);
                };
                if lanes > 1 && m[d].1 != 0 {
                    return Ok(None);
                }
                // Select among the operands by the position along the concatenated dimension.
                let (pos, _) = m[d];
                let mut result: Option<Value> = None;
                let mut offset = 0i64;
                let mut pieces = Vec::new();
                for &o in ops.iter() {
                    let n = self.shape(o)?.dims[d];
                    if n == 0 {
                        // An empty operand holds no position (and has no index to clamp to).
                        continue;
                    }
                    pieces.push((o, offset, n));
                    offset += n;
                }
                for (o, off, n) in pieces.into_iter().rev() {
                    let local = self.fb.ins().iadd_imm_s(pos, -off);
                    let zero = self.iconst(0);
                    let hi = self.iconst(n - 1);
                    let clamped = self.fb.ins().smax(local, zero);
                    let clamped = self.fb.ins().smin(clamped, hi);
                    let mut sub = m.clone();
                    sub[d] = (clamped, 0);
                    let v = self.emit(o, &Index::Multi(sub), lanes)?;
                    result = Some(match result {
                        None => v,
                        Some(later) => {
                            let is_later = self.fb.ins().icmp_imm_s(
                                cranelift_codegen::ir::condcodes::IntCC::SignedGreaterThanOrEqual,
                                pos,
                                off + n,
                            );
                            let c = lane_values::scalar_cond_for(self.fb, is_later, ty, lanes);
                            lane_values::select_values(self.fb, c, later, v, lanes)
                        }
                    });
                }
                result
                    .map(Some)
                    .ok_or_else(|| JitError::Invalid("empty concatenate".into()))
            }
            Op::DynamicSlice { sizes } => {
                let Some(m) = self.multi(idx, shape, lanes) else {
                    return Ok(None);
                };
                let operand_shape = self.shape(ops[0])?;
                let mut sub = SmallVec::new();
                for (k, &(b, c)) in m.iter().enumerate() {
                    let start = self.scalar_index(ops[1 + k])?;
                    let hi = self.iconst(operand_shape.dims[k] - sizes[k]);
                    let zero = self.iconst(0);
                    let s = self.fb.ins().smax(start, zero);
                    let s = self.fb.ins().smin(s, hi);
                    sub.push((self.fb.ins().iadd(b, s), c));
                }
                self.emit(ops[0], &Index::Multi(sub), lanes).map(Some)
            }
            Op::DynamicUpdateSlice => {
                if lanes > 1 {
                    return Ok(None);
                }
                let Some(m) = self.multi(idx, shape, lanes) else {
                    return Ok(None);
                };
                let upd_shape = self.shape(ops[1])?;
                let mut inside: Option<Value> = None;
                let mut sub = SmallVec::new();
                for (k, &(b, _)) in m.iter().enumerate() {
                    let start = self.scalar_index(ops[2 + k])?;
                    let hi = self.iconst(shape.dims[k] - upd_shape.dims[k]);
                    let zero = self.iconst(0);
                    let s = self.fb.ins().smax(start, zero);
                    let s = self.fb.ins().smin(s, hi);
                    let local = self.fb.ins().isub(b, s);
                    let ge = self.fb.ins().icmp_imm_s(
                        cranelift_codegen::ir::condcodes::IntCC::SignedGreaterThanOrEqual,
                        local,
                        0,
                    );
                    let lt = self.fb.ins().icmp_imm_s(
                        cranelift_codegen::ir::condcodes::IntCC::SignedLessThan,
                        local,
                        upd_shape.dims[k],
                    );
                    let ok = self.fb.ins().band(ge, lt);
                    let safe = self.fb.ins().select(ok, local, zero);
                    sub.push((safe, 0));
                    inside = Some(match inside {
                        None => ok,
                        Some(i) => self.fb.ins().band(i, ok),
                    });
                }
                let u = self.emit(ops[1], &Index::Multi(sub), 1)?;
                let o = self.emit(ops[0], idx, 1)?;
                Ok(Some(match inside {
                    None => u,
                    Some(c) => self.fb.ins().select(c, u, o),
                }))
            }
            Op::Copy => self.emit(ops[0], idx, lanes).map(Some),
            Op::SelectAndScatter { .. } => super::tiled_window::tiled_value(self, id, idx, lanes),
            Op::Convert if lanes == 1 && self.reads_unrounded(id) => {
                // The bf16 op's f32 value, not rounded to bf16 (the interpreter's precision
                // contract, `compiler/src/interpreter/precision.rs`).
                let src = self.comp.get(ops[0]);
                let mut args = Vec::with_capacity(src.operands().len());
                for &o in src.operands() {
                    args.push(self.emit(o, idx, 1)?);
                }
                let f32s = vec![ElementType::F32; args.len()];
                let wide = element_ops::emit_op(
                    self.fb,
                    &self.libcalls,
                    self.has_fma,
                    &src.op,
                    ElementType::F32,
                    &f32s,
                    &args,
                    1,
                )
                .map_err(|e| e.at(&src.name))?;
                let v = convert::convert_scalar(self.fb, wide, ElementType::F32, ty)
                    .map_err(|e| e.at(&instr.name))?;
                Ok(Some(v))
            }
            Op::Binary(
                b @ (BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical
                | BinaryOp::ShiftRightArithmetic),
            ) if lanes > 1
                && matches!(ty, ElementType::S32 | ElementType::U32)
                && self.lane_uniform(ops[1]).is_some() =>
            {
                let x = self.emit(ops[0], idx, lanes)?;
                let scalar = self.lane_uniform(ops[1]).expect("checked in the guard");
                let amount = self.emit(scalar, &Index::Multi(SmallVec::new()), 1)?;
                Ok(Some(element_ops::shift_by_scalar(self.fb, *b, x, amount)))
            }
            op if op.is_elementwise() => {
                let mut args = Vec::with_capacity(ops.len());
                let mut arg_tys = Vec::with_capacity(ops.len());
                for &o in ops.iter() {
                    let os = self.shape(o)?;
                    // HLO lets select/clamp take scalar operands beside arrays.
                    let v = if os.rank() == 0 && shape.rank() > 0 {
                        self.emit(o, &Index::Multi(SmallVec::new()), lanes)?
                    } else {
                        self.emit(o, idx, lanes)?
                    };
                    args.push(v);
                    arg_tys.push(os.element_type);
                }
                let v = element_ops::emit_op(
                    self.fb,
                    &self.libcalls,
                    self.has_fma,
                    &instr.op,
                    ty,
                    &arg_tys,
                    &args,
                    lanes,
                )
                .map_err(|e| e.at(&instr.name))?;
                Ok(Some(v))
            }
            Op::Parameter(n) => Err(JitError::Invalid(format!(
                "parameter {n} ({}) of a kernel has no buffer",
                instr.name
            ))),
            other => Err(JitError::Unsupported(format!(
                "{} ({}) inside an elementwise kernel",
                other.opcode_name(),
                instr.name
            ))),
        }
    }

    /// Whether convert `id` reads its operand's unrounded f32 value: a convert to f32 or f64
    /// of a bf16 unary or binary op that this kernel can compute: fused into it, or stored
    /// (rounded) but with every operand still readable here. Otherwise the convert reads the
    /// stored, rounded value (the limit `docs/interpreter.md` states).
    fn reads_unrounded(&self, id: InstrId) -> bool {
        let instr = self.comp.get(id);
        let Some(&src) = instr.operands().first() else {
            return false;
        };
        let s = self.comp.get(src);
        matches!(
            instr.shape.element_type(),
            Some(ElementType::F32 | ElementType::F64)
        ) && s.shape.element_type() == Some(ElementType::BF16)
            && matches!(s.op, Op::Unary(_) | Op::Binary(_))
            && (!self.leaves.contains_key(&src)
                || s.operands().iter().all(|o| self.leaves.contains_key(o)))
    }

    /// The rank-0 value every element of `id` equals, when `id` is one (a scalar, or a
    /// broadcast of one computed in this kernel), so that vector code can use it once.
    fn lane_uniform(&self, id: InstrId) -> Option<InstrId> {
        let instr = self.comp.get(id);
        match instr.op {
            _ if instr.shape.rank() == 0 => Some(id),
            // A broadcast read from a buffer is just an array there.
            _ if self.leaves.contains_key(&id) => None,
            Op::Broadcast { .. } => {
                let src = instr.operands()[0];
                (self.comp.get(src).shape.rank() == 0).then_some(src)
            }
            _ => None,
        }
    }

    /// A scalar operand (dynamic-slice start) as an `i64`.
    fn scalar_index(&mut self, id: InstrId) -> Result<Value, JitError> {
        let ty = self.shape(id)?.element_type;
        let v = self.emit(id, &Index::Multi(SmallVec::new()), 1)?;
        Ok(lane_values::int_to_i64(self.fb, v, ty))
    }

    /// Loads a value of element type `ty` at linear index `lin` of the buffer at `addr`.
    pub(crate) fn load(
        &mut self,
        addr: Addr,
        ty: ElementType,
        (b, c): Comp,
        lanes: u32,
    ) -> Result<Value, JitError> {
        let base = self.base(addr);
        let size = ty.byte_size() as i64;
        let off = if size == 1 {
            b
        } else {
            self.fb.ins().imul_imm_s(b, size)
        };
        let p = self.fb.ins().iadd(base, off);
        if is_low_precision(ty) {
            // 16 bits in memory, widened to the f32 of the same value (`types.rs`).
            if lanes > 1 {
                return Err(JitError::Invalid(format!("{ty} load in 4-lane code")));
            }
            let bits = self.fb.ins().load(types::I16, mem(), p, 0);
            return Ok(low_precision::widen_bits(self.fb, &self.libcalls, bits, ty));
        }
        let sty = scalar_type(ty)?;
        if lanes == 1 || c == 0 {
            let s = self.fb.ins().load(sty, mem(), p, 0);
            return Ok(lane_values::splat_if(self.fb, ty, s, lanes));
        }
        if c == 1 && ty != ElementType::Pred {
            let vty = value_type(ty, lanes)?;
            return Ok(self.fb.ins().load(vty, mem(), p, 0));
        }
        let mut vals = Vec::with_capacity(4);
        for l in 0..4i64 {
            vals.push(self.fb.ins().load(sty, mem(), p, (l * c * size) as i32));
        }
        Ok(lane_values::pack_lanes(self.fb, ty, &vals))
    }

    /// Stores `v` at linear index `b` (lanes consecutive) of the buffer at `addr`.
    pub(crate) fn store(
        &mut self,
        addr: Addr,
        ty: ElementType,
        b: Value,
        v: Value,
        lanes: u32,
    ) -> Result<(), JitError> {
        let base = self.base(addr);
        let size = ty.byte_size() as i64;
        let off = if size == 1 {
            b
        } else {
            self.fb.ins().imul_imm_s(b, size)
        };
        let p = self.fb.ins().iadd(base, off);
        if is_low_precision(ty) {
            if lanes > 1 {
                return Err(JitError::Invalid(format!("{ty} store in 4-lane code")));
            }
            let bits = low_precision::narrow_bits(self.fb, &self.libcalls, v, ty);
            self.fb.ins().store(mem(), bits, p, 0);
        } else if lanes == 1 {
            self.fb.ins().store(mem(), v, p, 0);
        } else if ty == ElementType::Pred {
            let bytes = lane_values::mask_to_bytes(self.fb, v);
            self.fb.ins().store(mem(), bytes, p, 0);
        } else {
            self.fb.ins().store(mem(), v, p, 0);
        }
        Ok(())
    }

    /// Emits a called scalar computation (a reduce region) on the given values.
    pub(crate) fn emit_region(
        &mut self,
        region: ComputationId,
        args: &[Value],
        lanes: u32,
    ) -> Result<Vec<Value>, JitError> {
        let module: &'a Module = self.module;
        let comp = module.computation(region);
        let mut vals: HashMap<InstrId, Value> = HashMap::new();
        for (id, instr) in comp.instructions() {
            let v = match &instr.op {
                Op::Parameter(n) => *args.get(*n as usize).ok_or_else(|| {
                    JitError::Invalid(format!("region {} has too many parameters", comp.name))
                })?,
                Op::Tuple => continue,
                Op::Constant(lit) => {
                    let arr = lit.as_array().filter(|a| a.len() == 1).ok_or_else(|| {
                        JitError::Unsupported(format!(
                            "non-scalar constant in region {}",
                            comp.name
                        ))
                    })?;
                    let s = lane_values::scalar_constant(self.fb, &arr.data, 0)?;
                    lane_values::splat_if(self.fb, arr.element_type(), s, lanes)
                }
                Op::Broadcast { .. } | Op::Reshape | Op::Bitcast | Op::Copy
                    if instr.shape.element_type().is_some()
                        && instr.shape.dims().iter().all(|&d| d == 1) =>
                {
                    vals[&instr.operands()[0]]
                }
                op if op.is_elementwise() => {
                    let ty = instr.shape.element_type().ok_or_else(|| {
                        JitError::Unsupported(format!("tuple value in region {}", comp.name))
                    })?;
                    let arg_tys: Vec<ElementType> = instr
                        .operands()
                        .iter()
                        .map(|&o| comp.get(o).shape.element_type().unwrap_or(ElementType::F32))
                        .collect();
                    let a: Vec<Value> = instr.operands().iter().map(|o| vals[o]).collect();
                    element_ops::emit_op(
                        self.fb,
                        &self.libcalls,
                        self.has_fma,
                        op,
                        ty,
                        &arg_tys,
                        &a,
                        lanes,
                    )
                    .map_err(|e| e.at(&instr.name))?
                }
                other => {
                    return Err(JitError::Unsupported(format!(
                        "{} in region {}",
                        other.opcode_name(),
                        comp.name
                    )))
                }
            };
            vals.insert(id, v);
        }
        let root = comp.get(comp.root());
        Ok(match root.op {
            Op::Tuple => root.operands().iter().map(|o| vals[o]).collect(),
            _ => vec![vals[&comp.root()]],
        })
    }
}
