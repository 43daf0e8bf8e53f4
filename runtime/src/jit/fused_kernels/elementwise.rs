//! Elementwise kernels: a loop nest over the output shape that stores the root expression's
//! value at every index.
//!
//! The nest is in row-major order so that the output (and every leaf read through elementwise
//! ops and reshapes) is walked contiguously. The innermost loop runs four lanes at a time
//! (`f32x4` / `i32x4`) with a scalar tail. When nothing in the kernel needs a multi-dimensional
//! index (only elementwise ops, reshapes, scalar broadcasts), the whole output is one flat loop.

use crate::jit::buffer::Addr;
use crate::jit::clif::loops::{counted_loop, counted_loop_between};
use crate::jit::clif::types::vectorizable_type;
use crate::jit::clif::value_at_index::{Comp, Elemental, Index};
use crate::jit::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use smallvec::SmallVec;
use std::collections::HashSet;
use tessel_compiler::ir::{ArrayShape, InstrId, Op};

/// One output of a kernel: the instruction whose value is stored, and where.
#[derive(Clone, Debug)]
pub(crate) struct KernelOutput {
    pub root: InstrId,
    pub addr: Addr,
}

/// The part of a kernel's outermost loop (of the flat index when the kernel is one flat loop,
/// else of the first dimension) that one kernel function covers.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OuterPart {
    /// All of it.
    Whole,
    /// `[lo, hi)`, fixed when the kernel is built (one of a split's two halves).
    Fixed(i64, i64),
    /// `[lo, hi)`, the kernel function's arguments: a chunk claimed at run time. A chunk of
    /// a flat loop starts at a multiple of 4, so each element is computed by the same vector
    /// or scalar code as in the whole loop.
    Chunk(Value, Value),
}

impl From<Option<(i64, i64)>> for OuterPart {
    fn from(part: Option<(i64, i64)>) -> OuterPart {
        match part {
            None => OuterPart::Whole,
            Some((lo, hi)) => OuterPart::Fixed(lo, hi),
        }
    }
}

/// Instructions the roots depend on inside the kernel (stopping at leaves).
pub(crate) fn kernel_instructions(e: &Elemental, roots: &[InstrId]) -> Vec<InstrId> {
    let mut seen = HashSet::new();
    let mut stack: Vec<InstrId> = roots.to_vec();
    let mut out = Vec::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        out.push(id);
        if e.leaves.contains_key(&id) {
            continue;
        }
        stack.extend(e.comp.get(id).operands().iter().copied());
    }
    out
}

/// Whether every instruction can run in 4-lane code.
pub(crate) fn can_vectorize(e: &Elemental, instrs: &[InstrId]) -> bool {
    instrs.iter().all(|&id| {
        e.comp
            .get(id)
            .shape
            .element_type()
            .is_some_and(vectorizable_type)
    })
}

/// Whether the kernel can be walked with one linear index.
fn is_flat(e: &Elemental, instrs: &[InstrId]) -> bool {
    instrs.iter().all(|&id| {
        if e.leaves.contains_key(&id) {
            return true;
        }
        let instr = e.comp.get(id);
        match &instr.op {
            Op::Reshape | Op::Bitcast | Op::Copy | Op::Constant(_) => true,
            Op::Broadcast { .. } => e.comp.get(instr.operands()[0]).shape.rank() == 0,
            op => op.is_elementwise(),
        }
    })
}

/// How an elementwise kernel's outermost loop may be cut into chunks that run on different
/// threads, each writing only its own elements: `(end, align)`, the loop's length and a
/// multiple every chunk starts at (4 for a flat loop, so that each element is computed by the
/// same vector or scalar code as in the whole loop).
pub(crate) fn chunking(
    e: &Elemental,
    outputs: &[KernelOutput],
    shape: &ArrayShape,
) -> Option<(i64, i64)> {
    let roots: Vec<InstrId> = outputs.iter().map(|o| o.root).collect();
    let instrs = kernel_instructions(e, &roots);
    let count = shape.element_count();
    if shape.rank() == 0 || count <= 1 {
        return None;
    }
    if is_flat(e, &instrs) || shape.rank() == 1 {
        // A rank-1 loop that is not flat (an iota, a slice) is still one loop over the
        // elements: cut it as a flat one.
        (count >= 8).then_some((count, 4))
    } else if shape.rank() >= 2 && shape.dims[0] >= 2 {
        Some((shape.dims[0], 1))
    } else {
        None
    }
}

