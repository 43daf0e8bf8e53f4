//! `topk`: the `k` largest (or smallest) elements of each row (the last dimension), with their
//! s32 indices, as XLA's TopK: floats are ordered by their total order (so NaN is the largest,
//! -NaN the smallest, -0 < +0) and ties go to the lower index.

use super::element::{for_each_type, typed, Elem};
use super::{err, EvalResult};
use crate::ir::{Array, ArrayData, ArrayShape, ElementType, Literal};
use std::cmp::Ordering;

/// A sort key for element `i` that orders as XLA's TopK comparator does.
fn key(data: &ArrayData, ty: ElementType) -> impl Fn(usize, usize) -> Ordering + '_ {
    move |a, b| {
        if ty.is_float() {
            data.get_f64(a).total_cmp(&data.get_f64(b))
        } else if ty.is_unsigned_int() {
            (data.get_i64(a) as u64).cmp(&(data.get_i64(b) as u64))
        } else {
            data.get_i64(a).cmp(&data.get_i64(b))
        }
    }
}

/// `(values, s32 indices)` of the `k` largest (`largest`) or smallest elements of each row of
/// `a`. The JIT's host routine calls this too, so both backends order elements the same way.
pub fn topk(a: &Array, k: i64, largest: bool) -> EvalResult<Literal> {
    let rank = a.shape.rank();
    if rank == 0 {
        return err("topk: the operand must have at least one dimension");
    }
    let n = a.shape.dims[rank - 1] as usize;
    if k < 0 || k as usize > n {
        return err(format!(
            "topk: k={k} must be between 0 and the row length {n}"
        ));
    }
    let k = k as usize;
    let rows = a.len().checked_div(n).unwrap_or(0);
    let order = key(&a.data, a.element_type());
    // Source offsets of the chosen elements, row by row, and their indices in the row.
    let mut picked = Vec::with_capacity(rows * k);
    let mut indices = Vec::with_capacity(rows * k);
    let mut row: Vec<usize> = Vec::with_capacity(n);
    for r in 0..rows {
        row.clear();
        row.extend(r * n..(r + 1) * n);
        // A stable sort keeps equal elements in index order: ties go to the lower index.
        if largest {
            row.sort_by(|&x, &y| order(y, x));
        } else {
            row.sort_by(|&x, &y| order(x, y));
        }
        for &s in &row[..k] {
            picked.push(s);
            indices.push((s - r * n) as i32);
        }
    }
    let ty = a.element_type();
    let values = for_each_type!(ty, T => {
        let src = typed::<T>(a)?;
        T::wrap(picked.iter().map(|&s| src[s]).collect())
    });
    let mut dims = a.shape.dims.to_vec();
    dims[rank - 1] = k as i64;
    Ok(Literal::Tuple(vec![
        Literal::Array(Array::new(ArrayShape::new(ty, &dims), values)),
        Literal::Array(Array::new(
            ArrayShape::new(ElementType::S32, &dims),
            ArrayData::S32(indices),
        )),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(x: Vec<f32>, dims: &[i64], k: i64, largest: bool) -> (Vec<f32>, Vec<i32>) {
        let l = topk(&Array::f32(dims, x), k, largest).unwrap();
        let t = l.as_tuple().unwrap();
        let v = match &t[0].as_array().unwrap().data {
            ArrayData::F32(v) => v.clone(),
            _ => panic!(),
        };
        let i = match &t[1].as_array().unwrap().data {
            ArrayData::S32(v) => v.clone(),
            _ => panic!(),
        };
        (v, i)
    }

    #[test]
    fn rows_ties_and_nan() {
        // Ties go to the lower index; NaN is the largest, as XLA's total order.
        let (v, i) = run(
            vec![1.0, 3.0, 3.0, 2.0, f32::NAN, -0.0, 0.0, -1.0],
            &[2, 4],
            2,
            true,
        );
        assert_eq!(i, vec![1, 2, 0, 2]);
        assert_eq!(&v[..2], &[3.0, 3.0]);
        assert!(v[2].is_nan());
        assert_eq!(v[3].to_bits(), 0.0f32.to_bits());
        let (v, i) = run(vec![1.0, 3.0, 1.0, 2.0], &[4], 3, false);
        assert_eq!((v, i), (vec![1.0, 1.0, 2.0], vec![0, 2, 3]));
        assert!(topk(&Array::f32(&[4], vec![0.0; 4]), 5, true).is_err());
    }
}
