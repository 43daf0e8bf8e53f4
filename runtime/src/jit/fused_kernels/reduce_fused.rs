//! A multi-output fusion of elementwise outputs and reduces over their dimensions (the fusion
//! pass's `absorb_reduces`: a ReLU gradient and the bias gradient summed from it, or batch
//! normalization's two gradient sums) as one loop nest: each point stores the elementwise
//! outputs and folds each reduce's operand, computed once for all, into that reduce's output,
//! which stays in the cache.
//!
//! The reduce must reduce the leading operand dimensions and keep the trailing ones, so the
//! output element a point folds into is its index in the kept dimensions. The nest is split
//! over the first dimension exactly as the reduce alone would be (`reduce::reduce_split`):
//! each output element folds its rows in row-major order within each part, so the result is
//! bitwise that of the unfused two-part reduce, on one thread or two.

use crate::jit::buffer::Addr;
use crate::jit::clif::loops::counted_loop;
use crate::jit::clif::value_at_index::{Comp, Elemental, Index};
use crate::jit::fused_kernels::elementwise::{
    can_vectorize, kernel_instructions, nest_part, KernelOutput,
};
use crate::jit::JitError;
use cranelift_codegen::ir::{InstBuilder, Value};
use smallvec::SmallVec;
use tessel_compiler::ir::{Computation, InstrId, Op};

/// The number of leading dimensions that `red` reduces, when it is a single-array reduce of
/// those dimensions only (at least one, and not all) whose operand has dimensions `dims`.
pub(crate) fn leading_reduce(comp: &Computation, red: InstrId, dims: &[i64]) -> Option<usize> {
    let instr = comp.get(red);
    let Op::Reduce { dimensions, .. } = &instr.op else {
        return None;
    };
    if instr.operands().len() != 2 {
        return None;
    }
    let shape = comp.get(instr.operands()[0]).shape.as_array()?;
    let rank = shape.rank();
    let leading = dimensions.len();
    let ok = shape.dims.as_slice() == dims
        && leading >= 1
        && leading < rank
        && (0..leading).all(|d| dimensions.contains(&(d as i64)));
    ok.then_some(leading)
}

/// Emits the fused kernel over all rows (`part = None`) or rows `[lo, hi)` of the first
/// dimension: `outputs` are stored at every point, and each reduce of `reds` (see
/// [`leading_reduce`]; all of the same operand dimensions and reducing the same leading
/// ones) is folded into its accumulator, which is first filled with its init value. Several
/// reduces share one pass: batch normalization's gradient sums `dy` and `dy * (x - mean)`
/// while the loop computes `dy`.
pub(crate) fn emit_elementwise_reduce_part(
    e: &mut Elemental,
    outputs: &[KernelOutput],
    reds: &[(InstrId, Addr)],
    allow_vector: bool,
    part: Option<(i64, i64)>,
) -> Result<(), JitError> {
    struct Fold {
        region: tessel_compiler::ir::ComputationId,
        operand: InstrId,
        acc: Addr,
        ty: tessel_compiler::ir::ElementType,
    }
    let Some(&(first, _)) = reds.first() else {
        return Err(JitError::Invalid(
            "a fused reduce kernel without a reduce".into(),
        ));
    };
    let shape = e.shape(e.comp.get(first).operands()[0])?.clone();
    let mut folds = Vec::with_capacity(reds.len());
    let mut leading = None;
    let mut roots: Vec<InstrId> = outputs.iter().map(|o| o.root).collect();
    for &(red, acc) in reds {
        let instr = e.comp.get(red);
        let Op::Reduce { to_apply, .. } = &instr.op else {
            return Err(JitError::Invalid(format!("{} is not a reduce", instr.name)));
        };
        let (operand, init) = (instr.operands()[0], instr.operands()[1]);
        let l = leading_reduce(e.comp, red, &shape.dims);
        if l.is_none() || (leading.is_some() && leading != l) {
            return Err(JitError::Invalid(format!(
                "{}: not a reduce of leading dimensions to fuse",
                instr.name
            )));
        }
        leading = l;
        folds.push(Fold {
            region: *to_apply,
            operand,
            acc,
            ty: e.shape(red)?.element_type,
        });
        roots.extend([operand, init]);
    }
    let leading = leading.unwrap_or(0);
    let rank = shape.rank();
    let instrs = kernel_instructions(e, &roots);
    let vec_ok = allow_vector && can_vectorize(e, &instrs);

    for &(red, acc) in reds {
        fill_accumulators(e, red, acc, vec_ok)?;
    }

    let strides = shape.strides();
    let inner = shape.dims[rank - 1];
    let vec_end = if vec_ok && inner >= 4 {
        inner / 4 * 4
    } else {
        0
    };
    let mut row = |e: &mut Elemental, outer: &[Value]| -> Result<(), JitError> {
        // Linear offsets of the row in the operand and in the reduces' outputs.
        let mut row_base = e.iconst(0);
        let mut acc_base = e.iconst(0);
        for (d, &v) in outer.iter().enumerate() {
            let t = e.fb.ins().imul_imm_s(v, strides[d]);
            row_base = e.fb.ins().iadd(row_base, t);
            if d >= leading {
                acc_base = e.fb.ins().iadd(acc_base, t);
            }
        }
        let point = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
            let mut comps: SmallVec<[Comp; 4]> = outer.iter().map(|&v| (v, 0)).collect();
            comps.push((j, if lanes == 4 { 1 } else { 0 }));
            let idx = Index::Multi(comps);
            let lin = e.fb.ins().iadd(row_base, j);
            for o in outputs {
                let v = e.emit(o.root, &idx, lanes)?;
                let oty = e.shape(o.root)?.element_type;
                e.store(o.addr, oty, lin, v, lanes)?;
            }
            let alin = e.fb.ins().iadd(acc_base, j);
            for f in &folds {
                let x = e.emit(f.operand, &idx, lanes)?;
                let a = e.load(f.acc, f.ty, (alin, 1), lanes)?;
                let r = e.emit_region(f.region, &[a, x], lanes)?[0];
                e.store(f.acc, f.ty, alin, r, lanes)?;
            }
            Ok(())
        };
        counted_loop(e, 0, vec_end, 4, &mut |e, j| point(e, j, 4))?;
        counted_loop(e, vec_end, inner, 1, &mut |e, j| point(e, j, 1))
    };
    nest_part(e, &shape.dims[..rank - 1], part, &mut row)
}

