//! `reduce`: the output is filled with the init values, then the operand is walked in
//! row-major order (contiguous reads, whatever dimensions are reduced) and folded into the
//! output with the reducer region emitted inline.
//!
//! When the reduced dimensions are the leading ones and the kept ones trail (bias gradients:
//! `[N, H, W, C] -> [C]`), the kept innermost dimension is taken in chunks of up to sixteen
//! 4-lane accumulators held in registers while every reduced row is folded in
//! (`emit_columns`). Otherwise, when the innermost operand dimension is kept, four output
//! elements are updated in memory at once; when it is reduced, the accumulators stay in
//! registers across the inner loop.
//!
//! A large reduce over its first dimension is computed in two parts (`reduce_split`): the
//! rows `[0, mid)` into the output, the rows `[mid, end)` into a scratch buffer, then the
//! two are combined (`emit_reduce_combine`). The cut depends only on the shapes, never on
//! the thread count, so one thread and two threads give bitwise the same result. The scratch
//! buffer keeps [`PARTIAL_GUARD`] bytes clear on each side of the partial result.
//!
//! A reduce that keeps its first dimension (a global pool, `[N, T, C] -> [N, C]`) runs in
//! chunks of those rows claimed by the threads (`kept_first_dimension`): each output element
//! is still reduced whole by one thread in the same order, so the bits do not change either.

use crate::jit::buffer::Addr;
use crate::jit::clif::loops::{counted_loop, counted_loop_between};
use crate::jit::clif::types::vectorizable_type;
use crate::jit::clif::value_at_index::{Comp, Elemental, Index};
use crate::jit::fused_kernels::elementwise::{
    can_vectorize, kernel_instructions, nest, nest_part, OuterPart,
};
use crate::jit::JitError;
use cranelift_codegen::ir::{InstBuilder, Value};
use smallvec::SmallVec;
use tessel_compiler::ir::{ArrayShape, BinaryOp, Computation, ElementType, InstrId, Module, Op};

/// Operands at least this large are reduced in two parts (see [`reduce_split`]).
pub(crate) const SPLIT_REDUCE_ELEMENTS: i64 = 1 << 16;

/// Bytes left unused on each side of a split reduce's partial result in its scratch buffer.
/// The two parts run on two threads, and the fused kernels fold every point into their
/// accumulators in memory; with the second part's accumulators in the lines next to the
/// first's (as the arena packs small buffers), the second thread gained nothing. Measured on
/// `cpu family 6`, `model 207` (docs/performance.md, "The suite on Intel's AVX-512"): in a C
/// loop of that kernel's shape, two threads took 0.88-0.94 ms with the two threads'
/// accumulators adjacent, 0.74-0.77 with 64 bytes between them, 0.55-0.61 with 128 or more
/// (one thread: 0.93-0.97). A multiple of 64, so the partial result keeps the arena's 64-byte
/// alignment.
pub(crate) const PARTIAL_GUARD: usize = 128;

/// The scratch bytes planned for a split reduce's partial result of `bytes` bytes: the
/// result between two guards ([`PARTIAL_GUARD`]).
pub(crate) fn partial_scratch_bytes(bytes: usize) -> usize {
    bytes + 2 * PARTIAL_GUARD
}

/// Where the partial result starts in a scratch buffer of [`partial_scratch_bytes`].
pub(crate) fn partial_in(scratch: Addr) -> Addr {
    match scratch {
        Addr::Arena(offset) => Addr::Arena(offset + PARTIAL_GUARD),
        Addr::Absolute(address) => Addr::Absolute(address + PARTIAL_GUARD),
    }
}

/// Most accumulators (4-lane vectors or scalars) held in registers by one chunk of
/// [`emit_columns`]. x86-64 has 16 vector registers; 16 accumulators make one pass over a
/// `[N, H, W, 64]` bias gradient instead of two, and measured faster than 8 on
/// `[128, 14, 14, 64] -> [64]` (0.43-0.49 ms against 0.63-0.79 ms, on a loaded machine).
const MAX_ACCUMULATORS: usize = 16;

