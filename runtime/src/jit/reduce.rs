//! `reduce`: the output is filled with the init values, then the operand is walked in
//! row-major order (contiguous reads, whatever dimensions are reduced) and folded into the
//! output with the reducer region emitted inline.
//!
//! When the innermost operand dimension is kept, four output elements are updated at once.
//! When it is reduced, the accumulators stay in registers across the inner loop.

use super::buffer::Addr;
use super::elemental::{Comp, Elemental, Index};
use super::kernel_lowering::{can_vectorize, kernel_instructions, nest};
use super::loops::counted_loop;
use super::JitError;
use cranelift_codegen::ir::{InstBuilder, Value};
use smallvec::SmallVec;
use tessel_compiler::ir::{ArrayShape, ElementType, InstrId, Op};

/// Emits a reduce instruction `red` whose outputs go to `outputs` (one per reduced array).
pub fn emit_reduce(
    e: &mut Elemental,
    red: InstrId,
    outputs: &[Addr],
    allow_vector: bool,
) -> Result<(), JitError> {
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

    let mut instrs = kernel_instructions(e, &arrays);
    instrs.extend(kernel_instructions(e, &inits));
    let vec_ok = allow_vector && can_vectorize(e, &instrs);

    // 1. Fill with the init values (computed once, before any loop).
    let empty = Index::Multi(SmallVec::new());
    let mut init_vals = Vec::with_capacity(n);
    for &i in &inits {
        init_vals.push(e.emit(i, &empty, 1)?);
    }
    let count = out_shape.element_count();
    let fill_vec_end = if vec_ok { count / 4 * 4 } else { 0 };
    let fill = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
        for k in 0..n {
            let v = super::elementwise::splat_if(e.fb, tys[k], init_vals[k], lanes);
            e.store(outputs[k], tys[k], j, v, lanes)?;
        }
        Ok(())
    };
    counted_loop(e, 0, fill_vec_end, 4, &mut |e, j| fill(e, j, 4))?;
    counted_loop(e, fill_vec_end, count, 1, &mut |e, j| fill(e, j, 1))?;
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

    let region = *to_apply;
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
        return nest(e, &in_shape.dims[..rank - 1], &mut Vec::new(), &mut row);
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
    nest(e, &in_shape.dims[..rank - 1], &mut Vec::new(), &mut row)
}
