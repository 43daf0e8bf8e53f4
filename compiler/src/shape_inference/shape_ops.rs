//! Ops that move data without computing on it: broadcast, reshape, bitcast, iota, transpose,
//! slice, dynamic-slice, dynamic-update-slice, concatenate, pad, reverse.

use super::util::{
    array_text, canonical, check_dimension_list, dim, err, expect_array, expect_operands,
    expect_scalar, list, make_array, merge_dim, sizes_compatible, text, Result,
};
use super::ShapeError;
use crate::ir::{ArrayShape, PadDim, Shape, SliceDim, UNKNOWN_DIM};

/// The result of broadcasting `operand` into an array of dimensions `out_dims`, with operand
/// dimension `i` becoming output dimension `dimensions[i]` (and keeping its dynamic flag).
pub(crate) fn broadcast_shape(
    operand: &Shape,
    dimensions: &[i64],
    out_dims: &[i64],
) -> std::result::Result<Shape, ShapeError> {
    let name = "broadcast";
    let a = expect_array(name, "the operand", operand)?;
    let out_text = array_text(&ArrayShape::new(a.element_type, out_dims));
    if dimensions.len() != a.rank() {
        return err(format!(
            "broadcast: dimensions={dimensions:?} must name one output dimension for each of \
             the {} dimensions of operand {}",
            a.rank(),
            text(operand)
        ));
    }
    let mut dims: Vec<(i64, bool)> = out_dims.iter().map(|&d| (d, d == UNKNOWN_DIM)).collect();
    for (i, &d) in dimensions.iter().enumerate() {
        if d < 0 || d as usize >= out_dims.len() {
            return err(format!(
                "broadcast: dimensions={dimensions:?} maps operand dimension {i} to {d}, \
                 outside result {out_text}"
            ));
        }
        // HLO allows a transposing broadcast (unsorted dimensions), but not a repeated one.
        if dimensions[..i].contains(&d) {
            return err(format!(
                "broadcast: dimensions={dimensions:?} maps two operand dimensions to output \
                 dimension {d} (operand {} into {out_text})",
                text(operand)
            ));
        }
        let (size, dynamic) = dim(a, i);
        let out = out_dims[d as usize];
        if !sizes_compatible(size, out) {
            return err(format!(
                "broadcast: operand {} dimension {i} has size {size}, but it maps to result \
                 dimension {d} of size {out} in {out_text}; sizes must be equal (reshape away \
                 size-1 dimensions first)",
                text(operand)
            ));
        }
        dims[d as usize] = merge_dim((out, dims[d as usize].1), (size, dynamic));
    }
    Ok(Shape::Array(make_array(a.element_type, &dims)))
}

