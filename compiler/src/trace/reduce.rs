//! Reductions: sum, mean, max over axes (with `keepdims`), and argmax.

use super::dims::{array_shape, normalize_axis, Dim};
use super::emit::{Emitter, OpResult};
use super::tensor::Tensor;
use super::tracer::RegionKind;
use crate::ir::{BinaryOp, ElementType, InstrId, Op, Shape};
use std::panic::Location;

/// Resolves `axes` (negative counts from the end; empty means every dimension) to sorted,
/// distinct dimension numbers.
pub(crate) fn resolve_axes(cx: &Emitter, x: InstrId, axes: &[i64]) -> Result<Vec<usize>, String> {
    let rank = cx.rank(x);
    if axes.is_empty() {
        return Ok((0..rank).collect());
    }
    let mut out = Vec::new();
    for &a in axes {
        let d = normalize_axis(a, rank)
            .ok_or_else(|| format!("axis {a} is out of range for {}", cx.describe(x)))?;
        if out.contains(&d) {
            return Err(format!("axis {a} is given twice"));
        }
        out.push(d);
    }
    out.sort();
    Ok(out)
}

/// Puts size-1 dimensions back at `axes` after a reduction.
fn keep_dims(cx: &mut Emitter, reduced: InstrId, input_dims: &[Dim], axes: &[usize]) -> InstrId {
    let dims: Vec<Dim> = input_dims
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { Dim::Fixed(1) } else { d })
        .collect();
    cx.reshape_to(reduced, &dims)
}

/// A sum or max reduction, optionally keeping the reduced dimensions as size 1.
pub(crate) fn reduce_with(
    cx: &mut Emitter,
    x: InstrId,
    axes: &[i64],
    keepdims: bool,
    kind: RegionKind,
) -> OpResult {
    let axes = resolve_axes(cx, x, axes)?;
    let dims = cx.dims(x);
    let r = cx.reduce(x, &axes, kind);
    Ok(if keepdims {
        keep_dims(cx, r, &dims, &axes)
    } else {
        r
    })
}

/// Broadcasts the result of reducing `axes` back to the input's dimensions `input_dims`
/// (one `broadcast`, no intermediate size-1 reshape).
pub(crate) fn broadcast_back(
    cx: &mut Emitter,
    reduced: InstrId,
    input_dims: &[Dim],
    axes: &[usize],
) -> InstrId {
    let kept: Vec<i64> = (0..input_dims.len())
        .filter(|i| !axes.contains(i))
        .map(|i| i as i64)
        .collect();
    let ty = cx.ty(reduced);
    cx.emit_array(
        Op::Broadcast { dimensions: kept },
        array_shape(ty, input_dims),
        &[reduced],
    )
}

/// The mean over `axes`: the sum divided by the number of elements reduced. When a reduced
/// dimension is unknown the count is itself computed (a sum of ones), so the trace stays
/// correct for any batch size.
pub(crate) fn mean_with(cx: &mut Emitter, x: InstrId, axes: &[i64], keepdims: bool) -> OpResult {
    let ty = cx.ty(x);
    if !ty.is_float() {
        return Err(format!(
            "the mean needs a floating-point operand, got {} (cast it first)",
            cx.describe(x)
        ));
    }
    let resolved = resolve_axes(cx, x, axes)?;
    let dims = cx.dims(x);
    let sum = reduce_with(cx, x, axes, keepdims, RegionKind::Sum)?;
    let fixed: Option<i64> = resolved.iter().map(|&a| dims[a].fixed()).product();
    match fixed {
        Some(count) => cx.binary_scalar(BinaryOp::Divide, sum, count as f64),
        None => {
            let one = cx.constant_scalar(ty, 1.0);
            let ones = cx.broadcast_to(one, &dims)?;
            let count = reduce_with(cx, ones, axes, keepdims, RegionKind::Sum)?;
            cx.binary(BinaryOp::Divide, sum, count)
        }
    }
}

impl Tensor {
    /// Sum over `axes` (negative axes count from the end; `&[]` means all dimensions).
    #[track_caller]
    pub fn reduce_sum(&self, axes: &[i64], keepdims: bool) -> Tensor {
        Tensor::op("reduce", false, Location::caller(), &[self], |cx, v| {
            reduce_with(cx, v[0], axes, keepdims, RegionKind::Sum)
        })
    }

    /// Maximum over `axes` (`&[]` means all dimensions).
    #[track_caller]
    pub fn reduce_max(&self, axes: &[i64], keepdims: bool) -> Tensor {
        Tensor::op("reduce", false, Location::caller(), &[self], |cx, v| {
            reduce_with(cx, v[0], axes, keepdims, RegionKind::Max)
        })
    }

    /// Mean over `axes` (`&[]` means all dimensions).
    #[track_caller]
    pub fn reduce_mean(&self, axes: &[i64], keepdims: bool) -> Tensor {
        Tensor::op("reduce_mean", true, Location::caller(), &[self], |cx, v| {
            mean_with(cx, v[0], axes, keepdims)
        })
    }

    /// The index (s32) of the largest element along `axis`; the first one on ties. Traced as
    /// one two-operand `reduce` over (value, iota) pairs.
    #[track_caller]
    pub fn argmax(&self, axis: i64) -> Tensor {
        Tensor::op("argmax", true, Location::caller(), &[self], |cx, v| {
            let x = v[0];
            let axes = resolve_axes(cx, x, &[axis])?;
            let dims = cx.dims(x);
            let ty = cx.ty(x);
            let index_ty = ElementType::S32;
            let iota = cx.iota(index_ty, &dims, axes[0]);
            let lowest = cx.lowest(ty);
            let zero = cx.constant_scalar(index_ty, 0.0);
            let region = cx.region(RegionKind::ArgMax(index_ty), ty);
            let out: Vec<Dim> = dims
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != axes[0])
                .map(|(_, &d)| d)
                .collect();
            let values = Shape::Array(array_shape(ty, &out));
            let indices = array_shape(index_ty, &out);
            let pair = cx.emit(
                Op::Reduce {
                    dimensions: vec![axes[0] as i64],
                    to_apply: region,
                },
                Shape::Tuple(vec![values, Shape::Array(indices.clone())]),
                &[x, iota, lowest, zero],
            );
            Ok(cx.emit_array(Op::GetTupleElement { index: 1 }, indices, &[pair]))
        })
    }
}
