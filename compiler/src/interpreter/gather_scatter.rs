//! `gather` and `scatter` with XLA's semantics.
//!
//! Both are written as an index map first: [`gather_source_offsets`] gives, for each result
//! element, the operand element it copies; [`scatter_target_offsets`] gives, for each update
//! element, the operand element it combines into. The JIT's host routine uses the same maps
//! over its arena, so both backends move the same elements.
//!
//! Out-of-bounds starts follow XLA: a gather's start index is clamped so the whole slice is
//! inside the operand (as dynamic-slice); a scatter whose window would leave the operand
//! skips that whole window (XLA's scatter expander). Scatter applies the updates in row-major
//! order of the updates array, so duplicate indices combine in index order.

use super::element::{for_each_type, typed, Elem};
use super::elementwise::binary_fn;
use super::plan::{Plan, ScalarFn};
use super::reduce::{array_from_scalars, call_reducer, element_literal, simple_binary};
use super::shape_ops::strides_of;
use super::{err, EvalResult, Evaluator, LoneReplica};
use crate::ir::{
    Array, ArrayShape, BinaryOp, ComputationId, GatherDimensionNumbers, InstrId, Literal, Module,
    Op, ScatterDimensionNumbers,
};
use std::sync::Arc;

/// An index as a signed number; an unsigned index too large for i64 is past every bound.
fn index_value(indices: &Array, i: usize) -> i64 {
    let v = indices.data.get_i64(i);
    if indices.element_type().is_unsigned_int() && v < 0 {
        i64::MAX
    } else {
        v
    }
}

/// Steps a row-major multi-index through `dims`; false after the last one.
fn next(index: &mut [i64], dims: &[i64]) -> bool {
    for d in (0..dims.len()).rev() {
        index[d] += 1;
        if index[d] < dims[d] {
            return true;
        }
        index[d] = 0;
    }
    false
}

/// The shared geometry: where the index vectors are and how operand dimensions map.
struct Geometry<'a> {
    indices: &'a Array,
    idx_strides: Vec<isize>,
    index_vector_dim: usize,
    /// Operand dimension started by each index vector component.
    start_map: &'a [i64],
    /// (operand dimension, indices dimension) pairs of batching dims.
    batching: Vec<(usize, usize)>,
}

impl Geometry<'_> {
    /// The start of the window for batch position `batch` (the indices' dimensions other
    /// than `index_vector_dim`, in order), unclamped, as an operand index.
    fn start(&self, batch: &[i64], operand_rank: usize, start: &mut [i64]) {
        start[..operand_rank].iter_mut().for_each(|s| *s = 0);
        let rank = self.idx_strides.len();
        // The full indices position of component 0 of the index vector.
        let mut base = 0isize;
        let mut full = vec![0i64; rank];
        let mut b = batch.iter();
        for (d, f) in full.iter_mut().enumerate() {
            if d != self.index_vector_dim {
                *f = *b.next().expect("batch rank");
                base += *f as isize * self.idx_strides[d];
            }
        }
        let step = if self.index_vector_dim < rank {
            self.idx_strides[self.index_vector_dim]
        } else {
            0
        };
        for (k, &od) in self.start_map.iter().enumerate() {
            start[od as usize] = index_value(self.indices, (base + k as isize * step) as usize);
        }
        for &(od, id) in &self.batching {
            start[od] = full[id];
        }
    }
}