/// Fills the reduce's output `acc` with its init value.
fn fill_accumulators(
    e: &mut Elemental,
    red: InstrId,
    acc: Addr,
    vec_ok: bool,
) -> Result<(), JitError> {
    let init = e.comp.get(red).operands()[1];
    let shape = e.shape(red)?;
    let (ty, count) = (shape.element_type, shape.element_count());
    let init_v = e.emit(init, &Index::Multi(SmallVec::new()), 1)?;
    let fill_end = if vec_ok { count / 4 * 4 } else { 0 };
    let fill = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
        let v = crate::jit::clif::lane_values::splat_if(e.fb, ty, init_v, lanes);
        e.store(acc, ty, j, v, lanes)
    };
    counted_loop(e, 0, fill_end, 4, &mut |e, j| fill(e, j, 4))?;
    counted_loop(e, fill_end, count, 1, &mut |e, j| fill(e, j, 1))
}

/// [`emit_elementwise_reduce_part`] for a single output `root` that reads a select-and-scatter
/// `ss` whose windows tile its operand (`window_tiled::tiled_consumer`): the loop runs over
/// the windows (`window_tiled::emit_tiled_consumer_part`), and every value stored is also
/// folded into the reduce. Within each part, an output element folds its rows window by
/// window, not in row-major order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_tiled_consumer_reduce_part(
    e: &mut Elemental,
    ss: InstrId,
    root: InstrId,
    output: Addr,
    red: InstrId,
    acc: Addr,
    allow_vector: bool,
    part: Option<(i64, i64)>,
) -> Result<(), JitError> {
    let instr = e.comp.get(red);
    let Op::Reduce { to_apply, .. } = &instr.op else {
        return Err(JitError::Invalid(format!("{} is not a reduce", instr.name)));
    };
    let region = *to_apply;
    let operand = instr.operands()[0];
    let shape = e.shape(operand)?.clone();
    let leading = leading_reduce(e.comp, red, &shape.dims).ok_or_else(|| {
        JitError::Invalid(format!(
            "{}: not a reduce of leading dimensions to fuse",
            instr.name
        ))
    })?;
    let ty = e.shape(red)?.element_type;
    let out_ty = e.shape(root)?.element_type;
    let extra = [root, operand];
    let walk = crate::jit::fused_kernels::window_tiled::walk_of(e, ss, &extra, allow_vector)?;
    let roots = [walk.operands.as_slice(), &extra].concat();
    let vec_ok = allow_vector && can_vectorize(e, &kernel_instructions(e, &roots));
    fill_accumulators(e, red, acc, vec_ok)?;
    let strides = shape.strides();
    let mut sink = |e: &mut Elemental, lin: Value, idx: &Index, v: Value, lanes: u32| {
        e.provide(ss, idx, lanes, v);
        let r = e.emit(root, idx, lanes)?;
        e.store(output, out_ty, lin, r, lanes)?;
        let x = e.emit(operand, idx, lanes)?;
        // The output element: the index in the kept (trailing) dimensions.
        let Index::Multi(comps) = idx else {
            return Err(JitError::Invalid(
                "a window walk gives multi-indices".into(),
            ));
        };
        let mut alin = e.iconst(0);
        for (d, &(b, _)) in comps.iter().enumerate().skip(leading) {
            let t = e.fb.ins().imul_imm_s(b, strides[d]);
            alin = e.fb.ins().iadd(alin, t);
        }
        let a = e.load(acc, ty, (alin, 1), lanes)?;
        let s = e.emit_region(region, &[a, x], lanes)?[0];
        e.store(acc, ty, alin, s, lanes)
    };
    crate::jit::fused_kernels::window_tiled::walk_windows(e, &walk, part.into(), &mut sink)
}
