//! Select-and-scatter windows that never overlap, as the CLIF helpers see them: whether a
//! select-and-scatter's windows are disjoint or tile its operand, the select's scan over one
//! window, and the value at one index of a select-and-scatter whose windows tile its operand
//! (`tiled_value`), which the elemental emitter computes inside the kernel that reads it. The
//! kernels that walk such a select-and-scatter window by window are in
//! `fused_kernels/window_tiled.rs`.

use super::lane_values::{select_values, splat_if};
use super::value_at_index::{Comp, Elemental, Index};
use crate::jit::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use smallvec::SmallVec;
use tessel_compiler::ir::{ArrayShape, ComputationId, InstrId, Op, Window};

/// Whether every window lies inside the operand (no padding or dilation) and no two windows
/// overlap (stride at least the size in every dimension).
pub(crate) fn windows_disjoint(window: &Window, operand: &ArrayShape, source: &ArrayShape) -> bool {
    window.dims.len() == operand.rank()
        && source.rank() == operand.rank()
        && window
            .dims
            .iter()
            .zip(operand.dims.iter().zip(&source.dims))
            .all(|(d, (&n, &s))| {
                d.size >= 1
                    && d.stride >= d.size
                    && d.pad_low == 0
                    && d.pad_high == 0
                    && d.base_dilation == 1
                    && d.window_dilation == 1
                    && (s == 0 || (s - 1) * d.stride + d.size <= n)
            })
}

/// Whether the windows cover every operand element (then no separate fill with `init`).
pub(crate) fn windows_tile(window: &Window, operand: &ArrayShape, source: &ArrayShape) -> bool {
    window
        .dims
        .iter()
        .zip(operand.dims.iter().zip(&source.dims))
        .all(|(d, (&n, &s))| d.stride == d.size && s * d.size == n)
}

/// All window offsets, row-major.
pub(crate) fn window_positions(w: &Window) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for d in &w.dims {
        let mut next = Vec::new();
        for p in &out {
            for k in 0..d.size {
                let mut q = p.clone();
                q.push(k);
                next.push(q);
            }
        }
        out = next;
    }
    out
}

/// One position of the select's scan over a window: `scan` is the (value, position number)
/// chosen so far, `None` before the first position. The scan moves to `(x, here)` where
/// `select(current, x)` is false.
pub(crate) fn select_step(
    e: &mut Elemental,
    select: ComputationId,
    scan: Option<(Value, Value)>,
    x: Value,
    here: Value,
    lanes: u32,
) -> Result<(Value, Value), JitError> {
    let Some((cur, chosen)) = scan else {
        return Ok((x, here));
    };
    let keep = e.emit_region(select, &[cur, x], lanes)?[0];
    let take = if lanes == 1 {
        e.fb.ins().icmp_imm_s(IntCC::Equal, keep, 0)
    } else {
        e.fb.ins().bnot(keep)
    };
    Ok((
        select_values(e.fb, take, x, cur, lanes),
        select_values(e.fb, take, here, chosen, lanes),
    ))
}

/// Window position number `p` as an `i32` (one lane) or `i32x4`.
pub(crate) fn position_value(e: &mut Elemental, p: i64, lanes: u32) -> Value {
    let v = e.fb.ins().iconst(types::I32, p);
    if lanes == 1 {
        v
    } else {
        e.fb.ins().splat(types::I32X4, v)
    }
}

/// The value at `idx` of select-and-scatter `id` whose windows tile its operand
/// ([`windows_disjoint`] and [`windows_tile`]), computed from the index's window alone:
/// `scatter(init, source[window])` if the select picks this position of its window, else
/// `init`. `None` when the lanes of `idx` would cross windows (then lane by lane).
pub(crate) fn tiled_value(
    e: &mut Elemental,
    id: InstrId,
    idx: &Index,
    lanes: u32,
) -> Result<Option<Value>, JitError> {
    let comp: &tessel_compiler::ir::Computation = e.comp;
    let instr = comp.get(id);
    let Op::SelectAndScatter {
        window,
        select,
        scatter,
    } = &instr.op
    else {
        return Err(JitError::Invalid(format!(
            "{} is not a select-and-scatter",
            instr.name
        )));
    };
    let (select, scatter) = (*select, *scatter);
    let [operand, source, init] = [
        instr.operands()[0],
        instr.operands()[1],
        instr.operands()[2],
    ];
    let name = &instr.name;
    let in_shape: ArrayShape = e.shape(operand)?.clone();
    let src_shape: ArrayShape = e.shape(source)?.clone();
    if !windows_disjoint(window, &in_shape, &src_shape)
        || !windows_tile(window, &in_shape, &src_shape)
    {
        return Err(JitError::Unsupported(format!(
            "{}: a select-and-scatter inside a kernel must have windows that tile its operand",
            name
        )));
    }
    let ty = in_shape.element_type;
    let Some(m) = e.multi(idx, &in_shape, lanes) else {
        return Ok(None);
    };
    // Per dimension: the window's index (source coordinate) and the position inside it.
    let mut window_idx: SmallVec<[Comp; 4]> = SmallVec::new();
    let mut self_pos: Option<Value> = None;
    for (d, wd) in window.dims.iter().enumerate() {
        let (b, c) = m[d];
        if wd.stride == 1 {
            window_idx.push((b, c));
            continue;
        }
        if c != 0 {
            return Ok(None);
        }
        let o = e.fb.ins().udiv_imm_s(b, wd.stride);
        let r = e.fb.ins().urem_imm_s(b, wd.stride);
        window_idx.push((o, 0));
        // Row-major number of the position: later dimensions' sizes multiply this one.
        let later: i64 = window.dims[d + 1..].iter().map(|w| w.size).product();
        let t = e.fb.ins().imul_imm_s(r, later);
        self_pos = Some(match self_pos {
            None => t,
            Some(p) => e.fb.ins().iadd(p, t),
        });
    }
    let self_pos = match self_pos {
        Some(p) => e.fb.ins().ireduce(types::I32, p),
        None => e.fb.ins().iconst(types::I32, 0),
    };
    let self_pos = if lanes == 1 {
        self_pos
    } else {
        e.fb.ins().splat(types::I32X4, self_pos)
    };
    // The select's choice among the window's positions, as in the kernel above.
    let mut scan: Option<(Value, Value)> = None;
    for (p, pos) in window_positions(window).iter().enumerate() {
        let mut comps: SmallVec<[Comp; 4]> = SmallVec::new();
        for (d, wd) in window.dims.iter().enumerate() {
            let (o, c) = window_idx[d];
            let mut x = if wd.stride != 1 {
                e.fb.ins().imul_imm_s(o, wd.stride)
            } else {
                o
            };
            if pos[d] != 0 {
                x = e.fb.ins().iadd_imm_s(x, pos[d]);
            }
            comps.push((x, c));
        }
        let x = e.emit(operand, &Index::Multi(comps), lanes)?;
        let here = position_value(e, p as i64, lanes);
        scan = Some(select_step(e, select, scan, x, here, lanes)?);
    }
    let (_, chosen) = scan.expect("a window has a position");
    let init_v = e.emit(init, &Index::Multi(SmallVec::new()), 1)?;
    let init_l = splat_if(e.fb, ty, init_v, lanes);
    let s = e.emit(source, &Index::Multi(window_idx), lanes)?;
    let hit = e.emit_region(scatter, &[init_l, s], lanes)?[0];
    let is_self = e.fb.ins().icmp(IntCC::Equal, chosen, self_pos);
    Ok(Some(select_values(e.fb, is_self, hit, init_l, lanes)))
}