/// Where a reduce may be computed in two parts, as `(mid, end)` of its operand's first
/// dimension: a single-array floating-point reduce of at least [`SPLIT_REDUCE_ELEMENTS`]
/// elements that reduces its first dimension, whose reducer is add, multiply, maximum or
/// minimum and whose init value is that reducer's identity (so that each part may start from
/// it: the result is the same reduction with the rows summed in two groups).
pub(crate) fn reduce_split(
    module: &Module,
    comp: &Computation,
    red: InstrId,
) -> Option<(i64, i64)> {
    let instr = comp.get(red);
    let Op::Reduce {
        dimensions,
        to_apply,
    } = &instr.op
    else {
        return None;
    };
    if instr.operands().len() != 2 || !dimensions.contains(&0) {
        return None;
    }
    let shape = comp.get(instr.operands()[0]).shape.as_array()?;
    let float = matches!(shape.element_type, ElementType::F32 | ElementType::F64);
    if !float
        || shape.rank() < 2
        || shape.dims[0] < 2
        || shape.element_count() < SPLIT_REDUCE_ELEMENTS
    {
        return None;
    }
    let op = binary_reducer(module.computation(*to_apply))?;
    let init = match &comp.get(instr.operands()[1]).op {
        Op::Constant(lit) => lit.as_array().filter(|a| a.len() == 1)?.data.get_f64(0),
        _ => return None,
    };
    let identity = match op {
        BinaryOp::Add => init == 0.0,
        BinaryOp::Multiply => init == 1.0,
        BinaryOp::Maximum => init == f64::NEG_INFINITY,
        BinaryOp::Minimum => init == f64::INFINITY,
        _ => false,
    };
    identity.then_some((shape.dims[0] / 2, shape.dims[0]))
}

/// The binary op of a reducer `f(a, b) = a op b` (either operand order), if it is one.
fn binary_reducer(region: &Computation) -> Option<BinaryOp> {
    let root = region.get(region.root());
    let Op::Binary(op) = root.op else {
        return None;
    };
    let params: Vec<u32> = root
        .operands()
        .iter()
        .filter_map(|&o| match region.get(o).op {
            Op::Parameter(n) => Some(n),
            _ => None,
        })
        .collect();
    let both = params.len() == 2 && params.contains(&0) && params.contains(&1);
    (both && region.parameters().len() == 2).then_some(op)
}

/// The length of the operand's first dimension when a reduce keeps it (a global pool over
/// `[N, T, C] -> [N, C]`): its kernel may then run in chunks of those rows on several threads,
/// every output element still reduced whole, in the same order, by one thread.
pub(crate) fn kept_first_dimension(comp: &Computation, red: InstrId) -> Option<i64> {
    let instr = comp.get(red);
    let Op::Reduce { dimensions, .. } = &instr.op else {
        return None;
    };
    let shape = comp.get(*instr.operands().first()?).shape.as_array()?;
    let rows = *shape.dims.first()?;
    (shape.rank() >= 2 && rows >= 2 && !dimensions.contains(&0) && !dimensions.is_empty())
        .then_some(rows)
}

