//! `select-and-scatter` when no two windows share an input element (max-pool gradients:
//! 2x2 windows with stride 2, no padding or dilation).
//!
//! Then every input element receives at most one scattered value, so the general
//! read-modify-write at a data-dependent position becomes a fixed pattern: for each source
//! point, find which window position the select picks, and store `scatter(init, source)` at
//! that position and `init` at the others. Nothing is read back from the output, the stores
//! go to known addresses, and when the window does not move along the innermost dimension
//! (the channel dimension of NHWC pooling) four source points run in the lanes of one vector.
//!
//! When the windows also tile the operand, the value at one output index is a pure function of
//! its window (`tiled_value` in `clif/tiled_window.rs`), so such a select-and-scatter can be
//! computed inside the kernel of the fusion that reads it (the fusion pass puts a max-pool
//! gradient and the ReLU gradient after it together), and its output is never stored.

use crate::jit::buffer::Addr;
use crate::jit::clif::lane_values::{select_values, splat_if};
use crate::jit::clif::loops::counted_loop;
use crate::jit::clif::tiled_window::{
    position_value, select_step, window_positions, windows_disjoint, windows_tile,
};
use crate::jit::clif::value_at_index::{Comp, Elemental, Index};
use crate::jit::fused_kernels::elementwise::{
    can_vectorize, kernel_instructions, nest_part, OuterPart,
};
use crate::jit::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use smallvec::SmallVec;
use tessel_compiler::ir::{ArrayShape, ComputationId, InstrId, Op, Window};

/// Emits a select-and-scatter whose windows are disjoint ([`windows_disjoint`]).
/// `operands` are (operand, source, init), `regions` (select, scatter); `part` restricts it to
/// rows of the source's first dimension (only when the windows tile the operand).
pub(crate) fn emit_disjoint_select_and_scatter(
    e: &mut Elemental,
    operands: [InstrId; 3],
    window: &Window,
    regions: [ComputationId; 2],
    output: Addr,
    allow_vector: bool,
    part: OuterPart,
) -> Result<(), JitError> {
    let ty = e.shape(operands[0])?.element_type;
    let mut store = |e: &mut Elemental, lin: Value, _: &Index, v: Value, lanes: u32| {
        e.store(output, ty, lin, v, lanes)
    };
    let walk = Walk {
        operands,
        window,
        regions,
        allow_vector,
        extra: &[],
    };
    walk_windows(e, &walk, part, &mut store)
}

/// Receives each value of a select-and-scatter walked by [`walk_windows`]: its linear index
/// in the operand's shape, its multi-index, the value and the lane count.
pub(super) type Sink<'s> =
    dyn FnMut(&mut Elemental, Value, &Index, Value, u32) -> Result<(), JitError> + 's;

/// A select-and-scatter to walk window by window.
pub(super) struct Walk<'w> {
    pub operands: [InstrId; 3],
    pub window: &'w Window,
    pub regions: [ComputationId; 2],
    pub allow_vector: bool,
    /// Other instructions evaluated at each point (for the 4-lane check).
    pub extra: &'w [InstrId],
}

/// Emits a kernel for fusion root `root` that reads select-and-scatter `ss`, whose windows
/// tile its operand, at its own index through elementwise ops (the ReLU gradient after a
/// max-pool gradient): the loop runs over the select-and-scatter's windows as its own kernel
/// does, and at each position the root is computed with the select-and-scatter's value
/// provided from registers, so that value is never stored. `part` restricts it to rows of the
/// source's first dimension (`window::select_and_scatter_split`).
pub(crate) fn emit_tiled_consumer_part(
    e: &mut Elemental,
    ss: InstrId,
    root: InstrId,
    output: Addr,
    allow_vector: bool,
    part: OuterPart,
) -> Result<(), JitError> {
    let extra = [root];
    let walk = walk_of(e, ss, &extra, allow_vector)?;
    let ty = e.shape(root)?.element_type;
    let mut store = |e: &mut Elemental, lin: Value, idx: &Index, v: Value, lanes: u32| {
        e.provide(ss, idx, lanes, v);
        let r = e.emit(root, idx, lanes)?;
        e.store(output, ty, lin, r, lanes)
    };
    walk_windows(e, &walk, part, &mut store)
}

/// The [`Walk`] of select-and-scatter `ss`, with `extra` evaluated at each point.
pub(super) fn walk_of<'w: 'x, 'x>(
    e: &Elemental<'w, '_>,
    ss: InstrId,
    extra: &'x [InstrId],
    allow_vector: bool,
) -> Result<Walk<'x>, JitError> {
    let comp: &'w tessel_compiler::ir::Computation = e.comp;
    let instr = comp.get(ss);
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
    Ok(Walk {
        operands: [
            instr.operands()[0],
            instr.operands()[1],
            instr.operands()[2],
        ],
        window,
        regions: [*select, *scatter],
        allow_vector,
        extra,
    })
}

