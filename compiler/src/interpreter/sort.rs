//! `sort`: each 1-D slice along the dimension is ordered by calling the comparator on
//! scalars, `less(a_0, b_0, a_1, b_1, ...)`, and every operand is permuted the same way.
//!
//! The order is a stable merge sort (Rust's `sort_by`) whether or not `is_stable` is set:
//! XLA leaves the order of equal elements open without it, and a stable order is one of the
//! orders it allows (and the one JAX's CPU backend gives). Each comparison evaluates the
//! comparator, so a sort costs about `n log n` small evaluations: right for the sorts of a
//! training step (medians, argsorts of rows), slow for millions of elements.

use super::element::{for_each_type, typed, Elem};
use super::reduce::element_literal;
use super::{err, EvalError, EvalResult, Evaluator, LoneReplica};
use crate::ir::{Array, ComputationId, Literal, Module};
use std::cell::RefCell;

/// `operands` sorted along `dimension` by `to_apply`, a tuple when there are several.
pub(crate) fn sort(
    ev: &Evaluator,
    operands: &[&Array],
    dimension: i64,
    to_apply: ComputationId,
) -> EvalResult<Literal> {
    let Some(first) = operands.first() else {
        return err("sort needs an operand");
    };
    let dims = &first.shape.dims;
    if let Some(k) = operands.iter().position(|a| a.shape.dims != *dims) {
        return err(format!(
            "sort operand {k} is {}, operand 0 is {}",
            operands[k].shape, first.shape
        ));
    }
    if dimension < 0 || dimension as usize >= dims.len() {
        return err(format!(
            "sort dimension {dimension} is not a dimension of {}",
            first.shape
        ));
    }
    let d = dimension as usize;
    let len = dims[d] as usize;
    let inner: usize = dims[d + 1..].iter().map(|&x| x as usize).product();
    let outer: usize = dims[..d].iter().map(|&x| x as usize).product();
    // `order[i]`: the element that goes to flat position `i`.
    let mut order: Vec<usize> = (0..first.len()).collect();
    let failure: RefCell<Option<EvalError>> = RefCell::new(None);
    let less = |a: usize, b: usize| -> bool {
        if failure.borrow().is_some() {
            return false;
        }
        let args: Vec<Literal> = operands
            .iter()
            .flat_map(|x| [element_literal(x, a), element_literal(x, b)])
            .collect();
        let refs: Vec<&Literal> = args.iter().collect();
        let answer = ev.eval_computation(to_apply, &refs).and_then(|out| {
            match out.as_array().and_then(|p| bool::slice(&p.data)) {
                Some(&[b]) => Ok(b),
                _ => err("the comparator must return pred[]"),
            }
        });
        answer.unwrap_or_else(|e| {
            *failure.borrow_mut() = Some(e);
            false
        })
    };
    let mut slice: Vec<usize> = Vec::with_capacity(len);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            slice.clear();
            slice.extend((0..len).map(at));
            slice.sort_by(|&a, &b| {
                if less(a, b) {
                    std::cmp::Ordering::Less
                } else if less(b, a) {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            });
            for (k, &src) in slice.iter().enumerate() {
                order[at(k)] = src;
            }
        }
    }
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    let sorted: Vec<Literal> = operands
        .iter()
        .map(|a| Literal::Array(take(a, &order)))
        .collect();
    Ok(if sorted.len() == 1 {
        sorted.into_iter().next().unwrap()
    } else {
        Literal::Tuple(sorted)
    })
}

/// The elements of `a` at the flat positions `order`, in `a`'s shape.
fn take(a: &Array, order: &[usize]) -> Array {
    let data = for_each_type!(a.element_type(), T => {
        let xs = typed::<T>(a).expect("the array's own type");
        T::wrap(order.iter().map(|&i| xs[i]).collect())
    });
    Array::new(a.shape.clone(), data)
}

/// `operands` sorted along `dimension` by the comparator `to_apply` of `module`, as the
/// interpreter sorts them (for the JIT's sort routine, so both backends agree).
pub fn sort_arrays(
    module: &Module,
    operands: &[&Array],
    dimension: i64,
    to_apply: ComputationId,
) -> Result<Literal, EvalError> {
    let ev = Evaluator::new(module, &LoneReplica);
    sort(&ev, operands, dimension, to_apply)
}
