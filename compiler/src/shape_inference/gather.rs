//! `gather` and `scatter`: the dimension numbers checked against the operands, as XLA's
//! shape inference checks them, and the result shapes.

use super::util::{check_reducer, err, expect_array, expect_operands, list, text, Result};
use crate::ir::{
    ArrayShape, ComputationId, GatherDimensionNumbers, Module, ScatterDimensionNumbers, Shape,
};

/// Checks that `dims` is strictly increasing (XLA requires sorted offset and collapsed dims).
fn sorted(name: &str, what: &str, dims: &[i64]) -> Result<()> {
    if dims.windows(2).any(|w| w[0] >= w[1]) {
        return err(format!(
            "{name}: {what}={dims:?} must be sorted and without repeats"
        ));
    }
    Ok(())
}

/// Checks each dimension of `dims` is in `0..rank` and none repeats.
fn in_range(name: &str, what: &str, dims: &[i64], rank: usize, of: &str) -> Result<()> {
    for (i, &d) in dims.iter().enumerate() {
        if d < 0 || d as usize >= rank {
            return err(format!(
                "{name}: {what}={dims:?} names dimension {d}, outside {of} (rank {rank})"
            ));
        }
        if dims[..i].contains(&d) {
            return err(format!("{name}: {what}={dims:?} names dimension {d} twice"));
        }
    }
    Ok(())
}

/// The indices' dimensions other than `index_vector_dim` (the batch of index vectors), after
/// checking the index vector length against `map_len`.
fn index_batch(
    name: &str,
    indices: &ArrayShape,
    shape: &Shape,
    index_vector_dim: i64,
    map_len: usize,
    map_what: &str,
) -> Result<Vec<i64>> {
    if !indices.element_type.is_integer() {
        return err(format!(
            "{name}: the indices {} must be integers",
            text(shape)
        ));
    }
    let rank = indices.rank() as i64;
    if index_vector_dim < 0 || index_vector_dim > rank {
        return err(format!(
            "{name}: index_vector_dim={index_vector_dim} must be in 0..={rank} for indices {}",
            text(shape)
        ));
    }
    let vector_len = if index_vector_dim == rank {
        1
    } else {
        indices.dims[index_vector_dim as usize]
    };
    if vector_len != map_len as i64 {
        return err(format!(
            "{name}: the index vectors of {} (dimension {index_vector_dim}) have {vector_len} \
             components, but {map_what} has {map_len}",
            text(shape)
        ));
    }
    Ok((0..rank)
        .filter(|&d| d != index_vector_dim)
        .map(|d| indices.dims[d as usize])
        .collect())
}

/// Checks batching dims: pairs of an operand dimension and an indices dimension of equal size.
fn batching(
    name: &str,
    (operand_what, operand_dims): (&str, &[i64]),
    (indices_what, indices_dims): (&str, &[i64]),
    (a, a_shape): (&ArrayShape, &Shape),
    (idx, idx_shape): (&ArrayShape, &Shape),
    index_vector_dim: i64,
) -> Result<()> {
    in_range(name, operand_what, operand_dims, a.rank(), &text(a_shape))?;
    in_range(
        name,
        indices_what,
        indices_dims,
        idx.rank(),
        &text(idx_shape),
    )?;
    if operand_dims.len() != indices_dims.len() {
        return err(format!(
            "{name}: {operand_what}={operand_dims:?} and {indices_what}={indices_dims:?} must \
             have the same length"
        ));
    }
    for (&o, &i) in operand_dims.iter().zip(indices_dims) {
        if i == index_vector_dim {
            return err(format!(
                "{name}: {indices_what} must not contain index_vector_dim={index_vector_dim}"
            ));
        }
        if a.dims[o as usize] != idx.dims[i as usize] {
            return err(format!(
                "{name}: operand dimension {o} of {} and indices dimension {i} of {} are \
                 batched together but their sizes differ",
                text(a_shape),
                text(idx_shape)
            ));
        }
    }
    Ok(())
}