/// Emits the loop nest computing every output of an elementwise kernel (all outputs have the
/// dimensions of `shape`), whole or over `part`, a range of the outermost loop (of the flat
/// index when the kernel is one flat loop, else of the first dimension; see [`chunking`]).
pub(crate) fn emit_elementwise_part(
    e: &mut Elemental,
    outputs: &[KernelOutput],
    shape: &ArrayShape,
    allow_vector: bool,
    part: OuterPart,
) -> Result<(), JitError> {
    let roots: Vec<InstrId> = outputs.iter().map(|o| o.root).collect();
    let instrs = kernel_instructions(e, &roots);
    let count = shape.element_count();
    let lanes_ok = allow_vector && count >= 4 && can_vectorize(e, &instrs);
    // Every output's value is computed before any is stored: an output may be written over a
    // buffer another output reads at the same index (a loop's state updated in place,
    // `arena_plan::may_write_over`).
    let store_point =
        |e: &mut Elemental, idx: &Index, lin: Value, lanes: u32| -> Result<(), JitError> {
            let mut values: SmallVec<[Value; 4]> = SmallVec::new();
            for o in outputs {
                values.push(e.emit(o.root, idx, lanes)?);
            }
            for (o, v) in outputs.iter().zip(values) {
                let ty = e.shape(o.root)?.element_type;
                e.store(o.addr, ty, lin, v, lanes)?;
            }
            Ok(())
        };
    if shape.rank() == 0 || count <= 1 {
        let zero = e.iconst(0);
        let idx = if shape.rank() == 0 {
            Index::Multi(SmallVec::new())
        } else {
            Index::Linear((zero, 0))
        };
        return store_point(e, &idx, zero, 1);
    }
    let vec_end = if lanes_ok { count / 4 * 4 } else { 0 };
    if is_flat(e, &instrs) {
        let mut vector = |e: &mut Elemental, j| store_point(e, &Index::Linear((j, 1)), j, 4);
        let mut scalar = |e: &mut Elemental, j| store_point(e, &Index::Linear((j, 0)), j, 1);
        return vectors_then_scalars(e, part, count, vec_end, &mut vector, &mut scalar);
    }
    let rank = shape.rank();
    if rank == 1 {
        let multi = |j, lanes| Index::Multi(SmallVec::from_slice(&[(j, i64::from(lanes == 4))]));
        let mut vector = |e: &mut Elemental, j| store_point(e, &multi(j, 4), j, 4);
        let mut scalar = |e: &mut Elemental, j| store_point(e, &multi(j, 1), j, 1);
        return vectors_then_scalars(e, part, count, vec_end, &mut vector, &mut scalar);
    }
    let inner = shape.dims[rank - 1];
    let vec_end = if lanes_ok && inner >= 4 {
        inner / 4 * 4
    } else {
        0
    };
    let strides = shape.strides();
    let mut row = |e: &mut Elemental, outer: &[Value]| -> Result<(), JitError> {
        let mut row_base: Option<Value> = None;
        for (k, &v) in outer.iter().enumerate() {
            let t = e.fb.ins().imul_imm_s(v, strides[k]);
            row_base = Some(match row_base {
                None => t,
                Some(b) => e.fb.ins().iadd(b, t),
            });
        }
        let row_base = row_base.unwrap_or_else(|| e.iconst(0));
        let point = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
            let mut comps: SmallVec<[Comp; 4]> = outer.iter().map(|&v| (v, 0)).collect();
            comps.push((j, if lanes == 4 { 1 } else { 0 }));
            let lin = e.fb.ins().iadd(row_base, j);
            store_point(e, &Index::Multi(comps), lin, lanes)
        };
        counted_loop(e, 0, vec_end, 4, &mut |e, j| point(e, j, 4))?;
        counted_loop(e, vec_end, inner, 1, &mut |e, j| point(e, j, 1))
    };
    nest_part(e, &shape.dims[..rank - 1], part, &mut row)
}