/// Emits a reduce instruction `red` whose outputs go to `outputs` (one per reduced array),
/// over the whole operand; with `OuterPart::Fixed(lo, hi)`, over the rows `[lo, hi)` of its
/// first dimension, which must be reduced (see [`reduce_split`]); with `OuterPart::Chunk`,
/// over those rows of a first dimension it keeps (see [`kept_first_dimension`]), filling and
/// writing only their outputs.
pub(crate) fn emit_reduce_part(
    e: &mut Elemental,
    red: InstrId,
    outputs: &[Addr],
    allow_vector: bool,
    part: impl Into<OuterPart>,
) -> Result<(), JitError> {
    let part: OuterPart = part.into();
    let comp = e.comp;
    let instr = comp.get(red);
    let Op::Reduce {
        dimensions,
        to_apply,
    } = &instr.op
    else {
        return Err(JitError::Invalid(format!("{} is not a reduce", instr.name)));
    };
    let n = instr.operands().len() / 2;
    let arrays: Vec<InstrId> = instr.operands()[..n].to_vec();
    let inits: Vec<InstrId> = instr.operands()[n..].to_vec();
    let in_shape: ArrayShape = e.shape(arrays[0])?.clone();
    let out_shapes: Vec<ArrayShape> = instr.shape.leaves().into_iter().cloned().collect();
    if out_shapes.len() != n || outputs.len() != n {
        return Err(JitError::Invalid(format!(
            "{}: reduce outputs do not match its operands",
            instr.name
        )));
    }
    let out_shape = out_shapes[0].clone();
    let tys: Vec<ElementType> = out_shapes.iter().map(|s| s.element_type).collect();
    let rank = in_shape.rank();
    let reduced: Vec<bool> = (0..rank)
        .map(|d| dimensions.contains(&(d as i64)))
        .collect();
    let fixed = match part {
        OuterPart::Fixed(lo, hi) => Some((lo, hi)),
        _ => None,
    };
    if fixed.is_some() && (rank < 2 || !reduced[0]) {
        return Err(JitError::Invalid(format!(
            "{}: only a reduce of its first dimension can be split",
            instr.name
        )));
    }
    let chunk = match part {
        OuterPart::Chunk(lo, hi) => Some((lo, hi)),
        _ => None,
    };
    if chunk.is_some() && (rank < 2 || reduced[0]) {
        return Err(JitError::Invalid(format!(
            "{}: only a reduce that keeps its first dimension runs in chunks",
            instr.name
        )));
    }

    let mut instrs = kernel_instructions(e, &arrays);
    instrs.extend(kernel_instructions(e, &inits));
    let vec_ok = allow_vector && can_vectorize(e, &instrs);

    // The init values, computed once, before any loop.
    let empty = Index::Multi(SmallVec::new());
    let mut init_vals = Vec::with_capacity(n);
    for &i in &inits {
        init_vals.push(e.emit(i, &empty, 1)?);
    }
    let region = *to_apply;

    // Leading dimensions reduced, trailing ones kept: accumulate in registers.
    let leading = reduced.iter().take_while(|&&r| r).count();
    if leading >= 1 && leading < rank && reduced[leading..].iter().all(|&r| !r) {
        let columns = Columns {
            arrays: &arrays,
            init_vals: &init_vals,
            tys: &tys,
            outputs,
            region,
            in_shape: &in_shape,
            leading,
            vec_ok,
        };
        return emit_columns(e, &columns, fixed);
    }

    // 1. Fill with the init values (a chunk: its rows only).
    let count = out_shape.element_count();
    let fill_vec_end = if vec_ok { count / 4 * 4 } else { 0 };
    let fill = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
        for k in 0..n {
            let v = crate::jit::clif::lane_values::splat_if(e.fb, tys[k], init_vals[k], lanes);
            e.store(outputs[k], tys[k], j, v, lanes)?;
        }
        Ok(())
    };
    if let Some((lo, hi)) = chunk {
        let row = out_shape.strides()[0];
        let (from, to) = (
            e.fb.ins().imul_imm_s(lo, row),
            e.fb.ins().imul_imm_s(hi, row),
        );
        if vec_ok && row % 4 == 0 {
            counted_loop_between(e, from, to, 4, &mut |e, j| fill(e, j, 4))?;
        } else {
            counted_loop_between(e, from, to, 1, &mut |e, j| fill(e, j, 1))?;
        }
    } else {
        counted_loop(e, 0, fill_vec_end, 4, &mut |e, j| fill(e, j, 4))?;
        counted_loop(e, fill_vec_end, count, 1, &mut |e, j| fill(e, j, 1))?;
    }
    if in_shape.element_count() == 0 {
        return Ok(());
    }

    // Output strides per operand dimension (0 for reduced dimensions).
    let out_strides = out_shape.strides();
    let mut ostride = vec![0i64; rank];
    let mut k = 0;
    for d in 0..rank {
        if !reduced[d] {
            ostride[d] = out_strides[k];
            k += 1;
        }
    }
    let out_linear = |e: &mut Elemental, ivs: &[Value]| -> Value {
        let mut acc: Option<Value> = None;
        for (d, &v) in ivs.iter().enumerate() {
            if ostride[d] == 0 {
                continue;
            }
            let t = e.fb.ins().imul_imm_s(v, ostride[d]);
            acc = Some(match acc {
                None => t,
                Some(a) => e.fb.ins().iadd(a, t),
            });
        }
        acc.unwrap_or_else(|| e.iconst(0))
    };

    if rank == 0 {
        let x: Vec<Value> = arrays
            .iter()
            .map(|&a| e.emit(a, &empty, 1))
            .collect::<Result<_, _>>()?;
        let mut args = init_vals.clone();
        args.extend(x);
        let r = e.emit_region(region, &args, 1)?;
        let zero = e.iconst(0);
        for k in 0..n {
            e.store(outputs[k], tys[k], zero, r[k], 1)?;
        }
        return Ok(());
    }
    let inner = in_shape.dims[rank - 1];
    if !reduced[rank - 1] {
        // Innermost dimension kept: update 4 consecutive outputs per step.
        let vec_end = if vec_ok && inner >= 4 {
            inner / 4 * 4
        } else {
            0
        };
        let mut row = |e: &mut Elemental, outer: &[Value]| -> Result<(), JitError> {
            let base = out_linear(e, outer);
            let point = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
                let mut comps: SmallVec<[Comp; 4]> = outer.iter().map(|&v| (v, 0)).collect();
                comps.push((j, if lanes == 4 { 1 } else { 0 }));
                let idx = Index::Multi(comps);
                let lin = e.fb.ins().iadd(base, j);
                let mut args = Vec::with_capacity(2 * n);
                for k in 0..n {
                    args.push(e.load(outputs[k], tys[k], (lin, 1), lanes)?);
                }
                for &a in &arrays {
                    args.push(e.emit(a, &idx, lanes)?);
                }
                let r = e.emit_region(region, &args, lanes)?;
                for k in 0..n {
                    e.store(outputs[k], tys[k], lin, r[k], lanes)?;
                }
                Ok(())
            };
            counted_loop(e, 0, vec_end, 4, &mut |e, j| point(e, j, 4))?;
            counted_loop(e, vec_end, inner, 1, &mut |e, j| point(e, j, 1))
        };
        return nest_part(e, &in_shape.dims[..rank - 1], part, &mut row);
    }
    // Innermost dimension reduced: accumulate in variables across the inner loop.
    let mut row = |e: &mut Elemental, outer: &[Value]| -> Result<(), JitError> {
        let lin = out_linear(e, outer);
        let mut vars = Vec::with_capacity(n);
        for k in 0..n {
            let v = e.load(outputs[k], tys[k], (lin, 0), 1)?;
            let ty = e.fb.func.dfg.value_type(v);
            let var = e.fb.declare_var(ty);
            e.fb.def_var(var, v);
            vars.push(var);
        }
        counted_loop(e, 0, inner, 1, &mut |e, j| {
            let mut comps: SmallVec<[Comp; 4]> = outer.iter().map(|&v| (v, 0)).collect();
            comps.push((j, 0));
            let idx = Index::Multi(comps);
            let mut args: Vec<Value> = vars.iter().map(|&v| e.fb.use_var(v)).collect();
            for &a in &arrays {
                args.push(e.emit(a, &idx, 1)?);
            }
            let r = e.emit_region(region, &args, 1)?;
            for k in 0..n {
                e.fb.def_var(vars[k], r[k]);
            }
            Ok(())
        })?;
        for k in 0..n {
            let v = e.fb.use_var(vars[k]);
            e.store(outputs[k], tys[k], lin, v, 1)?;
        }
        Ok(())
    };
    nest_part(e, &in_shape.dims[..rank - 1], part, &mut row)
}