/// Whether [`emit_tiled_consumer_part`] applies to fusion root `root`: it has the shape of a
/// select-and-scatter `ss` with tiling windows that it reads.
pub(crate) fn tiled_consumer(e: &Elemental, root: InstrId) -> Option<InstrId> {
    let out = e.comp.get(root).shape.as_array()?;
    let ss = crate::jit::fused_kernels::elementwise::kernel_instructions(e, &[root])
        .into_iter()
        .find(|&id| {
            // A select-and-scatter computed in this kernel, not one read from its buffer.
            !e.leaves.contains_key(&id) && matches!(e.comp.get(id).op, Op::SelectAndScatter { .. })
        })?;
    let instr = e.comp.get(ss);
    let Op::SelectAndScatter { window, .. } = &instr.op else {
        return None;
    };
    let operand = e.comp.get(instr.operands()[0]).shape.as_array()?;
    let source = e.comp.get(instr.operands()[1]).shape.as_array()?;
    let ok = operand.dims == out.dims
        && operand.rank() > 0
        && windows_disjoint(window, operand, source)
        && windows_tile(window, operand, source);
    ok.then_some(ss)
}

/// The loop of [`emit_disjoint_select_and_scatter`] over the source points (rows `part` of the
/// first dimension only), giving every window position's value to `sink`.
pub(super) fn walk_windows(
    e: &mut Elemental,
    walk: &Walk,
    part: OuterPart,
    sink: &mut Sink,
) -> Result<(), JitError> {
    let (window, allow_vector) = (walk.window, walk.allow_vector);
    let [operand, source, init] = walk.operands;
    let [select, scatter] = walk.regions;
    let in_shape: ArrayShape = e.shape(operand)?.clone();
    let src_shape: ArrayShape = e.shape(source)?.clone();
    let ty = in_shape.element_type;
    let rank = in_shape.rank();
    let positions = window_positions(window);
    let empty = Index::Multi(SmallVec::new());
    let init_v = e.emit(init, &empty, 1)?;
    if !windows_tile(window, &in_shape, &src_shape) {
        counted_loop(e, 0, in_shape.element_count(), 1, &mut |e, j| {
            sink(e, j, &Index::Linear((j, 0)), init_v, 1)
        })?;
    }
    if src_shape.element_count() == 0 {
        return Ok(());
    }
    let last = &window.dims[rank - 1];
    let inner_fixed = last.size == 1 && last.stride == 1;
    let inner = src_shape.dims[rank - 1];
    let mut roots = vec![operand, source, init];
    roots.extend(walk.extra);
    let instrs = kernel_instructions(e, &roots);
    let vec_end = if allow_vector && inner_fixed && inner >= 4 && can_vectorize(e, &instrs) {
        inner / 4 * 4
    } else {
        0
    };
    let in_strides = in_shape.strides();
    let mut row = |e: &mut Elemental, outer: &[Value]| -> Result<(), JitError> {
        let mut point = |e: &mut Elemental, j: Value, lanes: u32| -> Result<(), JitError> {
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
            // Per window position: its linear operand index and multi-index; the select's
            // running choice.
            let mut lins: Vec<Value> = Vec::with_capacity(positions.len());
            let mut idxs: Vec<Index> = Vec::with_capacity(positions.len());
            let mut scan: Option<(Value, Value)> = None;
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
                idxs.push(Index::Multi(comps.clone()));
                let x = e.emit(operand, &Index::Multi(comps), lanes)?;
                let here = position_value(e, p as i64, lanes);
                scan = Some(select_step(e, select, scan, x, here, lanes)?);
            }
            let (_, chosen) = scan.expect("a window has a position");
            let init_l = splat_if(e.fb, ty, init_v, lanes);
            let hit = e.emit_region(scatter, &[init_l, s], lanes)?[0];
            for (p, &lin) in lins.iter().enumerate() {
                let here = position_value(e, p as i64, lanes);
                let is_here = e.fb.ins().icmp(IntCC::Equal, chosen, here);
                let v = select_values(e.fb, is_here, hit, init_l, lanes);
                sink(e, lin, &idxs[p], v, lanes)?;
            }
            Ok(())
        };
        counted_loop(e, 0, vec_end, 4, &mut |e, j| point(e, j, 4))?;
        counted_loop(e, vec_end, inner, 1, &mut |e, j| point(e, j, 1))
    };
    // With a part, only rows [lo, hi) of the first dimension (the windows tile: no fill).
    nest_part(e, &src_shape.dims[..rank - 1], part, &mut row)
}
