//! `reduce-window` and `select-and-scatter` as loop nests with the window unrolled.
//!
//! Every window position's input coordinate is `out * stride + w * window_dilation - pad_low`,
//! divided by the base dilation; positions outside the input (padding, dilation holes) are
//! skipped with a branch-free select. Reduce-window runs four lanes along the innermost
//! dimension when the window does not move along it (the channel dimension of NHWC pooling).
//! Select-and-scatter with disjoint windows (max-pool gradients) goes to `window_tiled`.

use crate::jit::buffer::Addr;
use crate::jit::clif::lane_values::{scalar_cond_for, select_values, splat_if};
use crate::jit::clif::loops::counted_loop;
use crate::jit::clif::tiled_window::window_positions;
use crate::jit::clif::value_at_index::{Comp, Elemental, Index};
use crate::jit::fused_kernels::elementwise::{
    can_vectorize, kernel_instructions, nest, nest_part, OuterPart,
};
use crate::jit::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use smallvec::SmallVec;
use tessel_compiler::ir::{ArrayShape, InstrId, Module, Op, WindowDim};

/// Most window positions unrolled into one output point.
const MAX_WINDOW: i64 = 4096;

/// Rejects any reduce-window or select-and-scatter of `module` whose window has more than
/// [`MAX_WINDOW`] elements. Called before anything is compiled: the emitters list every
/// window position, so a huge window would otherwise cost memory and time in proportion to
/// its size (a 4e8-element window took over 9.5 GB) before being refused.
pub(crate) fn check_window_sizes(module: &Module) -> Result<(), JitError> {
    for comp in &module.computations {
        for (_, instr) in comp.instructions() {
            let window = match &instr.op {
                Op::ReduceWindow { window, .. } | Op::SelectAndScatter { window, .. } => window,
                _ => continue,
            };
            // Saturating: a product past i64 is as much too large as any other.
            let elements = window
                .dims
                .iter()
                .fold(1i64, |n, d| n.saturating_mul(d.size.max(0)));
            if elements > MAX_WINDOW {
                let sizes: Vec<String> = window.dims.iter().map(|d| d.size.to_string()).collect();
                return Err(JitError::Unsupported(format!(
                    "{} {}: a window of {elements} elements ({}); the JIT unrolls windows of \
                     at most {MAX_WINDOW} elements",
                    instr.op.opcode_name(),
                    instr.name,
                    sizes.join("x")
                )));
            }
        }
    }
    Ok(())
}

/// Input coordinate along one dimension for output coordinate `o` and window offset `k`:
/// (index clamped into range, validity as an `i8`, or `None` when always valid).
fn input_coord(
    e: &mut Elemental,
    o: Value,
    k: i64,
    d: &WindowDim,
    size: i64,
    out_size: i64,
) -> (Value, Option<Value>) {
    let mut p = if d.stride != 1 {
        e.fb.ins().imul_imm_s(o, d.stride)
    } else {
        o
    };
    let off = k * d.window_dilation - d.pad_low;
    if off != 0 {
        p = e.fb.ins().iadd_imm_s(p, off);
    }
    // Statically in range for every output coordinate?
    let lo = off;
    let hi = (out_size - 1) * d.stride + off;
    if d.base_dilation == 1 && lo >= 0 && hi < size {
        return (p, None);
    }
    let bd = d.base_dilation;
    let q = if bd == 1 {
        p
    } else {
        e.fb.ins().sdiv_imm_s(p, bd)
    };
    let ge = e.fb.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, p, 0);
    let lt = e.fb.ins().icmp_imm_s(IntCC::SignedLessThan, q, size);
    let mut ok = e.fb.ins().band(ge, lt);
    if bd != 1 {
        let r = e.fb.ins().srem_imm_s(p, bd);
        let on = e.fb.ins().icmp_imm_s(IntCC::Equal, r, 0);
        ok = e.fb.ins().band(ok, on);
    }
    let zero = e.iconst(0);
    let safe = e.fb.ins().select(ok, q, zero);
    (safe, Some(ok))
}