/// A reduce whose `leading` first operand dimensions are reduced and the rest kept.
struct Columns<'c> {
    arrays: &'c [InstrId],
    init_vals: &'c [Value],
    tys: &'c [ElementType],
    outputs: &'c [Addr],
    region: tessel_compiler::ir::ComputationId,
    in_shape: &'c ArrayShape,
    leading: usize,
    vec_ok: bool,
}

/// Emits a [`Columns`] reduce: for every index of the kept dimensions but the innermost, the
/// innermost is cut into chunks of at most [`MAX_ACCUMULATORS`] accumulators (4 lanes each
/// where it can, then single elements), which start at the init values, fold every reduced
/// row (`part`: only rows `[lo, hi)` of the first dimension) and are stored once. Each output
/// element still folds the rows in row-major order.
fn emit_columns(e: &mut Elemental, c: &Columns, part: Option<(i64, i64)>) -> Result<(), JitError> {
    let n = c.arrays.len();
    let dims = &c.in_shape.dims;
    let rank = dims.len();
    let inner = dims[rank - 1];
    let vec_end = if c.vec_ok { inner / 4 * 4 } else { 0 };
    // (offset along the innermost dimension, lanes) of every accumulator, in chunks.
    let mut slots: Vec<(i64, u32)> = (0..vec_end).step_by(4).map(|j| (j, 4)).collect();
    slots.extend((vec_end..inner).map(|j| (j, 1)));
    let per_chunk = (MAX_ACCUMULATORS / n).max(1);
    let chunks: Vec<&[(i64, u32)]> = slots.chunks(per_chunk).collect();
    // Row-major strides of the output (the kept dimensions).
    let kept = &dims[c.leading..];
    let mut out_strides = vec![1i64; kept.len()];
    for d in (0..kept.len().saturating_sub(1)).rev() {
        out_strides[d] = out_strides[d + 1] * kept[d + 1];
    }
    let mut kept_body = |e: &mut Elemental, kept_ivs: &[Value]| -> Result<(), JitError> {
        let mut base: Option<Value> = None;
        for (d, &v) in kept_ivs.iter().enumerate() {
            let t = e.fb.ins().imul_imm_s(v, out_strides[d]);
            base = Some(match base {
                None => t,
                Some(b) => e.fb.ins().iadd(b, t),
            });
        }
        let base = base.unwrap_or_else(|| e.iconst(0));
        for chunk in &chunks {
            // vars[s * n + k]: accumulator of array k at slot s.
            let mut vars = Vec::with_capacity(chunk.len() * n);
            for &(_, lanes) in chunk.iter() {
                for k in 0..n {
                    let v = crate::jit::clif::lane_values::splat_if(
                        e.fb,
                        c.tys[k],
                        c.init_vals[k],
                        lanes,
                    );
                    let ty = e.fb.func.dfg.value_type(v);
                    let var = e.fb.declare_var(ty);
                    e.fb.def_var(var, v);
                    vars.push(var);
                }
            }
            let mut fold = |e: &mut Elemental, red_ivs: &[Value]| -> Result<(), JitError> {
                for (s, &(j, lanes)) in chunk.iter().enumerate() {
                    let mut comps: SmallVec<[Comp; 4]> =
                        red_ivs.iter().chain(kept_ivs).map(|&v| (v, 0)).collect();
                    let jv = e.iconst(j);
                    comps.push((jv, if lanes == 4 { 1 } else { 0 }));
                    let idx = Index::Multi(comps);
                    let mut args: Vec<Value> =
                        (0..n).map(|k| e.fb.use_var(vars[s * n + k])).collect();
                    for &a in c.arrays {
                        args.push(e.emit(a, &idx, lanes)?);
                    }
                    let r = e.emit_region(c.region, &args, lanes)?;
                    for k in 0..n {
                        e.fb.def_var(vars[s * n + k], r[k]);
                    }
                }
                Ok(())
            };
            nest_part(e, &dims[..c.leading], part, &mut fold)?;
            for (s, &(j, lanes)) in chunk.iter().enumerate() {
                let lin = e.fb.ins().iadd_imm_s(base, j);
                for k in 0..n {
                    let v = e.fb.use_var(vars[s * n + k]);
                    e.store(c.outputs[k], c.tys[k], lin, v, lanes)?;
                }
            }
        }
        Ok(())
    };
    nest(
        e,
        &dims[c.leading..rank - 1],
        &mut Vec::new(),
        &mut kept_body,
    )
}