pub(crate) fn gather(
    dn: &GatherDimensionNumbers,
    slice_sizes: &[i64],
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "gather";
    expect_operands(name, operands, 2)?;
    let a = expect_array(name, "the operand", operands[0])?;
    let idx = expect_array(name, "the indices (operand 1)", operands[1])?;
    let of = text(operands[0]);
    let batch = index_batch(
        name,
        idx,
        operands[1],
        dn.index_vector_dim,
        dn.start_index_map.len(),
        "start_index_map",
    )?;
    if slice_sizes.len() != a.rank() {
        return err(format!(
            "gather: slice_sizes={slice_sizes:?} must give one size per dimension of operand {of}"
        ));
    }
    for (d, &s) in slice_sizes.iter().enumerate() {
        if s < 0 || s > a.dims[d] {
            return err(format!(
                "gather: slice size {s} of dimension {d} is outside operand {of} (need 0 <= \
                 size <= {})",
                a.dims[d]
            ));
        }
    }
    in_range(name, "start_index_map", &dn.start_index_map, a.rank(), &of)?;
    sorted(name, "collapsed_slice_dims", &dn.collapsed_slice_dims)?;
    in_range(
        name,
        "collapsed_slice_dims",
        &dn.collapsed_slice_dims,
        a.rank(),
        &of,
    )?;
    sorted(name, "offset_dims", &dn.offset_dims)?;
    batching(
        name,
        ("operand_batching_dims", &dn.operand_batching_dims),
        (
            "start_indices_batching_dims",
            &dn.start_indices_batching_dims,
        ),
        (a, operands[0]),
        (idx, operands[1]),
        dn.index_vector_dim,
    )?;
    for &d in dn
        .collapsed_slice_dims
        .iter()
        .chain(&dn.operand_batching_dims)
    {
        if slice_sizes[d as usize] > 1 {
            return err(format!(
                "gather: dimension {d} is collapsed or batched, so its slice size must be 0 or \
                 1, not {}",
                slice_sizes[d as usize]
            ));
        }
        if dn.collapsed_slice_dims.contains(&d) && dn.operand_batching_dims.contains(&d) {
            return err(format!(
                "gather: dimension {d} is both collapsed and batched"
            ));
        }
        if dn.operand_batching_dims.contains(&d) && dn.start_index_map.contains(&d) {
            return err(format!(
                "gather: dimension {d} is both batched and in start_index_map"
            ));
        }
    }
    let window: Vec<i64> = (0..a.rank() as i64)
        .filter(|d| !dn.collapsed_slice_dims.contains(d) && !dn.operand_batching_dims.contains(d))
        .map(|d| slice_sizes[d as usize])
        .collect();
    if window.len() != dn.offset_dims.len() {
        return err(format!(
            "gather: offset_dims={:?} must name one output dimension per operand dimension \
             that is neither collapsed nor batched ({} of them in {of})",
            dn.offset_dims,
            window.len()
        ));
    }
    let out_rank = batch.len() + window.len();
    in_range(name, "offset_dims", &dn.offset_dims, out_rank, "the result")?;
    let (mut b, mut w) = (batch.iter(), window.iter());
    let dims: Vec<i64> = (0..out_rank as i64)
        .map(|d| {
            if dn.offset_dims.contains(&d) {
                *w.next().expect("counted")
            } else {
                *b.next().expect("counted")
            }
        })
        .collect();
    Ok(Shape::array(a.element_type, &dims))
}