fn and_opt(e: &mut Elemental, a: Option<Value>, b: Option<Value>) -> Option<Value> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => Some(e.fb.ins().band(a, b)),
    }
}

/// Where a reduce-window or select-and-scatter kernel may be cut in two parts for two threads
/// (see [`reduce_window_split`] and [`select_and_scatter_split`]).
pub(crate) fn window_split(e: &Elemental, id: InstrId) -> Option<(i64, i64)> {
    match e.comp.get(id).op {
        Op::ReduceWindow { .. } => reduce_window_split(e, id),
        Op::SelectAndScatter { .. } => select_and_scatter_split(e, id),
        _ => None,
    }
}

/// Emits a reduce-window or select-and-scatter kernel, whole or over one part of a
/// [`window_split`].
pub(crate) fn emit_window_part(
    e: &mut Elemental,
    id: InstrId,
    output: Addr,
    allow_vector: bool,
    part: OuterPart,
) -> Result<(), JitError> {
    match e.comp.get(id).op {
        Op::ReduceWindow { .. } => emit_reduce_window_part(e, id, output, allow_vector, part),
        _ => emit_select_and_scatter_part(e, id, output, allow_vector, part),
    }
}

/// Where a reduce-window may be cut in two parts for two threads, as `(mid, end)` of the
/// output's first dimension: every output element is computed on its own, so any cut of an
/// outer dimension works.
pub(crate) fn reduce_window_split(e: &Elemental, rw: InstrId) -> Option<(i64, i64)> {
    let out = e.comp.get(rw).shape.as_array()?;
    (out.rank() >= 2 && out.dims[0] >= 2).then(|| (out.dims[0] / 2, out.dims[0]))
}

/// Emits `reduce-window` instruction `rw` storing into `output`, whole or over `part` of the
/// output's first dimension, cut at a [`reduce_window_split`].
pub(crate) fn emit_reduce_window_part(
    e: &mut Elemental,
    rw: InstrId,
    output: Addr,
    allow_vector: bool,
    part: OuterPart,
) -> Result<(), JitError> {
    let instr = e.comp.get(rw);
    let Op::ReduceWindow { window, to_apply } = &instr.op else {
        return Err(JitError::Invalid(format!(
            "{} is not a reduce-window",
            instr.name
        )));
    };
    if instr.operands().len() != 2 {
        return Err(JitError::Unsupported(format!(
            "variadic reduce-window ({})",
            instr.name
        )));
    }
    let (operand, init) = (instr.operands()[0], instr.operands()[1]);
    let in_shape: ArrayShape = e.shape(operand)?.clone();
    let out_shape: ArrayShape = e.shape(rw)?.clone();
    let ty = out_shape.element_type;
    let positions = window_positions(window);
    if positions.len() as i64 > MAX_WINDOW {
        return Err(JitError::Unsupported(format!(
            "reduce-window with more than {MAX_WINDOW} window elements ({})",
            instr.name
        )));
    }
    let rank = out_shape.rank();
    if rank == 0 {
        return Err(JitError::Unsupported(format!(
            "rank-0 reduce-window ({})",
            instr.name
        )));
    }
    let region = *to_apply;
    let instrs = kernel_instructions(e, &[operand, init]);
    let last = &window.dims[rank - 1];
    let inner_plain = last.size == 1
        && last.stride == 1
        && last.pad_low == 0
        && last.pad_high == 0
        && last.base_dilation == 1;
    let inner = out_shape.dims[rank - 1];
    let vec_end = if allow_vector && inner_plain && inner >= 4 && can_vectorize(e, &instrs) {
        inner / 4 * 4
    } else {
        0
    };
    let empty = Index::Multi(SmallVec::new());
    let init_v = e.emit(init, &empty, 1)?;
    let strides = out_shape.strides();
    let mut row = |e: &mut Elemental, outer: &[Value]| -> Result<(), JitError> {
        let point = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
            let mut o: Vec<Value> = outer.to_vec();
            o.push(j);
            let mut acc = splat_if(e.fb, ty, init_v, lanes);
            for pos in &positions {
                let mut comps: SmallVec<[Comp; 4]> = SmallVec::new();
                let mut ok = None;
                for d in 0..rank {
                    let (c, v) = input_coord(
                        e,
                        o[d],
                        pos[d],
                        &window.dims[d],
                        in_shape.dims[d],
                        out_shape.dims[d],
                    );
                    ok = and_opt(e, ok, v);
                    let coef = if d == rank - 1 && lanes == 4 { 1 } else { 0 };
                    comps.push((c, coef));
                }
                let x = e.emit(operand, &Index::Multi(comps), lanes)?;
                let r = e.emit_region(region, &[acc, x], lanes)?[0];
                acc = match ok {
                    None => r,
                    Some(c) => {
                        let c = scalar_cond_for(e.fb, c, ty, lanes);
                        select_values(e.fb, c, r, acc, lanes)
                    }
                };
            }
            let mut lin = j;
            for (k, &v) in outer.iter().enumerate() {
                let t = e.fb.ins().imul_imm_s(v, strides[k]);
                lin = e.fb.ins().iadd(lin, t);
            }
            e.store(output, ty, lin, acc, lanes)
        };
        counted_loop(e, 0, vec_end, 4, &mut |e, j| point(e, j, 4))?;
        counted_loop(e, vec_end, inner, 1, &mut |e, j| point(e, j, 1))
    };
    nest_part(e, &out_shape.dims[..rank - 1], part, &mut row)
}

