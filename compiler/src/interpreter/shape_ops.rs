//! Ops that move elements without computing: iota, broadcast, reshape, transpose, slice,
//! dynamic-slice, dynamic-update-slice, concatenate, pad, reverse.
//!
//! Most are one strided gather: output element `i` (row-major) reads source offset
//! `base + sum(i_d * stride_d)`, with stride 0 for broadcast dimensions and negative strides
//! for reversed ones.

use super::element::{for_each_type, index_scalar, typed, Elem};
use super::{err, EvalError, EvalResult};
use crate::ir::{Array, ArrayShape, PadDim, SliceDim};

/// Gathers `out_dims` elements from `src`: element `i` reads `src[base + sum(i_d * strides_d)]`.
/// The innermost dimension runs as a tight loop.
pub(crate) fn strided_gather<T: Copy>(
    src: &[T],
    base: isize,
    out_dims: &[i64],
    strides: &[isize],
) -> Vec<T> {
    let n: usize = out_dims.iter().map(|&d| d as usize).product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let rank = out_dims.len();
    if rank == 0 {
        out.push(src[base as usize]);
        return out;
    }
    let inner = out_dims[rank - 1] as usize;
    let inner_stride = strides[rank - 1];
    let mut index = vec![0i64; rank - 1];
    let mut offset = base;
    loop {
        if inner_stride == 1 {
            let start = offset as usize;
            out.extend_from_slice(&src[start..start + inner]);
        } else {
            let mut o = offset;
            for _ in 0..inner {
                out.push(src[o as usize]);
                o += inner_stride;
            }
        }
        // Advance the odometer over the outer dimensions.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            index[d] += 1;
            offset += strides[d];
            if index[d] < out_dims[d] {
                break;
            }
            offset -= strides[d] * out_dims[d] as isize;
            index[d] = 0;
        }
    }
}

/// Row-major strides of `dims` as isize.
pub(crate) fn strides_of(dims: &[i64]) -> Vec<isize> {
    let mut s = vec![1isize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1] as isize;
    }
    s
}

/// A gather over an array of any element type.
pub(crate) fn gather_array(
    a: &Array,
    base: isize,
    out_dims: &[i64],
    strides: &[isize],
) -> EvalResult<Array> {
    let data = for_each_type!(a.element_type(), T => {
        T::wrap(strided_gather(typed::<T>(a)?, base, out_dims, strides))
    });
    Ok(Array::new(
        ArrayShape::new(a.element_type(), out_dims),
        data,
    ))
}

pub(crate) fn iota(out: &ArrayShape, dimension: i64) -> EvalResult<Array> {
    let d = checked_dim(dimension, out.rank(), "iota")?;
    let n = out.element_count() as usize;
    let size = out.dims[d] as usize;
    let inner: usize = out.dims[d + 1..].iter().map(|&x| x as usize).product();
    let data = for_each_type!(out.element_type, T => {
        let v: Vec<T> = (0..n)
            .map(|i| T::from_scalar(super::element::Scalar::Int(((i / inner) % size) as i128)))
            .collect();
        T::wrap(v)
    });
    Ok(Array::new(out.clone(), data))
}

fn checked_dim(d: i64, rank: usize, what: &str) -> EvalResult<usize> {
    if d < 0 || d as usize >= rank {
        return err(format!(
            "{what}: dimension {d} is out of range for rank {rank}"
        ));
    }
    Ok(d as usize)
}

/// `broadcast`: operand dimension `i` becomes output dimension `dimensions[i]`.
pub(crate) fn broadcast(a: &Array, out: &ArrayShape, dimensions: &[i64]) -> EvalResult<Array> {
    if dimensions.len() != a.shape.rank() {
        return err(format!(
            "broadcast of {} names {} dimensions",
            a.shape,
            dimensions.len()
        ));
    }
    let src_strides = strides_of(&a.shape.dims);
    let mut strides = vec![0isize; out.rank()];
    for (i, &d) in dimensions.iter().enumerate() {
        let d = checked_dim(d, out.rank(), "broadcast")?;
        if a.shape.dims[i] != out.dims[d] {
            return err(format!(
                "broadcast: operand dimension {i} ({}) does not match output dimension {d} ({})",
                a.shape.dims[i], out.dims[d]
            ));
        }
        strides[d] = src_strides[i];
    }
    let r = gather_array(a, 0, &out.dims, &strides)?;
    Ok(Array::new(out.clone(), r.data))
}

pub(crate) fn reshape(a: &Array, out: &ArrayShape) -> EvalResult<Array> {
    if out.element_count() != a.shape.element_count() || out.element_type != a.element_type() {
        return err(format!("cannot reshape {} to {}", a.shape, out));
    }
    Ok(Array::new(out.clone(), a.data.clone()))
}

