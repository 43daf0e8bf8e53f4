//! `reduce` with one or several operands, and the helpers every reducing op shares: calling
//! a reducer computation on scalars, or applying it directly when it is a single binary op.

use super::element::{for_each_type, typed, Elem};
use super::elementwise::{binary_fn, Arith};
use super::plan::ScalarFn;
use super::shape_ops::{gather_array, strides_of};
use super::{err, EvalError, EvalResult, Evaluator};
use crate::ir::{Array, ArrayShape, BinaryOp, ComputationId, ElementType, Literal, Shape};

/// Element `i` of `a` as a scalar literal.
pub(crate) fn element_literal(a: &Array, i: usize) -> Literal {
    let ty = a.element_type();
    let data = for_each_type!(ty, T => T::wrap(vec![T::slice(&a.data).expect("type")[i]]));
    Literal::Array(Array::new(ArrayShape::scalar(ty), data))
}

/// Builds an array of `dims` from scalar literals of type `ty`, in row-major order.
pub(crate) fn array_from_scalars(
    ty: ElementType,
    dims: &[i64],
    scalars: &[Literal],
) -> EvalResult<Array> {
    let data = for_each_type!(ty, T => {
        let v: Vec<T> = scalars
            .iter()
            .map(|l| {
                l.as_array()
                    .and_then(|a| T::slice(&a.data))
                    .filter(|s| s.len() == 1)
                    .map(|s| s[0])
                    .ok_or_else(|| EvalError::new(format!(
                        "the reducer returned {} where a {ty} scalar was expected",
                        l.shape().to_text(false)
                    )))
            })
            .collect::<EvalResult<_>>()?;
        T::wrap(v)
    });
    Ok(Array::new(ArrayShape::new(ty, dims), data))
}

/// Calls a reducer computation with `(accumulators..., elements...)` and returns the new
/// accumulators (the tuple's elements when there are several).
pub(crate) fn call_reducer(
    ev: &Evaluator,
    comp: ComputationId,
    accs: &[Literal],
    elems: &[Literal],
) -> EvalResult<Vec<Literal>> {
    let args: Vec<&Literal> = accs.iter().chain(elems).collect();
    let out = ev.eval_computation(comp, &args)?;
    if accs.len() == 1 {
        return Ok(vec![out]);
    }
    match out {
        Literal::Tuple(t) if t.len() == accs.len() => Ok(t),
        other => err(format!(
            "a reducer of {} operands returned {}",
            accs.len(),
            other.shape().to_text(false)
        )),
    }
}

/// The binary op a reducer computation applies, when it is just `op(p0, p1)`.
pub(crate) fn simple_binary(ev: &Evaluator, comp: ComputationId) -> Option<(BinaryOp, bool)> {
    match ev.plan(comp).scalar_fn {
        Some(ScalarFn::Binary { op, swapped }) => Some((op, swapped)),
        _ => None,
    }
}

/// Folds `xs` into `init` with `op` in order: `acc = op(acc, x)` (or `op(x, acc)` if swapped).
pub(crate) fn fold<T: Arith>(op: BinaryOp, swapped: bool, init: T, xs: &[T]) -> EvalResult<T> {
    let f = binary_fn::<T>(op)?;
    let mut acc = init;
    if swapped {
        for &x in xs {
            acc = f(x, acc);
        }
    } else {
        for &x in xs {
            acc = f(acc, x);
        }
    }
    Ok(acc)
}

/// `reduce(inputs..., inits...)`, dimensions={...}, to_apply=comp.
pub(crate) fn reduce(
    ev: &Evaluator,
    operands: &[&Array],
    dimensions: &[i64],
    to_apply: ComputationId,
    shape: &Shape,
) -> EvalResult<Literal> {
    if operands.is_empty() || !operands.len().is_multiple_of(2) {
        return err("reduce needs N inputs and N init values");
    }
    let n = operands.len() / 2;
    let (inputs, inits) = operands.split_at(n);
    let dims = &inputs[0].shape.dims;
    let rank = dims.len();
    for (k, (x, init)) in inputs.iter().zip(inits).enumerate() {
        if x.shape.dims != *dims {
            return err(format!(
                "reduce input {k} is {}, input 0 is {}",
                x.shape, inputs[0].shape
            ));
        }
        if init.len() != 1 || init.element_type() != x.element_type() {
            return err(format!(
                "reduce init {k} should be a {} scalar, got {}",
                x.element_type(),
                init.shape
            ));
        }
    }
    let mut reduced = vec![false; rank];
    for &d in dimensions {
        if d < 0 || d as usize >= rank || std::mem::replace(&mut reduced[d as usize], true) {
            return err(format!(
                "reduce dimensions {dimensions:?} are not valid for rank {rank}"
            ));
        }
    }
    // Move kept dimensions first and reduced ones last: each output reads one contiguous run.
    let perm: Vec<usize> = (0..rank)
        .filter(|&d| !reduced[d])
        .chain((0..rank).filter(|&d| reduced[d]))
        .collect();
    let src = strides_of(dims);
    let perm_dims: Vec<i64> = perm.iter().map(|&p| dims[p]).collect();
    let perm_strides: Vec<isize> = perm.iter().map(|&p| src[p]).collect();
    let out_dims: Vec<i64> = (0..rank)
        .filter(|&d| !reduced[d])
        .map(|d| dims[d])
        .collect();
    let outer: usize = out_dims.iter().map(|&d| d as usize).product();
    let inner: usize = (0..rank)
        .filter(|&d| reduced[d])
        .map(|d| dims[d] as usize)
        .product();
    let needs_transpose = perm.iter().enumerate().any(|(i, &p)| i != p);
    let arranged: Vec<Array> = inputs
        .iter()
        .map(|x| {
            if needs_transpose {
                gather_array(x, 0, &perm_dims, &perm_strides)
            } else {
                Ok((*x).clone())
            }
        })
        .collect::<EvalResult<_>>()?;

    if let (1, Some((op, swapped))) = (n, simple_binary(ev, to_apply)) {
        let x = &arranged[0];
        let data = for_each_type!(x.element_type(), T => {
            let xs = typed::<T>(x)?;
            let init = typed::<T>(inits[0])?[0];
            let out: Vec<T> = (0..outer)
                .map(|o| fold(op, swapped, init, &xs[o * inner..(o + 1) * inner]))
                .collect::<EvalResult<_>>()?;
            T::wrap(out)
        });
        return Ok(Array::new(ArrayShape::new(x.element_type(), &out_dims), data).into());
    }

    // General reducer: call the computation once per element.
    let mut results: Vec<Vec<Literal>> = vec![Vec::with_capacity(outer); n];
    for o in 0..outer {
        let mut accs: Vec<Literal> = inits.iter().map(|i| Literal::Array((*i).clone())).collect();
        for j in 0..inner {
            let elems: Vec<Literal> = arranged
                .iter()
                .map(|a| element_literal(a, o * inner + j))
                .collect();
            accs = call_reducer(ev, to_apply, &accs, &elems)?;
        }
        for (k, a) in accs.into_iter().enumerate() {
            results[k].push(a);
        }
    }
    let outs: Vec<Literal> = results
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let ty = match shape {
                Shape::Tuple(t) => t.get(k).and_then(|s| s.element_type()),
                s => s.element_type(),
            }
            .unwrap_or(inits[k].element_type());
            array_from_scalars(ty, &out_dims, r).map(Literal::Array)
        })
        .collect::<EvalResult<_>>()?;
    Ok(if n == 1 {
        outs.into_iter().next().unwrap()
    } else {
        Literal::Tuple(outs)
    })
}