/// Where a select-and-scatter may be cut in two parts for two threads, as `(mid, end)` of the
/// source's first dimension: when its windows tile the operand without overlap and do not
/// move along the first dimension (max-pool gradients), so each part writes its own rows.
pub(crate) fn select_and_scatter_split(e: &Elemental, ss: InstrId) -> Option<(i64, i64)> {
    let instr = e.comp.get(ss);
    let Op::SelectAndScatter { window, .. } = &instr.op else {
        return None;
    };
    let in_shape = e.comp.get(instr.operands()[0]).shape.as_array()?;
    let src_shape = e.comp.get(instr.operands()[1]).shape.as_array()?;
    let first = window.dims.first()?;
    let ok = in_shape.rank() >= 2
        && crate::jit::clif::tiled_window::windows_disjoint(window, in_shape, src_shape)
        && crate::jit::clif::tiled_window::windows_tile(window, in_shape, src_shape)
        && first.size == 1
        && first.stride == 1
        && src_shape.dims[0] >= 2;
    ok.then(|| (src_shape.dims[0] / 2, src_shape.dims[0]))
}

/// Emits `select-and-scatter` instruction `ss` storing into `output`, whole or over `part` of
/// the source's first dimension, cut at a [`select_and_scatter_split`].
pub(crate) fn emit_select_and_scatter_part(
    e: &mut Elemental,
    ss: InstrId,
    output: Addr,
    allow_vector: bool,
    part: OuterPart,
) -> Result<(), JitError> {
    let crate::jit::fused_kernels::window_tiled::Walk {
        operands: [operand, source, init],
        window,
        regions: [select, scatter],
        ..
    } = crate::jit::fused_kernels::window_tiled::walk_of(e, ss, &[], allow_vector)?;
    let name = &e.comp.get(ss).name;
    let in_shape: ArrayShape = e.shape(operand)?.clone();
    let src_shape: ArrayShape = e.shape(source)?.clone();
    let ty = in_shape.element_type;
    let positions = window_positions(window);
    if positions.len() as i64 > MAX_WINDOW {
        return Err(JitError::Unsupported(format!(
            "select-and-scatter with more than {MAX_WINDOW} window elements ({})",
            name
        )));
    }
    let rank = in_shape.rank();
    if rank > 0 && crate::jit::clif::tiled_window::windows_disjoint(window, &in_shape, &src_shape) {
        return crate::jit::fused_kernels::window_tiled::emit_disjoint_select_and_scatter(
            e,
            [operand, source, init],
            window,
            [select, scatter],
            output,
            allow_vector,
            part,
        );
    }
    if !matches!(part, OuterPart::Whole) {
        return Err(JitError::Invalid(format!(
            "{}: only a select-and-scatter with tiling windows can be split",
            name
        )));
    }
    let empty = Index::Multi(SmallVec::new());
    let init_v = e.emit(init, &empty, 1)?;
    let count = in_shape.element_count();
    counted_loop(e, 0, count, 1, &mut |e, j| {
        e.store(output, ty, j, init_v, 1)
    })?;
    if rank == 0 || src_shape.element_count() == 0 {
        return Ok(());
    }
    let in_strides = in_shape.strides();
    let mut body = |e: &mut Elemental, o: &[Value]| -> Result<(), JitError> {
        let src_idx = Index::Multi(o.iter().map(|&v| (v, 0)).collect());
        let s = e.emit(source, &src_idx, 1)?;
        let mut have: Option<Value> = None; // i8: something selected
        let mut cur: Option<Value> = None;
        let mut cur_pos: Option<Value> = None;
        for pos in &positions {
            let mut comps: SmallVec<[Comp; 4]> = SmallVec::new();
            let mut ok = None;
            for d in 0..rank {
                let (c, v) = input_coord(
                    e,
                    o[d],
                    pos[d],
                    &window.dims[d],
                    in_shape.dims[d],
                    src_shape.dims[d],
                );
                ok = and_opt(e, ok, v);
                comps.push((c, 0));
            }
            let mut lin: Option<Value> = None;
            for (d, &(c, _)) in comps.iter().enumerate() {
                let t = e.fb.ins().imul_imm_s(c, in_strides[d]);
                lin = Some(match lin {
                    None => t,
                    Some(l) => e.fb.ins().iadd(l, t),
                });
            }
            let lin = lin.expect("rank > 0");
            let x = e.emit(operand, &Index::Multi(comps), 1)?;
            let ok = ok.unwrap_or_else(|| e.fb.ins().iconst(cranelift_codegen::ir::types::I8, 1));
            match (have, cur, cur_pos) {
                (Some(h), Some(c), Some(p)) => {
                    // Take x when valid and (nothing selected yet or select(cur, x) is false).
                    let keep = e.emit_region(select, &[c, x], 1)?[0];
                    let not_keep = e.fb.ins().icmp_imm_s(IntCC::Equal, keep, 0);
                    let not_have = e.fb.ins().icmp_imm_s(IntCC::Equal, h, 0);
                    let want = e.fb.ins().bor(not_keep, not_have);
                    let take = e.fb.ins().band(ok, want);
                    cur = Some(e.fb.ins().select(take, x, c));
                    cur_pos = Some(e.fb.ins().select(take, lin, p));
                    have = Some(e.fb.ins().bor(h, ok));
                }
                _ => {
                    have = Some(ok);
                    cur = Some(x);
                    cur_pos = Some(lin);
                }
            }
        }
        let (h, p) = (have.expect("window"), cur_pos.expect("window"));
        let zero = e.iconst(0);
        let p = e.fb.ins().select(h, p, zero);
        let old = e.load(output, ty, (p, 0), 1)?;
        let new = e.emit_region(scatter, &[old, s], 1)?[0];
        let v = e.fb.ins().select(h, new, old);
        e.store(output, ty, p, v, 1)
    };
    nest(e, &src_shape.dims, &mut Vec::new(), &mut body)
}