/// `transpose`: output dimension `i` is operand dimension `permutation[i]`.
pub(crate) fn transpose(a: &Array, permutation: &[i64]) -> EvalResult<Array> {
    let rank = a.shape.rank();
    let mut seen = vec![false; rank];
    for &p in permutation {
        let p = checked_dim(p, rank, "transpose")?;
        if std::mem::replace(&mut seen[p], true) {
            return err(format!("transpose: {permutation:?} is not a permutation"));
        }
    }
    if permutation.len() != rank {
        return err(format!(
            "transpose: {permutation:?} is not a permutation of rank {rank}"
        ));
    }
    let src = strides_of(&a.shape.dims);
    let dims: Vec<i64> = permutation
        .iter()
        .map(|&p| a.shape.dims[p as usize])
        .collect();
    let strides: Vec<isize> = permutation.iter().map(|&p| src[p as usize]).collect();
    gather_array(a, 0, &dims, &strides)
}

pub(crate) fn slice(a: &Array, dims: &[SliceDim]) -> EvalResult<Array> {
    if dims.len() != a.shape.rank() {
        return err(format!("slice of {} has {} ranges", a.shape, dims.len()));
    }
    let src = strides_of(&a.shape.dims);
    let mut base = 0isize;
    let mut out_dims = Vec::with_capacity(dims.len());
    let mut strides = Vec::with_capacity(dims.len());
    for (d, s) in dims.iter().enumerate() {
        if s.start < 0 || s.limit < s.start || s.limit > a.shape.dims[d] || s.stride < 1 {
            return err(format!(
                "slice [{}:{}:{}] is out of range for dimension {d} of {}",
                s.start, s.limit, s.stride, a.shape
            ));
        }
        base += s.start as isize * src[d];
        out_dims.push((s.limit - s.start + s.stride - 1) / s.stride);
        strides.push(src[d] * s.stride as isize);
    }
    gather_array(a, base, &out_dims, &strides)
}

/// Start indices of a dynamic slice, clamped so that the slice stays in bounds (HLO's rule).
fn clamped_starts(a: &ArrayShape, starts: &[&Array], sizes: &[i64]) -> EvalResult<Vec<i64>> {
    if starts.len() != a.rank() || sizes.len() != a.rank() {
        return err(format!(
            "{} start indices for an operand of rank {}",
            starts.len(),
            a.rank()
        ));
    }
    starts
        .iter()
        .enumerate()
        .map(|(d, s)| {
            let start = index_scalar(s)?;
            if sizes[d] > a.dims[d] || sizes[d] < 0 {
                return err(format!(
                    "slice size {} exceeds dimension {d} of {a}",
                    sizes[d]
                ));
            }
            Ok(start.clamp(0, a.dims[d] - sizes[d]))
        })
        .collect()
}

pub(crate) fn dynamic_slice(a: &Array, starts: &[&Array], sizes: &[i64]) -> EvalResult<Array> {
    let starts = clamped_starts(&a.shape, starts, sizes)?;
    let src = strides_of(&a.shape.dims);
    let base = starts
        .iter()
        .zip(&src)
        .map(|(&s, &st)| s as isize * st)
        .sum();
    gather_array(a, base, sizes, &src)
}

pub(crate) fn dynamic_update_slice(
    a: &Array,
    update: &Array,
    starts: &[&Array],
) -> EvalResult<Array> {
    if update.element_type() != a.element_type() || update.shape.rank() != a.shape.rank() {
        return err(format!("cannot update {} with {}", a.shape, update.shape));
    }
    let starts = clamped_starts(&a.shape, starts, &update.shape.dims)?;
    let dst = strides_of(&a.shape.dims);
    let data = for_each_type!(a.element_type(), T => {
        let mut out = typed::<T>(a)?.to_vec();
        let upd = typed::<T>(update)?;
        let base: isize = starts.iter().zip(&dst).map(|(&s, &st)| s as isize * st).sum();
        let mut next = 0;
        for_each_offset(base, &update.shape.dims, &dst, |o| {
            out[o as usize] = upd[next];
            next += 1;
        });
        T::wrap(out)
    });
    Ok(Array::new(a.shape.clone(), data))
}

/// Calls `f` with the offset `base + sum(i_d * strides_d)` of every index `i` of `dims`,
/// in row-major order.
pub(crate) fn for_each_offset(
    base: isize,
    dims: &[i64],
    strides: &[isize],
    mut f: impl FnMut(isize),
) {
    if dims.contains(&0) {
        return;
    }
    let rank = dims.len();
    let mut index = vec![0i64; rank];
    let mut offset = base;
    loop {
        f(offset);
        let mut d = rank;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            offset += strides[d];
            if index[d] < dims[d] {
                break;
            }
            offset -= strides[d] * dims[d] as isize;
            index[d] = 0;
        }
    }
}