/// The body of a loop nest: called with the induction variables, outermost first.
pub(crate) type NestBody<'b> = dyn FnMut(&mut Elemental, &[Value]) -> Result<(), JitError> + 'b;

/// A loop over the elements `part` covers of a one-loop kernel with `count` elements: 4-lane
/// `vector` steps below `vec_end` (a multiple of 4), then `scalar` steps. A chunk starts at a
/// multiple of 4, so every element is computed by the same code as in the whole loop.
fn vectors_then_scalars(
    e: &mut Elemental,
    part: OuterPart,
    count: i64,
    vec_end: i64,
    vector: &mut dyn FnMut(&mut Elemental, Value) -> Result<(), JitError>,
    scalar: &mut dyn FnMut(&mut Elemental, Value) -> Result<(), JitError>,
) -> Result<(), JitError> {
    match part {
        OuterPart::Chunk(lo, hi) => {
            let vec_end = e.iconst(vec_end);
            let vec_hi = select_int(e, IntCC::SignedLessThan, hi, vec_end);
            counted_loop_between(e, lo, vec_hi, 4, vector)?;
            let tail_lo = select_int(e, IntCC::SignedGreaterThan, lo, vec_end);
            counted_loop_between(e, tail_lo, hi, 1, scalar)
        }
        _ => {
            let (lo, hi) = match part {
                OuterPart::Fixed(lo, hi) => (lo, hi),
                _ => (0, count),
            };
            counted_loop(e, lo, vec_end.min(hi), 4, vector)?;
            counted_loop(e, vec_end.max(lo), hi, 1, scalar)
        }
    }
}

/// `a` where `a cc b` holds, else `b` (`cc` less-than: the minimum; greater-than: the maximum).
fn select_int(e: &mut Elemental, cc: IntCC, a: Value, b: Value) -> Value {
    let keep_a = e.fb.ins().icmp(cc, a, b);
    e.fb.ins().select(keep_a, a, b)
}

/// [`nest`] over `dims`, or only over a part of the first dimension (one half of a kernel
/// split for two threads, or a chunk claimed at run time).
pub(crate) fn nest_part(
    e: &mut Elemental,
    dims: &[i64],
    part: impl Into<OuterPart>,
    body: &mut NestBody,
) -> Result<(), JitError> {
    let no_outer_loop = || JitError::Invalid("a kernel with no outer loop cannot be split".into());
    let rest = dims.get(1..).unwrap_or_default();
    match part.into() {
        OuterPart::Whole => nest(e, dims, &mut Vec::new(), body),
        _ if dims.is_empty() => Err(no_outer_loop()),
        OuterPart::Chunk(lo, hi) => counted_loop_between(e, lo, hi, 1, &mut |e, iv| {
            nest(e, rest, &mut vec![iv], body)
        }),
        OuterPart::Fixed(lo, hi) => counted_loop(e, lo, hi, 1, &mut |e, iv| {
            nest(e, rest, &mut vec![iv], body)
        }),
    }
}

/// Loops over `dims` (outermost first), calling `body` with the induction variables.
pub(crate) fn nest(
    e: &mut Elemental,
    dims: &[i64],
    ivs: &mut Vec<Value>,
    body: &mut NestBody,
) -> Result<(), JitError> {
    if dims.is_empty() {
        return body(e, ivs);
    }
    counted_loop(e, 0, dims[0], 1, &mut |e, iv| {
        ivs.push(iv);
        let r = nest(e, &dims[1..], ivs, body);
        ivs.pop();
        r
    })
}