/// For each element of the gather's result, in row-major order, the row-major offset of the
/// operand element it copies.
pub fn gather_source_offsets(
    dn: &GatherDimensionNumbers,
    slice_sizes: &[i64],
    operand: &ArrayShape,
    indices: &Array,
    out: &ArrayShape,
) -> EvalResult<Vec<usize>> {
    let rank = operand.rank();
    if slice_sizes.len() != rank || dn.start_index_map.iter().any(|&d| d as usize >= rank) {
        return err(format!(
            "gather dimension numbers do not fit operand {operand}"
        ));
    }
    let count = out.element_count().max(0) as usize;
    if count == 0 {
        return Ok(Vec::new());
    }
    let geo = Geometry {
        indices,
        idx_strides: strides_of(&indices.shape.dims),
        index_vector_dim: dn.index_vector_dim as usize,
        start_map: &dn.start_index_map,
        batching: dn
            .operand_batching_dims
            .iter()
            .zip(&dn.start_indices_batching_dims)
            .map(|(&o, &i)| (o as usize, i as usize))
            .collect(),
    };
    // Operand dimensions the offset dims walk, in order.
    let window: Vec<usize> = (0..rank)
        .filter(|&d| {
            !dn.collapsed_slice_dims.contains(&(d as i64))
                && !dn.operand_batching_dims.contains(&(d as i64))
        })
        .collect();
    let op_strides = strides_of(&operand.dims);
    let operand_len = operand.element_count().max(0) as usize;
    let out_rank = out.rank();
    let is_offset: Vec<bool> = (0..out_rank)
        .map(|d| dn.offset_dims.contains(&(d as i64)))
        .collect();
    let mut offsets = Vec::with_capacity(count);
    let mut index = vec![0i64; out_rank];
    let mut batch = Vec::with_capacity(out_rank);
    let mut start = vec![0i64; rank];
    loop {
        batch.clear();
        batch.extend((0..out_rank).filter(|&d| !is_offset[d]).map(|d| index[d]));
        geo.start(&batch, rank, &mut start);
        // Clamp so that the whole slice is inside the operand (XLA: as dynamic-slice).
        for &d in dn.start_index_map.iter() {
            let d = d as usize;
            start[d] = start[d].clamp(0, operand.dims[d] - slice_sizes[d]);
        }
        let mut w = window.iter();
        for (d, &i) in index.iter().enumerate() {
            if is_offset[d] {
                let od = *w.next().expect("offset dims match the window");
                start[od] += i;
            }
        }
        let off: isize = start
            .iter()
            .zip(&op_strides)
            .map(|(&s, &st)| s as isize * st)
            .sum();
        // Only a slice of size 0 in a collapsed dimension can point outside the operand.
        if off < 0 || off as usize >= operand_len {
            return err(format!(
                "gather of {operand} with slice_sizes={slice_sizes:?} reads outside the operand \
                 (a collapsed dimension has slice size 0)"
            ));
        }
        offsets.push(off as usize);
        if !next(&mut index, &out.dims) {
            break;
        }
    }
    Ok(offsets)
}

/// For each element of the updates, in row-major order, the row-major offset of the operand
/// element it combines into; `None` when its window does not fit in the operand at its start.
pub(crate) fn scatter_target_offsets(
    dn: &ScatterDimensionNumbers,
    operand: &ArrayShape,
    indices: &Array,
    updates: &ArrayShape,
) -> EvalResult<Vec<Option<usize>>> {
    let rank = operand.rank();
    if dn
        .scatter_dims_to_operand_dims
        .iter()
        .any(|&d| d as usize >= rank)
    {
        return err(format!(
            "scatter dimension numbers do not fit operand {operand}"
        ));
    }
    let count = updates.element_count().max(0) as usize;
    if count == 0 {
        return Ok(Vec::new());
    }
    let geo = Geometry {
        indices,
        idx_strides: strides_of(&indices.shape.dims),
        index_vector_dim: dn.index_vector_dim as usize,
        start_map: &dn.scatter_dims_to_operand_dims,
        batching: dn
            .input_batching_dims
            .iter()
            .zip(&dn.scatter_indices_batching_dims)
            .map(|(&o, &i)| (o as usize, i as usize))
            .collect(),
    };
    let window: Vec<usize> = (0..rank)
        .filter(|&d| {
            !dn.inserted_window_dims.contains(&(d as i64))
                && !dn.input_batching_dims.contains(&(d as i64))
        })
        .collect();
    // The window's extent in each operand dimension (1 where inserted or batched).
    let mut extent = vec![1i64; rank];
    for (&ud, &od) in dn.update_window_dims.iter().zip(&window) {
        extent[od] = updates.dims[ud as usize];
    }
    let op_strides = strides_of(&operand.dims);
    let u_rank = updates.rank();
    let is_window: Vec<bool> = (0..u_rank)
        .map(|d| dn.update_window_dims.contains(&(d as i64)))
        .collect();
    let mut targets = Vec::with_capacity(count);
    let mut index = vec![0i64; u_rank];
    let mut batch = Vec::with_capacity(u_rank);
    let mut start = vec![0i64; rank];
    loop {
        batch.clear();
        batch.extend((0..u_rank).filter(|&d| !is_window[d]).map(|d| index[d]));
        geo.start(&batch, rank, &mut start);
        let fits = (0..rank).all(|d| start[d] >= 0 && start[d] <= operand.dims[d] - extent[d]);
        if fits {
            let mut w = window.iter();
            for (d, &i) in index.iter().enumerate() {
                if is_window[d] {
                    let od = *w.next().expect("window dims match");
                    start[od] += i;
                }
            }
            let off: isize = start
                .iter()
                .zip(&op_strides)
                .map(|(&s, &st)| s as isize * st)
                .sum();
            targets.push(Some(off as usize));
        } else {
            targets.push(None);
        }
        if !next(&mut index, &updates.dims) {
            break;
        }
    }
    Ok(targets)
}