/// Checks a broadcast of `operand` to the given `result` (HLO text gives the result shape).
pub(crate) fn check_broadcast(
    operand: &Shape,
    dimensions: &[i64],
    result: &Shape,
) -> std::result::Result<(), ShapeError> {
    let r = expect_array("broadcast", "the result", result)?;
    let expected = broadcast_shape(operand, dimensions, &r.dims)?;
    let e = expected
        .as_array()
        .expect("broadcast_shape returns an array");
    if e.element_type != r.element_type {
        return err(format!(
            "broadcast: result {} must have the element type of operand {}",
            text(result),
            text(operand)
        ));
    }
    // Mapped dimensions keep the operand's dynamic flag (an unknown size matches anything);
    // unmapped ones are the result's own.
    let a = expect_array("broadcast", "the operand", operand)?;
    for (i, &d) in dimensions.iter().enumerate() {
        let d = d as usize;
        let unknown = a.dims[i] == UNKNOWN_DIM || r.dims[d] == UNKNOWN_DIM;
        if !unknown && dim(e, d) != dim(r, d) {
            return err(format!(
                "broadcast: operand {} dimension {i} maps to result dimension {d}, whose \
                 dynamic-ness differs in result {}",
                text(operand),
                text(result)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
/// The result of reshaping `operand` to dimensions `out_dims`, carrying dynamic flags: the
/// dimensions are split into groups of equal product (input `[6,4]` to output `[2,3,4]` gives
/// groups `[6]->[2,3]` and `[4]->[4]`), and a group with a dynamic input dimension makes the
/// first (most major) output dimension of its group dynamic, as XLA does. An unknown size
/// (`?`) must meet an unknown size in the output, one for one.
pub(crate) fn reshape_shape(
    operand: &Shape,
    out_dims: &[i64],
) -> std::result::Result<Shape, ShapeError> {
    let a = expect_array("reshape", "the operand", operand)?;
    let out_text = array_text(&ArrayShape::new(a.element_type, out_dims));
    let unknown_in = a.dims.iter().filter(|&&d| d == UNKNOWN_DIM).count();
    let unknown_out = out_dims.iter().filter(|&&d| d == UNKNOWN_DIM).count();
    let known_count =
        |dims: &[i64]| -> i64 { dims.iter().filter(|&&d| d != UNKNOWN_DIM).product() };
    if unknown_in != unknown_out || known_count(&a.dims) != known_count(out_dims) {
        return err(format!(
            "reshape: operand {} cannot be reshaped to {out_text}: the element counts differ \
             (an unknown dimension must stay one unknown dimension)",
            text(operand)
        ));
    }
    let mut dims: Vec<(i64, bool)> = out_dims.iter().map(|&d| (d, d == UNKNOWN_DIM)).collect();
    if known_count(out_dims) == 0 {
        return Ok(Shape::Array(make_array(a.element_type, &dims)));
    }
    let (n_in, n_out) = (a.rank(), out_dims.len());
    let (mut i, mut j) = (0, 0);
    while i < n_in && j < n_out {
        if a.dims[i] == UNKNOWN_DIM || out_dims[j] == UNKNOWN_DIM {
            if a.dims[i] != out_dims[j] {
                return err(format!(
                    "reshape: the unknown dimension {i} of operand {} does not line up with an \
                     unknown dimension of {out_text}; only known dimensions can be regrouped",
                    text(operand)
                ));
            }
            dims[j] = (UNKNOWN_DIM, true);
            i += 1;
            j += 1;
            continue;
        }
        // One group: grow the smaller side until the products meet.
        let (gi, gj) = (i, j);
        let (mut p_in, mut p_out) = (a.dims[i], out_dims[j]);
        i += 1;
        j += 1;
        while p_in != p_out {
            if p_in < p_out && i < n_in && a.dims[i] != UNKNOWN_DIM {
                p_in *= a.dims[i];
                i += 1;
            } else if p_out < p_in && j < n_out && out_dims[j] != UNKNOWN_DIM {
                p_out *= out_dims[j];
                j += 1;
            } else {
                return err(format!(
                    "reshape: dimensions of operand {} cannot be regrouped into {out_text} \
                     around an unknown dimension",
                    text(operand)
                ));
            }
        }
        if (gi..i).any(|d| a.is_dynamic_dim(d)) {
            dims[gj].1 = true;
        }
    }
    Ok(Shape::Array(make_array(a.element_type, &dims)))
}

/// Checks a reshape of `operand` to the given `result`: same element type and element count
/// (not checked when a dimension's size is unknown).
pub(crate) fn check_reshape(
    operand: &Shape,
    result: &Shape,
) -> std::result::Result<(), ShapeError> {
    let name = "reshape";
    let a = expect_array(name, "the operand", operand)?;
    let r = expect_array(name, "the result", result)?;
    if a.element_type != r.element_type {
        return err(format!(
            "reshape: result {} must have the element type of operand {}",
            text(result),
            text(operand)
        ));
    }
    let unknown = a.dims.contains(&UNKNOWN_DIM) || r.dims.contains(&UNKNOWN_DIM);
    if !unknown && a.element_count() != r.element_count() {
        return err(format!(
            "reshape: operand {} has {} elements but result {} has {}; a reshape keeps the \
             element count",
            text(operand),
            a.element_count(),
            text(result),
            r.element_count()
        ));
    }
    Ok(())
}

/// Checks a bitcast: any shapes with the same number of bytes.
pub(crate) fn check_bitcast(operands: &[&Shape], result: &Shape) -> Result<()> {
    expect_operands("bitcast", operands, 1)?;
    let a = expect_array("bitcast", "the operand", operands[0])?;
    let r = expect_array("bitcast", "the result", result)?;
    if a.byte_size() != r.byte_size() {
        return err(format!(
            "bitcast: operand {} has {} bytes but result {} has {}; a bitcast keeps the size",
            text(operands[0]),
            a.byte_size(),
            text(result),
            r.byte_size()
        ));
    }
    Ok(())
}

/// Checks an iota: an array of rank at least 1 counting along `dimension`.
pub(crate) fn check_iota(operands: &[&Shape], dimension: i64, result: &Shape) -> Result<()> {
    expect_operands("iota", operands, 0)?;
    let r = expect_array("iota", "the result", result)?;
    if r.rank() == 0 {
        return err("iota: the result must have at least one dimension, got a scalar");
    }
    if r.element_type.is_pred() {
        return err(format!(
            "iota: result {} cannot count in pred",
            text(result)
        ));
    }
    if dimension < 0 || dimension as usize >= r.rank() {
        return err(format!(
            "iota: iota_dimension={dimension} is out of range for result {}",
            text(result)
        ));
    }
    Ok(())
}

pub(crate) fn transpose(permutation: &[i64], operands: &[&Shape]) -> Result<Shape> {
    let name = "transpose";
    expect_operands(name, operands, 1)?;
    let a = expect_array(name, "the operand", operands[0])?;
    if permutation.len() != a.rank() {
        return err(format!(
            "transpose: dimensions={permutation:?} must be a permutation of the {} dimensions \
             of operand {}",
            a.rank(),
            text(operands[0])
        ));
    }
    check_dimension_list(name, "dimension", permutation, a.rank(), operands[0])?;
    let dims: Vec<(i64, bool)> = permutation.iter().map(|&p| dim(a, p as usize)).collect();
    Ok(Shape::Array(make_array(a.element_type, &dims)))
}

pub(crate) fn slice(slice_dims: &[SliceDim], operands: &[&Shape]) -> Result<Shape> {
    let name = "slice";
    expect_operands(name, operands, 1)?;
    let a = expect_array(name, "the operand", operands[0])?;
    if slice_dims.len() != a.rank() {
        return err(format!(
            "slice: {} [start:limit:stride] ranges given for operand {} of rank {}",
            slice_dims.len(),
            text(operands[0]),
            a.rank()
        ));
    }
    let mut dims = Vec::with_capacity(a.rank());
    for (i, s) in slice_dims.iter().enumerate() {
        let (size, dynamic) = dim(a, i);
        let range = format!("[{}:{}:{}]", s.start, s.limit, s.stride);
        if s.stride < 1 {
            return err(format!(
                "slice: dimension {i} of {} has range {range}; the stride must be at least 1",
                text(operands[0])
            ));
        }
        let in_bounds =
            s.start >= 0 && s.start <= s.limit && (size == UNKNOWN_DIM || s.limit <= size);
        if !in_bounds {
            return err(format!(
                "slice: range {range} of dimension {i} is outside operand {} (need \
                 0 <= start <= limit <= {size})",
                text(operands[0])
            ));
        }
        let out = (s.limit - s.start + s.stride - 1) / s.stride;
        // A full slice of a dynamic dimension keeps its dynamic size.
        let keeps_dynamic = dynamic && s.start == 0 && s.stride == 1 && s.limit == size;
        dims.push((out, keeps_dynamic));
    }
    Ok(Shape::Array(make_array(a.element_type, &dims)))
}

/// Start indices: one integer scalar per dimension, all of one type (or XLA's old form, a
/// single rank-1 index vector).
fn check_start_indices(name: &str, operand: &ArrayShape, indices: &[&Shape]) -> Result<()> {
    if indices.len() == 1 && operand.rank() != 1 {
        if let Some(v) = indices[0].as_array() {
            if v.rank() == 1 && v.dims[0] == operand.rank() as i64 && v.element_type.is_integer() {
                return Ok(());
            }
        }
    }
    if indices.len() != operand.rank() {
        return err(format!(
            "{name}: operand {} has rank {} but {} start indices were given ({}); give one \
             scalar index per dimension",
            array_text(operand),
            operand.rank(),
            indices.len(),
            list(indices)
        ));
    }
    for (i, s) in indices.iter().enumerate() {
        let idx = expect_scalar(name, &format!("start index {i}"), s)?;
        if !idx.element_type.is_integer() {
            return err(format!(
                "{name}: start index {i} must be an integer scalar, got {}",
                text(s)
            ));
        }
        if **s != *indices[0] {
            return err(format!(
                "{name}: start indices must all have one type, got {}",
                list(indices)
            ));
        }
    }
    Ok(())
}

pub(crate) fn dynamic_slice(sizes: &[i64], operands: &[&Shape]) -> Result<Shape> {
    let name = "dynamic-slice";
    if operands.is_empty() {
        return err("dynamic-slice: expects an operand and start indices, got no operands");
    }
    let a = expect_array(name, "the operand", operands[0])?;
    check_start_indices(name, a, &operands[1..])?;
    if sizes.len() != a.rank() {
        return err(format!(
            "dynamic-slice: dynamic_slice_sizes={sizes:?} must give one size per dimension of \
             operand {}",
            text(operands[0])
        ));
    }
    for (i, &s) in sizes.iter().enumerate() {
        let bound = a.dims[i];
        if s < 0 || (bound != UNKNOWN_DIM && s > bound) {
            return err(format!(
                "dynamic-slice: size {s} of dimension {i} is outside operand {} (need \
                 0 <= size <= {bound})",
                text(operands[0])
            ));
        }
    }
    Ok(Shape::array(a.element_type, sizes))
}

pub(crate) fn dynamic_update_slice(operands: &[&Shape]) -> Result<Shape> {
    let name = "dynamic-update-slice";
    if operands.len() < 2 {
        return err(format!(
            "dynamic-update-slice: expects an operand, an update and start indices, got {}",
            list(operands)
        ));
    }
    let a = expect_array(name, "the operand", operands[0])?;
    let u = expect_array(name, "the update", operands[1])?;
    if a.element_type != u.element_type || a.rank() != u.rank() {
        return err(format!(
            "dynamic-update-slice: update {} must have the element type and rank of operand {}",
            text(operands[1]),
            text(operands[0])
        ));
    }
    for d in 0..a.rank() {
        let (bound, size) = (a.dims[d], u.dims[d]);
        if bound != UNKNOWN_DIM && size != UNKNOWN_DIM && size > bound {
            return err(format!(
                "dynamic-update-slice: update {} is larger than operand {} in dimension {d}",
                text(operands[1]),
                text(operands[0])
            ));
        }
    }
    check_start_indices(name, a, &operands[2..])?;
    Ok(Shape::Array(canonical(a)))
}

pub(crate) fn concatenate(dimension: i64, operands: &[&Shape]) -> Result<Shape> {
    let name = "concatenate";
    if operands.is_empty() {
        return err("concatenate: expects at least one operand");
    }
    let first = expect_array(name, "operand 0", operands[0])?;
    if dimension < 0 || dimension as usize >= first.rank() {
        return err(format!(
            "concatenate: dimensions={{{dimension}}} is out of range for operands {}",
            list(operands)
        ));
    }
    let cd = dimension as usize;
    let mut dims: Vec<(i64, bool)> = (0..first.rank()).map(|d| dim(first, d)).collect();
    for (i, s) in operands.iter().enumerate().skip(1) {
        let a = expect_array(name, &format!("operand {i}"), s)?;
        if a.element_type != first.element_type || a.rank() != first.rank() {
            return err(format!(
                "concatenate: operands {} must have one element type and rank",
                list(operands)
            ));
        }
        for (d, slot) in dims.iter_mut().enumerate() {
            let this = dim(a, d);
            if d == cd {
                slot.0 = if slot.0 == UNKNOWN_DIM || this.0 == UNKNOWN_DIM {
                    UNKNOWN_DIM
                } else {
                    slot.0 + this.0
                };
                slot.1 |= this.1;
            } else if sizes_compatible(slot.0, this.0) {
                *slot = merge_dim(*slot, this);
            } else {
                return err(format!(
                    "concatenate: operands {} differ in dimension {d}; all dimensions but \
                     the concatenated one ({cd}) must be equal",
                    list(operands)
                ));
            }
        }
    }
    Ok(Shape::Array(make_array(first.element_type, &dims)))
}

pub(crate) fn pad(pad_dims: &[PadDim], operands: &[&Shape]) -> Result<Shape> {
    let name = "pad";
    expect_operands(name, operands, 2)?;
    let a = expect_array(name, "the operand", operands[0])?;
    let v = expect_scalar(name, "the padding value (operand 1)", operands[1])?;
    if v.element_type != a.element_type {
        return err(format!(
            "pad: padding value {} must have the element type of operand {}",
            text(operands[1]),
            text(operands[0])
        ));
    }
    if pad_dims.len() != a.rank() {
        return err(format!(
            "pad: padding gives {} dimensions for operand {} of rank {}",
            pad_dims.len(),
            text(operands[0]),
            a.rank()
        ));
    }
    let mut dims = Vec::with_capacity(a.rank());
    for (i, p) in pad_dims.iter().enumerate() {
        let (size, dynamic) = dim(a, i);
        let spec = format!("{}_{}_{}", p.low, p.high, p.interior);
        if p.interior < 0 {
            return err(format!(
                "pad: interior padding of dimension {i} ({spec}) must not be negative"
            ));
        }
        if size == UNKNOWN_DIM {
            dims.push((UNKNOWN_DIM, true));
            continue;
        }
        // Negative low/high padding removes elements, as in XLA.
        let out = p.low + p.high + size + (size - 1).max(0) * p.interior;
        if out < 0 {
            return err(format!(
                "pad: padding {spec} of dimension {i} leaves {out} elements of operand {}",
                text(operands[0])
            ));
        }
        dims.push((out, dynamic));
    }
    Ok(Shape::Array(make_array(a.element_type, &dims)))
}

pub(crate) fn reverse(dimensions: &[i64], operands: &[&Shape]) -> Result<Shape> {
    let name = "reverse";
    expect_operands(name, operands, 1)?;
    let a = expect_array(name, "the operand", operands[0])?;
    check_dimension_list(name, "dimension", dimensions, a.rank(), operands[0])?;
    Ok(Shape::Array(canonical(a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ElementType::{self, *};

    fn s(t: ElementType, dims: &[i64]) -> Shape {
        Shape::array(t, dims)
    }

    fn dynamic(t: ElementType, dims: &[i64], flags: &[bool]) -> Shape {
        let mut a = ArrayShape::new(t, dims);
        a.dynamic = flags.iter().copied().collect();
        Shape::Array(a)
    }

    #[test]
    fn broadcast_checks() {
        let x = s(F32, &[3]);
        assert!(check_broadcast(&x, &[1], &s(F32, &[2, 3])).is_ok());
        assert!(check_broadcast(&s(F32, &[]), &[], &s(F32, &[2, 3])).is_ok());
        let e = check_broadcast(&x, &[0], &s(F32, &[2, 3])).unwrap_err();
        assert!(
            e.message.contains("size 3") && e.message.contains("size 2"),
            "{e}"
        );
        assert!(
            e.message.contains("f32[3]") && e.message.contains("f32[2,3]"),
            "{e}"
        );
        // A transposing broadcast is valid HLO; a repeated dimension is not.
        assert!(check_broadcast(&s(F32, &[2, 3]), &[1, 0], &s(F32, &[3, 2])).is_ok());
        let e = check_broadcast(&s(F32, &[2, 2]), &[1, 1], &s(F32, &[2, 2])).unwrap_err();
        assert!(e.message.contains("maps two operand dimensions"), "{e}");
        let e = check_broadcast(&x, &[2], &s(F32, &[2, 3])).unwrap_err();
        assert!(e.message.contains("outside result f32[2,3]"), "{e}");
        let e = check_broadcast(&x, &[1], &s(S32, &[2, 3])).unwrap_err();
        assert!(e.message.contains("element type"), "{e}");
    }

    #[test]
    fn broadcast_carries_dynamic_dims() {
        let d = dynamic(F32, &[5], &[true]);
        let r = broadcast_shape(&d, &[1], &[2, 5]).unwrap();
        assert_eq!(r, dynamic(F32, &[2, 5], &[false, true]));
        assert!(check_broadcast(&d, &[1], &r).is_ok());
        let e = check_broadcast(&d, &[1], &s(F32, &[2, 5])).unwrap_err();
        assert!(e.message.contains("dynamic"), "{e}");
        let u = dynamic(F32, &[UNKNOWN_DIM], &[true]);
        assert!(check_broadcast(&u, &[1], &s(F32, &[2, 7])).is_ok());
    }

    #[test]
    fn reshape_and_bitcast_checks() {
        assert!(check_reshape(&s(F32, &[2, 3]), &s(F32, &[6])).is_ok());
        let e = check_reshape(&s(F32, &[2, 3]), &s(F32, &[5])).unwrap_err();
        assert!(
            e.message
                .contains("f32[2,3] has 6 elements but result f32[5] has 5"),
            "{e}"
        );
        assert!(check_reshape(
            &dynamic(F32, &[UNKNOWN_DIM, 3], &[true, false]),
            &s(F32, &[7])
        )
        .is_ok());
        assert!(check_bitcast(&[&s(F32, &[4])], &s(U8, &[16])).is_ok());
        assert!(check_bitcast(&[&s(F32, &[4])], &s(U8, &[4])).is_err());
    }

    #[test]
    fn reshape_carries_dynamic_dims() {
        let d = dynamic(F32, &[8, 784], &[true, false]);
        let r = reshape_shape(&d, &[8, 28, 28, 1]).unwrap();
        assert_eq!(
            r,
            dynamic(F32, &[8, 28, 28, 1], &[true, false, false, false])
        );
        let u = dynamic(F32, &[UNKNOWN_DIM, 784], &[true, false]);
        let r = reshape_shape(&u, &[UNKNOWN_DIM, 28, 28]).unwrap();
        assert_eq!(
            r,
            dynamic(F32, &[UNKNOWN_DIM, 28, 28], &[true, false, false])
        );
        // A dynamic minor dimension merged into a group marks the group's major output dim.
        let m = dynamic(F32, &[2, 3, 4], &[false, true, false]);
        let r = reshape_shape(&m, &[6, 4]).unwrap();
        assert_eq!(r, dynamic(F32, &[6, 4], &[true, false]));
        assert_eq!(reshape_shape(&s(F32, &[2, 3]), &[6]).unwrap(), s(F32, &[6]));
        assert_eq!(
            reshape_shape(&s(F32, &[1, 6, 1]), &[3, 2]).unwrap(),
            s(F32, &[3, 2])
        );
        assert_eq!(
            reshape_shape(&s(F32, &[0, 3]), &[3, 0]).unwrap(),
            s(F32, &[3, 0])
        );
        let e = reshape_shape(&s(F32, &[2, 3]), &[5]).unwrap_err();
        assert!(
            e.message.contains("f32[2,3] cannot be reshaped to f32[5]"),
            "{e}"
        );
        assert!(reshape_shape(&u, &[784, UNKNOWN_DIM]).is_err());
        assert!(reshape_shape(&u, &[7, 112]).is_err());
    }

    #[test]
    fn iota_checks() {
        assert!(check_iota(&[], 1, &s(S32, &[2, 3])).is_ok());
        assert!(check_iota(&[], 2, &s(S32, &[2, 3])).is_err());
        assert!(check_iota(&[], 0, &s(S32, &[])).is_err());
    }

    #[test]
    fn transpose_permutes() {
        let x = s(F32, &[2, 3, 4]);
        assert_eq!(transpose(&[2, 0, 1], &[&x]).unwrap(), s(F32, &[4, 2, 3]));
        let e = transpose(&[0, 0, 1], &[&x]).unwrap_err();
        assert!(e.message.contains("appears twice"), "{e}");
        assert!(transpose(&[0, 1], &[&x]).is_err());
        let d = dynamic(F32, &[2, 3], &[true, false]);
        assert_eq!(
            transpose(&[1, 0], &[&d]).unwrap(),
            dynamic(F32, &[3, 2], &[false, true])
        );
    }

    #[test]
    fn slice_bounds_and_strides() {
        let x = s(F32, &[10, 4]);
        let sd = |start, limit, stride| SliceDim {
            start,
            limit,
            stride,
        };
        let r = slice(&[sd(1, 10, 3), sd(0, 4, 1)], &[&x]).unwrap();
        assert_eq!(r, s(F32, &[3, 4]));
        let e = slice(&[sd(0, 11, 1), sd(0, 4, 1)], &[&x]).unwrap_err();
        assert!(
            e.message.contains("[0:11:1]") && e.message.contains("f32[10,4]"),
            "{e}"
        );
        assert!(slice(&[sd(3, 2, 1), sd(0, 4, 1)], &[&x]).is_err());
        assert!(slice(&[sd(0, 2, 0), sd(0, 4, 1)], &[&x]).is_err());
        assert!(slice(&[sd(0, 2, 1)], &[&x]).is_err());
    }

    #[test]
    fn dynamic_slice_and_update() {
        let x = s(F32, &[10, 4]);
        let i = s(S32, &[]);
        assert_eq!(
            dynamic_slice(&[2, 4], &[&x, &i, &i]).unwrap(),
            s(F32, &[2, 4])
        );
        let e = dynamic_slice(&[2, 5], &[&x, &i, &i]).unwrap_err();
        assert!(e.message.contains("size 5 of dimension 1"), "{e}");
        let e = dynamic_slice(&[2, 4], &[&x, &i]).unwrap_err();
        assert!(e.message.contains("1 start indices"), "{e}");
        let e = dynamic_slice(&[2, 4], &[&x, &i, &s(F32, &[])]).unwrap_err();
        assert!(e.message.contains("integer"), "{e}");
        let u = s(F32, &[2, 4]);
        assert_eq!(dynamic_update_slice(&[&x, &u, &i, &i]).unwrap(), x);
        let e = dynamic_update_slice(&[&x, &s(F32, &[2, 5]), &i, &i]).unwrap_err();
        assert!(
            e.message.contains("f32[2,5]") && e.message.contains("f32[10,4]"),
            "{e}"
        );
    }

    #[test]
    fn concatenate_sums_one_dimension() {
        let a = s(F32, &[2, 3]);
        let b = s(F32, &[2, 5]);
        assert_eq!(concatenate(1, &[&a, &b]).unwrap(), s(F32, &[2, 8]));
        let e = concatenate(0, &[&a, &b]).unwrap_err();
        assert!(
            e.message
                .contains("f32[2,3] and f32[2,5] differ in dimension 1"),
            "{e}"
        );
        assert!(concatenate(2, &[&a, &b]).is_err());
        assert!(concatenate(1, &[&a, &s(S32, &[2, 5])]).is_err());
    }

    #[test]
    fn pad_with_negative_and_interior() {
        let x = s(F32, &[4]);
        let v = s(F32, &[]);
        let p = |low, high, interior| PadDim {
            low,
            high,
            interior,
        };
        assert_eq!(pad(&[p(1, 2, 1)], &[&x, &v]).unwrap(), s(F32, &[10]));
        assert_eq!(pad(&[p(-1, -1, 0)], &[&x, &v]).unwrap(), s(F32, &[2]));
        assert!(pad(&[p(-3, -3, 0)], &[&x, &v]).is_err());
        assert!(pad(&[p(0, 0, -1)], &[&x, &v]).is_err());
        let e = pad(&[p(0, 0, 0)], &[&x, &s(S32, &[])]).unwrap_err();
        assert!(
            e.message.contains("s32[]") && e.message.contains("f32[4]"),
            "{e}"
        );
    }

    #[test]
    fn reverse_checks_dimensions() {
        let x = s(F32, &[2, 3]);
        assert_eq!(reverse(&[0, 1], &[&x]).unwrap(), x);
        assert!(reverse(&[2], &[&x]).is_err());
    }
}