pub(crate) fn concatenate(pieces: &[&Array], dimension: i64) -> EvalResult<Array> {
    let first = pieces
        .first()
        .ok_or_else(|| EvalError::new("concatenate needs operands"))?;
    let rank = first.shape.rank();
    let d = checked_dim(dimension, rank, "concatenate")?;
    let mut out_dims = first.shape.dims.clone();
    out_dims[d] = 0;
    for p in pieces {
        let mut a = p.shape.dims.clone();
        let mut b = first.shape.dims.clone();
        a[d] = 0;
        b[d] = 0;
        if a != b || p.element_type() != first.element_type() {
            return err(format!(
                "concatenate: {} does not fit {} along dimension {d}",
                p.shape, first.shape
            ));
        }
        out_dims[d] += p.shape.dims[d];
    }
    let outer: usize = out_dims[..d].iter().map(|&x| x as usize).product();
    let inner: usize = out_dims[d + 1..].iter().map(|&x| x as usize).product();
    let data = for_each_type!(first.element_type(), T => {
        let total = outer * out_dims[d] as usize * inner;
        let mut out: Vec<T> = Vec::with_capacity(total);
        let slices: Vec<&[T]> = pieces.iter().map(|p| typed::<T>(p)).collect::<EvalResult<_>>()?;
        for o in 0..outer {
            for (p, s) in pieces.iter().zip(&slices) {
                let chunk = p.shape.dims[d] as usize * inner;
                out.extend_from_slice(&s[o * chunk..(o + 1) * chunk]);
            }
        }
        T::wrap(out)
    });
    Ok(Array::new(
        ArrayShape::new(first.element_type(), &out_dims),
        data,
    ))
}

/// `pad`: low/high may be negative (cropping); interior puts padding between elements.
pub(crate) fn pad(a: &Array, value: &Array, dims: &[PadDim]) -> EvalResult<Array> {
    let rank = a.shape.rank();
    if dims.len() != rank || value.len() != 1 || value.element_type() != a.element_type() {
        return err(format!(
            "pad of {} needs {rank} padding specs and a scalar {} value",
            a.shape,
            a.element_type()
        ));
    }
    let mut out_dims = Vec::with_capacity(rank);
    for (d, p) in dims.iter().enumerate() {
        let n = a.shape.dims[d];
        if p.interior < 0 {
            return err("pad: negative interior padding");
        }
        let size = p.low + p.high + n + (n - 1).max(0) * p.interior;
        if size < 0 {
            return err(format!(
                "pad: dimension {d} would have negative size {size}"
            ));
        }
        out_dims.push(size);
    }
    let out_strides = strides_of(&out_dims);
    // For every dimension, where each operand index lands in the output (None: cropped).
    let targets: Vec<Vec<Option<isize>>> = dims
        .iter()
        .enumerate()
        .map(|(d, p)| {
            (0..a.shape.dims[d])
                .map(|i| {
                    let o = p.low + i * (p.interior + 1);
                    (o >= 0 && o < out_dims[d]).then_some(o as isize * out_strides[d])
                })
                .collect()
        })
        .collect();
    let data = for_each_type!(a.element_type(), T => {
        let fill = typed::<T>(value)?[0];
        let total: usize = out_dims.iter().map(|&x| x as usize).product();
        let mut out = vec![fill; total];
        let src = typed::<T>(a)?;
        let mut next = 0usize;
        scatter_padded(&targets, 0, 0, src, &mut next, &mut out);
        T::wrap(out)
    });
    Ok(Array::new(
        ArrayShape::new(a.element_type(), &out_dims),
        data,
    ))
}

/// Writes operand elements (row-major, `next` counts them) to their padded positions.
fn scatter_padded<T: Copy>(
    targets: &[Vec<Option<isize>>],
    d: usize,
    offset: isize,
    src: &[T],
    next: &mut usize,
    out: &mut [T],
) {
    if d == targets.len() {
        out[offset as usize] = src[*next];
        *next += 1;
        return;
    }
    let block: usize = targets[d + 1..].iter().map(|t| t.len()).product();
    for t in &targets[d] {
        match t {
            Some(o) => scatter_padded(targets, d + 1, offset + o, src, next, out),
            None => *next += block,
        }
    }
}

pub(crate) fn reverse(a: &Array, dimensions: &[i64]) -> EvalResult<Array> {
    let mut strides = strides_of(&a.shape.dims);
    let mut base = 0isize;
    for &d in dimensions {
        let d = checked_dim(d, a.shape.rank(), "reverse")?;
        base += (a.shape.dims[d] - 1).max(0) as isize * strides[d];
        strides[d] = -strides[d];
    }
    gather_array(a, base, &a.shape.dims, &strides)
}
