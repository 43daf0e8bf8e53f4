//! `dot` with batch and contracting dimensions (dot_general).
//!
//! Both operands are rearranged once, lhs to `[batch, lhs-free, contracting]` and rhs to
//! `[batch, contracting, rhs-free]`, so that the product is a batched matrix product whose
//! innermost loop runs over a contiguous rhs row. Floats accumulate in f32 (f64 for f64),
//! integers in wrapping 64-bit arithmetic, then round or wrap to the result type.

use super::convert::{as_type, convert_data};
use super::element::Elem;
use super::shape_ops::{strided_gather, strides_of};
use super::{err, EvalResult};
use crate::ir::{Array, ArrayShape, DotDimensionNumbers, ElementType};

/// A type products are accumulated in.
pub(crate) trait Mac: Elem {
    const ZERO: Self;
    fn mac(acc: Self, a: Self, b: Self) -> Self;
}

impl Mac for f32 {
    const ZERO: f32 = 0.0;
    #[inline(always)]
    fn mac(acc: f32, a: f32, b: f32) -> f32 {
        acc + a * b
    }
}

impl Mac for f64 {
    const ZERO: f64 = 0.0;
    #[inline(always)]
    fn mac(acc: f64, a: f64, b: f64) -> f64 {
        acc + a * b
    }
}

impl Mac for i64 {
    const ZERO: i64 = 0;
    #[inline(always)]
    fn mac(acc: i64, a: i64, b: i64) -> i64 {
        acc.wrapping_add(a.wrapping_mul(b))
    }
}

/// The accumulation type for a result type.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum AccType {
    F32,
    F64,
    I64,
}

pub(crate) fn acc_type(ty: ElementType) -> EvalResult<AccType> {
    Ok(match ty {
        ElementType::F64 => AccType::F64,
        t if t.is_float() => AccType::F32,
        t if t.is_integer() => AccType::I64,
        t => return err(format!("no multiply-accumulate for {t}")),
    })
}

/// Elements of `a` rearranged by `perm` (new dimension `i` is old dimension `perm[i]`),
/// converted to the accumulation type `T`.
pub(crate) fn arranged<T: Elem>(a: &Array, perm: &[usize]) -> EvalResult<Vec<T>> {
    let src = strides_of(&a.shape.dims);
    let dims: Vec<i64> = perm.iter().map(|&p| a.shape.dims[p]).collect();
    let strides: Vec<isize> = perm.iter().map(|&p| src[p]).collect();
    let values = as_type::<T>(a)?;
    Ok(strided_gather(&values, 0, &dims, &strides))
}

/// Wraps accumulated values as the result type.
pub(crate) fn finish<T: Elem>(values: Vec<T>, out: &ArrayShape) -> Array {
    let data = T::wrap(values);
    Array::new(out.clone(), convert_data(&data, out.element_type))
}

pub(crate) fn dot(
    lhs: &Array,
    rhs: &Array,
    dims: &DotDimensionNumbers,
    out: &ArrayShape,
) -> EvalResult<Array> {
    let (lr, rr) = (lhs.shape.rank(), rhs.shape.rank());
    let valid = |ds: &[i64], rank: usize| ds.iter().all(|&d| d >= 0 && (d as usize) < rank);
    if dims.lhs_batch.len() != dims.rhs_batch.len()
        || dims.lhs_contracting.len() != dims.rhs_contracting.len()
        || !valid(&dims.lhs_batch, lr)
        || !valid(&dims.lhs_contracting, lr)
        || !valid(&dims.rhs_batch, rr)
        || !valid(&dims.rhs_contracting, rr)
    {
        return err(format!(
            "dot dimension numbers {dims:?} do not fit {} and {}",
            lhs.shape, rhs.shape
        ));
    }
    for (a, b) in dims
        .lhs_batch
        .iter()
        .zip(&dims.rhs_batch)
        .chain(dims.lhs_contracting.iter().zip(&dims.rhs_contracting))
    {
        if lhs.shape.dims[*a as usize] != rhs.shape.dims[*b as usize] {
            return err(format!(
                "dot: lhs dimension {a} of {} does not match rhs dimension {b} of {}",
                lhs.shape, rhs.shape
            ));
        }
    }
    let free = |rank: usize, batch: &[i64], contracting: &[i64]| -> Vec<usize> {
        (0..rank)
            .filter(|d| !batch.contains(&(*d as i64)) && !contracting.contains(&(*d as i64)))
            .collect()
    };
    let lfree = free(lr, &dims.lhs_batch, &dims.lhs_contracting);
    let rfree = free(rr, &dims.rhs_batch, &dims.rhs_contracting);
    let u = |v: &[i64]| v.iter().map(|&d| d as usize).collect::<Vec<_>>();
    let lperm: Vec<usize> = [u(&dims.lhs_batch), lfree.clone(), u(&dims.lhs_contracting)].concat();
    let rperm: Vec<usize> = [u(&dims.rhs_batch), u(&dims.rhs_contracting), rfree.clone()].concat();
    let size = |a: &Array, ds: &[usize]| {
        ds.iter()
            .map(|&d| a.shape.dims[d] as usize)
            .product::<usize>()
    };
    let b = size(lhs, &u(&dims.lhs_batch));
    let m = size(lhs, &lfree);
    let k = size(lhs, &u(&dims.lhs_contracting));
    let n = size(rhs, &rfree);
    let expected: Vec<i64> = dims
        .lhs_batch
        .iter()
        .map(|&d| lhs.shape.dims[d as usize])
        .chain(lfree.iter().map(|&d| lhs.shape.dims[d]))
        .chain(rfree.iter().map(|&d| rhs.shape.dims[d]))
        .collect();
    if expected[..] != out.dims[..] {
        return err(format!(
            "dot of {} and {} gives dimensions {expected:?}, the instruction says {out}",
            lhs.shape, rhs.shape
        ));
    }
    Ok(match acc_type(out.element_type)? {
        AccType::F32 => finish(
            batched_matmul::<f32>(&arranged(lhs, &lperm)?, &arranged(rhs, &rperm)?, b, m, k, n),
            out,
        ),
        AccType::F64 => finish(
            batched_matmul::<f64>(&arranged(lhs, &lperm)?, &arranged(rhs, &rperm)?, b, m, k, n),
            out,
        ),
        AccType::I64 => finish(
            batched_matmul::<i64>(&arranged(lhs, &lperm)?, &arranged(rhs, &rperm)?, b, m, k, n),
            out,
        ),
    })
}

/// `out[b, i, j] = sum_k lhs[b, i, k] * rhs[b, k, j]`, summing k in increasing order.
fn batched_matmul<T: Mac>(lhs: &[T], rhs: &[T], b: usize, m: usize, k: usize, n: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; b * m * n];
    for bi in 0..b {
        let l = &lhs[bi * m * k..(bi + 1) * m * k];
        let r = &rhs[bi * k * n..(bi + 1) * k * n];
        let o = &mut out[bi * m * n..(bi + 1) * m * n];
        for i in 0..m {
            let row = &mut o[i * n..(i + 1) * n];
            for kk in 0..k {
                let a = l[i * k + kk];
                let rrow = &r[kk * n..(kk + 1) * n];
                for (acc, &x) in row.iter_mut().zip(rrow) {
                    *acc = T::mac(*acc, a, x);
                }
            }
        }
    }
    out
}