/// Combines the two parts of a split reduce ([`reduce_split`]): `outputs[k] =
/// reducer(outputs[k], partials[k])` element by element.
pub(crate) fn emit_reduce_combine(
    e: &mut Elemental,
    red: InstrId,
    outputs: &[Addr],
    partials: &[Addr],
    allow_vector: bool,
) -> Result<(), JitError> {
    let instr = e.comp.get(red);
    let Op::Reduce { to_apply, .. } = &instr.op else {
        return Err(JitError::Invalid(format!("{} is not a reduce", instr.name)));
    };
    let region = *to_apply;
    let out_shapes: Vec<ArrayShape> = instr.shape.leaves().into_iter().cloned().collect();
    if out_shapes.len() != outputs.len() || partials.len() != outputs.len() {
        return Err(JitError::Invalid(format!(
            "{}: reduce outputs do not match its parts",
            instr.name
        )));
    }
    let tys: Vec<ElementType> = out_shapes.iter().map(|s| s.element_type).collect();
    let count = out_shapes.first().map_or(0, |s| s.element_count());
    let vec_ok = allow_vector && tys.iter().all(|&t| vectorizable_type(t));
    let vec_end = if vec_ok { count / 4 * 4 } else { 0 };
    let point = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
        let mut args = Vec::with_capacity(2 * tys.len());
        for (k, &ty) in tys.iter().enumerate() {
            args.push(e.load(outputs[k], ty, (j, 1), lanes)?);
        }
        for (k, &ty) in tys.iter().enumerate() {
            args.push(e.load(partials[k], ty, (j, 1), lanes)?);
        }
        let r = e.emit_region(region, &args, lanes)?;
        for (k, &ty) in tys.iter().enumerate() {
            e.store(outputs[k], ty, j, r[k], lanes)?;
        }
        Ok(())
    };
    counted_loop(e, 0, vec_end, 4, &mut |e, j| point(e, j, 4))?;
    counted_loop(e, vec_end, count, 1, &mut |e, j| point(e, j, 1))
}