pub(crate) fn gather(
    operand: &Array,
    indices: &Array,
    dn: &GatherDimensionNumbers,
    slice_sizes: &[i64],
    out: &ArrayShape,
) -> EvalResult<Array> {
    let offsets = gather_source_offsets(dn, slice_sizes, &operand.shape, indices, out)?;
    let data = for_each_type!(operand.element_type(), T => {
        let xs = typed::<T>(operand)?;
        T::wrap(offsets.iter().map(|&o| xs[o]).collect())
    });
    Ok(Array::new(
        out.with_element_type(operand.element_type()),
        data,
    ))
}

pub(crate) fn scatter(
    ev: &Evaluator,
    operand: &Array,
    indices: &Array,
    updates: &Array,
    dn: &ScatterDimensionNumbers,
    to_apply: ComputationId,
) -> EvalResult<Array> {
    let general = |acc: Literal, u: Literal| -> EvalResult<Literal> {
        Ok(call_reducer(ev, to_apply, &[acc], &[u])?
            .pop()
            .expect("one accumulator"))
    };
    scatter_with(
        simple_binary(ev, to_apply),
        &general,
        operand,
        indices,
        updates,
        dn,
    )
}

/// Scatter with a combiner that is one binary op (`simple`, applied directly) or else
/// `general`, called on scalar literals `(old value, update)`.
fn scatter_with(
    simple: Option<(BinaryOp, bool)>,
    general: &dyn Fn(Literal, Literal) -> EvalResult<Literal>,
    operand: &Array,
    indices: &Array,
    updates: &Array,
    dn: &ScatterDimensionNumbers,
) -> EvalResult<Array> {
    if updates.element_type() != operand.element_type() {
        return err(format!(
            "scatter updates {} must have the element type of operand {}",
            updates.shape, operand.shape
        ));
    }
    let targets = scatter_target_offsets(dn, &operand.shape, indices, &updates.shape)?;
    if let Some((op, swapped)) = simple {
        let data = for_each_type!(operand.element_type(), T => {
            let mut out = typed::<T>(operand)?.to_vec();
            let ups = typed::<T>(updates)?;
            let f = binary_fn::<T>(op)?;
            for (t, &u) in targets.iter().zip(ups) {
                if let Some(t) = *t {
                    out[t] = if swapped { f(u, out[t]) } else { f(out[t], u) };
                }
            }
            T::wrap(out)
        });
        return Ok(Array::new(operand.shape.clone(), data));
    }
    let mut out: Vec<Literal> = (0..operand.len())
        .map(|i| element_literal(operand, i))
        .collect();
    for (i, t) in targets.iter().enumerate() {
        if let Some(t) = *t {
            let acc = std::mem::replace(&mut out[t], Literal::Token);
            out[t] = general(acc, element_literal(updates, i))?;
        }
    }
    array_from_scalars(operand.element_type(), &operand.shape.dims, &out)
}

/// One scatter instruction, computed from its operand values exactly as the interpreter
/// computes it (the JIT calls it from a host routine).
pub struct ScatterStep {
    module: Arc<Module>,
    to_apply: ComputationId,
    dims: ScatterDimensionNumbers,
    /// The combiner as one binary op, when it is one (then no evaluator is needed).
    simple: Option<(BinaryOp, bool)>,
}

impl ScatterStep {
    /// The scatter `id` of computation `comp`.
    pub fn new(module: Arc<Module>, comp: ComputationId, id: InstrId) -> EvalResult<ScatterStep> {
        if comp.0 as usize >= module.computations.len() {
            return err(format!("{comp} does not exist in module {}", module.name));
        }
        let Op::Scatter { dims, to_apply, .. } = module.computation(comp).get(id).op.clone() else {
            return err("not a scatter");
        };
        let simple = match Plan::new(&module, to_apply).scalar_fn {
            Some(ScalarFn::Binary { op, swapped }) => Some((op, swapped)),
            _ => None,
        };
        Ok(ScatterStep {
            module,
            to_apply,
            dims,
            simple,
        })
    }

    pub fn run(&self, operand: &Array, indices: &Array, updates: &Array) -> EvalResult<Array> {
        let evaluator = std::cell::OnceCell::new();
        let general = |acc: Literal, u: Literal| -> EvalResult<Literal> {
            let ev = evaluator.get_or_init(|| Evaluator::new(&self.module, &LoneReplica));
            Ok(call_reducer(ev, self.to_apply, &[acc], &[u])?
                .pop()
                .expect("one accumulator"))
        };
        scatter_with(self.simple, &general, operand, indices, updates, &self.dims)
    }
}