pub(crate) fn scatter(
    module: &Module,
    dn: &ScatterDimensionNumbers,
    to_apply: ComputationId,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "scatter";
    if operands.len() != 3 {
        return err(format!(
            "scatter: tessel supports one array per scatter (operand, indices, updates), got {} \
             operands ({})",
            operands.len(),
            list(operands)
        ));
    }
    let a = expect_array(name, "the operand", operands[0])?;
    let idx = expect_array(name, "the indices (operand 1)", operands[1])?;
    let u = expect_array(name, "the updates (operand 2)", operands[2])?;
    let of = text(operands[0]);
    let ut = text(operands[2]);
    if u.element_type != a.element_type {
        return err(format!(
            "scatter: updates {ut} must have the element type of operand {of}"
        ));
    }
    let batch = index_batch(
        name,
        idx,
        operands[1],
        dn.index_vector_dim,
        dn.scatter_dims_to_operand_dims.len(),
        "scatter_dims_to_operand_dims",
    )?;
    in_range(
        name,
        "scatter_dims_to_operand_dims",
        &dn.scatter_dims_to_operand_dims,
        a.rank(),
        &of,
    )?;
    sorted(name, "update_window_dims", &dn.update_window_dims)?;
    in_range(
        name,
        "update_window_dims",
        &dn.update_window_dims,
        u.rank(),
        &ut,
    )?;
    sorted(name, "inserted_window_dims", &dn.inserted_window_dims)?;
    in_range(
        name,
        "inserted_window_dims",
        &dn.inserted_window_dims,
        a.rank(),
        &of,
    )?;
    batching(
        name,
        ("input_batching_dims", &dn.input_batching_dims),
        (
            "scatter_indices_batching_dims",
            &dn.scatter_indices_batching_dims,
        ),
        (a, operands[0]),
        (idx, operands[1]),
        dn.index_vector_dim,
    )?;
    if let Some(d) = dn
        .inserted_window_dims
        .iter()
        .find(|d| dn.input_batching_dims.contains(d))
    {
        return err(format!(
            "scatter: dimension {d} is both inserted and batched"
        ));
    }
    let window_operand: Vec<usize> = (0..a.rank())
        .filter(|&d| {
            !dn.inserted_window_dims.contains(&(d as i64))
                && !dn.input_batching_dims.contains(&(d as i64))
        })
        .collect();
    if window_operand.len() != dn.update_window_dims.len() {
        return err(format!(
            "scatter: update_window_dims={:?} must name one updates dimension per operand \
             dimension that is neither inserted nor batched ({} of them in {of})",
            dn.update_window_dims,
            window_operand.len()
        ));
    }
    if u.rank() != batch.len() + window_operand.len() {
        return err(format!(
            "scatter: updates {ut} must have rank {} ({} scatter dimensions from the indices \
             and {} window dimensions)",
            batch.len() + window_operand.len(),
            batch.len(),
            window_operand.len()
        ));
    }
    for (&ud, &od) in dn.update_window_dims.iter().zip(&window_operand) {
        let size = u.dims[ud as usize];
        if size < 0 || size > a.dims[od] {
            return err(format!(
                "scatter: updates {ut} dimension {ud} has size {size}, larger than operand \
                 {of} dimension {od}"
            ));
        }
    }
    let scatter_dims = (0..u.rank() as i64).filter(|d| !dn.update_window_dims.contains(d));
    for (ud, &b) in scatter_dims.zip(&batch) {
        if u.dims[ud as usize] != b {
            return err(format!(
                "scatter: updates {ut} dimension {ud} has size {}, but the indices {} give {b} \
                 index vectors along it",
                u.dims[ud as usize],
                text(operands[1])
            ));
        }
    }
    check_reducer(
        module,
        name,
        "to_apply",
        to_apply,
        &[a.element_type],
        &[u.element_type],
        &format!("operand {of} with updates {ut}"),
    )?;
    Ok(Shape::Array(super::util::canonical(a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ElementType::*;

    fn s(t: crate::ir::ElementType, dims: &[i64]) -> Shape {
        Shape::array(t, dims)
    }

    fn take_rows() -> GatherDimensionNumbers {
        GatherDimensionNumbers {
            offset_dims: vec![2],
            collapsed_slice_dims: vec![0],
            start_index_map: vec![0],
            index_vector_dim: 2,
            ..Default::default()
        }
    }

    #[test]
    fn gather_shapes_and_errors() {
        let table = s(F32, &[50, 8]);
        let ids = s(S32, &[4, 6, 1]);
        assert_eq!(
            gather(&take_rows(), &[1, 8], &[&table, &ids]).unwrap(),
            s(F32, &[4, 6, 8])
        );
        // index_vector_dim equal to the rank: scalar index vectors.
        let mut dn = take_rows();
        assert_eq!(
            gather(&dn, &[1, 8], &[&table, &s(S32, &[4, 6])]).unwrap(),
            s(F32, &[4, 6, 8])
        );
        let e = gather(&dn, &[2, 8], &[&table, &ids]).unwrap_err();
        assert!(e.message.contains("slice size must be 0 or 1"), "{e}");
        let e = gather(&dn, &[1, 9], &[&table, &ids]).unwrap_err();
        assert!(e.message.contains("slice size 9 of dimension 1"), "{e}");
        let e = gather(&dn, &[1, 8], &[&table, &s(F32, &[4, 6, 1])]).unwrap_err();
        assert!(e.message.contains("must be integers"), "{e}");
        let e = gather(&dn, &[1, 8], &[&table, &s(S32, &[4, 6, 2])]).unwrap_err();
        assert!(e.message.contains("have 2 components"), "{e}");
        dn.offset_dims = vec![1, 2];
        let e = gather(&dn, &[1, 8], &[&table, &ids]).unwrap_err();
        assert!(e.message.contains("offset_dims"), "{e}");
    }

    #[test]
    fn gather_with_batching_dims() {
        // take_along_axis style: operand [3,5], indices [3,2,1], batch dim 0 with dim 0.
        let dn = GatherDimensionNumbers {
            offset_dims: vec![],
            collapsed_slice_dims: vec![1],
            start_index_map: vec![1],
            index_vector_dim: 2,
            operand_batching_dims: vec![0],
            start_indices_batching_dims: vec![0],
        };
        assert_eq!(
            gather(&dn, &[1, 1], &[&s(F32, &[3, 5]), &s(S32, &[3, 2, 1])]).unwrap(),
            s(F32, &[3, 2])
        );
        let e = gather(&dn, &[1, 1], &[&s(F32, &[4, 5]), &s(S32, &[3, 2, 1])]).unwrap_err();
        assert!(e.message.contains("sizes differ"), "{e}");
    }
}
