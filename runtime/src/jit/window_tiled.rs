//! `select-and-scatter` when no two windows share an input element (max-pool gradients:
//! 2x2 windows with stride 2, no padding or dilation).
//!
//! Then every input element receives at most one scattered value, so the general
//! read-modify-write at a data-dependent position becomes a fixed pattern: for each source
//! point, find which window position the select picks, and store `scatter(init, source)` at
//! that position and `init` at the others. Nothing is read back from the output, the stores
//! go to known addresses, and when the window does not move along the innermost dimension
//! (the channel dimension of NHWC pooling) four source points run in the lanes of one vector.

use super::buffer::Addr;
use super::elemental::{Comp, Elemental, Index};
use super::elementwise::{select_values, splat_if};
use super::kernel_lowering::{can_vectorize, kernel_instructions, nest_part};
use super::loops::counted_loop;
use super::window::window_positions;
use super::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use smallvec::SmallVec;
use tessel_compiler::ir::{ArrayShape, ComputationId, InstrId, Window};

/// Whether every window lies inside the operand (no padding or dilation) and no two windows
/// overlap (stride at least the size in every dimension).
pub fn windows_disjoint(window: &Window, operand: &ArrayShape, source: &ArrayShape) -> bool {
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
pub fn windows_tile(window: &Window, operand: &ArrayShape, source: &ArrayShape) -> bool {
    window
        .dims
        .iter()
        .zip(operand.dims.iter().zip(&source.dims))
        .all(|(d, (&n, &s))| d.stride == d.size && s * d.size == n)
}

/// Emits a select-and-scatter whose windows are disjoint ([`windows_disjoint`]).
/// `operands` are (operand, source, init), `regions` (select, scatter); `part` restricts it to
/// rows of the source's first dimension (only when the windows tile the operand).
pub fn emit_disjoint_select_and_scatter(
    e: &mut Elemental,
    operands: [InstrId; 3],
    window: &Window,
    regions: [ComputationId; 2],
    output: Addr,
    allow_vector: bool,
    part: Option<(i64, i64)>,
) -> Result<(), JitError> {
    let [operand, source, init] = operands;
    let [select, scatter] = regions;
    let in_shape: ArrayShape = e.shape(operand)?.clone();
    let src_shape: ArrayShape = e.shape(source)?.clone();
    let ty = in_shape.element_type;
    let rank = in_shape.rank();
    let positions = window_positions(window);
    let empty = Index::Multi(SmallVec::new());
    let init_v = e.emit(init, &empty, 1)?;
    if !windows_tile(window, &in_shape, &src_shape) {
        counted_loop(e, 0, in_shape.element_count(), 1, &mut |e, j| {
            e.store(output, ty, j, init_v, 1)
        })?;
    }
    if src_shape.element_count() == 0 {
        return Ok(());
    }
    let last = &window.dims[rank - 1];
    let inner_fixed = last.size == 1 && last.stride == 1;
    let inner = src_shape.dims[rank - 1];
    let instrs = kernel_instructions(e, &[operand, source, init]);
    let vec_end = if allow_vector && inner_fixed && inner >= 4 && can_vectorize(e, &instrs) {
        inner / 4 * 4
    } else {
        0
    };
    let in_strides = in_shape.strides();
    let mut row = |e: &mut Elemental, outer: &[Value]| -> Result<(), JitError> {
        let point = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
            let mut o: Vec<Value> = outer.to_vec();
            o.push(j);
            let lane_coef = |d: usize| if d == rank - 1 && lanes == 4 { 1 } else { 0 };
            let src_idx = Index::Multi(
                o.iter()
                    .enumerate()
                    .map(|(d, &v)| (v, lane_coef(d)))
                    .collect(),
            );
            let s = e.emit(source, &src_idx, lanes)?;
            // Per window position: its linear operand index; the select's running choice.
            let mut lins: Vec<Value> = Vec::with_capacity(positions.len());
            let mut cur: Option<Value> = None;
            let mut chosen: Option<Value> = None;
            for (p, pos) in positions.iter().enumerate() {
                let mut comps: SmallVec<[Comp; 4]> = SmallVec::new();
                let mut lin: Option<Value> = None;
                for d in 0..rank {
                    let wd = &window.dims[d];
                    let mut c = if wd.stride != 1 {
                        e.fb.ins().imul_imm_s(o[d], wd.stride)
                    } else {
                        o[d]
                    };
                    if pos[d] != 0 {
                        c = e.fb.ins().iadd_imm_s(c, pos[d]);
                    }
                    comps.push((c, lane_coef(d)));
                    let t = e.fb.ins().imul_imm_s(c, in_strides[d]);
                    lin = Some(match lin {
                        None => t,
                        Some(l) => e.fb.ins().iadd(l, t),
                    });
                }
                lins.push(lin.expect("rank > 0"));
                let x = e.emit(operand, &Index::Multi(comps), lanes)?;
                let here = position_value(e, p as i64, lanes);
                match (cur, chosen) {
                    (Some(c), Some(ch)) => {
                        // Move to x where select(current, x) is false.
                        let keep = e.emit_region(select, &[c, x], lanes)?[0];
                        let take = if lanes == 1 {
                            e.fb.ins().icmp_imm_s(IntCC::Equal, keep, 0)
                        } else {
                            e.fb.ins().bnot(keep)
                        };
                        cur = Some(select_values(e.fb, take, x, c, lanes));
                        chosen = Some(select_values(e.fb, take, here, ch, lanes));
                    }
                    _ => {
                        cur = Some(x);
                        chosen = Some(here);
                    }
                }
            }
            let chosen = chosen.expect("a window has a position");
            let init_l = splat_if(e.fb, ty, init_v, lanes);
            let hit = e.emit_region(scatter, &[init_l, s], lanes)?[0];
            for (p, &lin) in lins.iter().enumerate() {
                let here = position_value(e, p as i64, lanes);
                let is_here = e.fb.ins().icmp(IntCC::Equal, chosen, here);
                let v = select_values(e.fb, is_here, hit, init_l, lanes);
                e.store(output, ty, lin, v, lanes)?;
            }
            Ok(())
        };
        counted_loop(e, 0, vec_end, 4, &mut |e, j| point(e, j, 4))?;
        counted_loop(e, vec_end, inner, 1, &mut |e, j| point(e, j, 1))
    };
    // With a part, only rows [lo, hi) of the first dimension (the windows tile: no fill).
    nest_part(e, &src_shape.dims[..rank - 1], part, &mut row)
}

/// Window position number `p` as an `i32` (one lane) or `i32x4`.
fn position_value(e: &mut Elemental, p: i64, lanes: u32) -> Value {
    let v = e.fb.ins().iconst(types::I32, p);
    if lanes == 1 {
        v
    } else {
        e.fb.ins().splat(types::I32X4, v)
    }
}
