//! Tuples, `while`, `conditional`, and custom calls.

use super::element::index_scalar;
use super::{err, EvalError, EvalResult, Evaluator};
use crate::ir::{Array, ArrayData, ComputationId, Literal, Shape};
use crate::passes::threefry_rounds::{rounds, THREEFRY_ROUNDS_TARGET};

pub(crate) fn get_tuple_element(t: &Literal, index: i64) -> EvalResult<Literal> {
    match t {
        Literal::Tuple(items) => items
            .get(usize::try_from(index).unwrap_or(usize::MAX))
            .cloned()
            .ok_or_else(|| {
                EvalError::new(format!(
                    "tuple index {index} out of range ({} elements)",
                    items.len()
                ))
            }),
        other => err(format!(
            "get-tuple-element of a non-tuple {}",
            other.shape().to_text(false)
        )),
    }
}

/// `while(init)`: runs `body` while `condition` returns true.
pub(crate) fn while_loop(
    ev: &Evaluator,
    condition: ComputationId,
    body: ComputationId,
    init: &Literal,
) -> EvalResult<Literal> {
    let mut state = init.clone();
    loop {
        let c = ev.eval_computation(condition, &[&state])?;
        match c.as_array().map(|a| &a.data) {
            Some(crate::ir::ArrayData::Pred(v)) if v.len() == 1 => {
                if !v[0] {
                    return Ok(state);
                }
            }
            _ => {
                return err(format!(
                    "the while condition returned {}, not pred[]",
                    c.shape().to_text(false)
                ))
            }
        }
        state = ev.eval_computation(body, &[&state])?;
    }
}

/// `conditional(selector, operands...)`: a pred selects branch 0 (true) or 1 (false); an
/// s32 index selects that branch, and an out-of-range index the last one (HLO's rule).
pub(crate) fn conditional(
    ev: &Evaluator,
    branches: &[ComputationId],
    operands: &[&Literal],
) -> EvalResult<Literal> {
    if branches.is_empty() || operands.len() != branches.len() + 1 {
        return err(format!(
            "conditional with {} branches needs {} operands, got {}",
            branches.len(),
            branches.len() + 1,
            operands.len()
        ));
    }
    let selector = operands[0]
        .as_array()
        .ok_or_else(|| EvalError::new("the conditional selector must be an array"))?;
    let branch = match &selector.data {
        crate::ir::ArrayData::Pred(v) if v.len() == 1 => {
            if branches.len() != 2 {
                return err("a pred-selected conditional needs exactly two branches");
            }
            if v[0] {
                0
            } else {
                1
            }
        }
        _ => {
            let i = index_scalar(selector)?;
            if i < 0 || i as usize >= branches.len() {
                branches.len() - 1
            } else {
                i as usize
            }
        }
    };
    ev.eval_computation(branches[branch], &[operands[branch + 1]])
}

/// Custom calls. The shard_map markers `xla.sdy.GlobalToLocalShape` and
/// `xla.sdy.LocalToGlobalShape` pass their operands through (a tuple when the result is one)
/// when the shapes already agree, i.e. inside a per-replica program; Threefry's rounds
/// ([`THREEFRY_ROUNDS_TARGET`]) run element by element; anything else is an error.
pub(crate) fn custom_call(
    target: &str,
    operands: &[&Literal],
    shape: &Shape,
) -> EvalResult<Literal> {
    match target {
        "xla.sdy.GlobalToLocalShape" | "xla.sdy.LocalToGlobalShape" => {
            let value = match (shape, operands) {
                (Shape::Tuple(_), ops) => {
                    Literal::Tuple(ops.iter().map(|l| (*l).clone()).collect())
                }
                (_, [one]) => (*one).clone(),
                _ => {
                    return err(format!(
                        "{target} with {} operands and a non-tuple result",
                        operands.len()
                    ))
                }
            };
            if !super::shapes_match(&value.shape(), shape) {
                return err(format!(
                    "{target} changes {} to {}: this is a shard_map module; run it on its replicas \
                     with tessel_runtime::session (`tessel run --replicas N`)",
                    value.shape().to_text(false),
                    shape.to_text(false)
                ));
            }
            Ok(value)
        }
        THREEFRY_ROUNDS_TARGET => threefry_rounds(operands, shape),
        other => err(format!(
            "custom-call target \"{other}\" is not supported by the interpreter"
        )),
    }
}

/// [`THREEFRY_ROUNDS_TARGET`]: two u32 counter words (scalars or arrays of the result's
/// dimensions) and twelve u32 scalars; a tuple of the two output words.
fn threefry_rounds(operands: &[&Literal], shape: &Shape) -> EvalResult<Literal> {
    let words = |l: &Literal| match l.as_array().map(|a| &a.data) {
        Some(ArrayData::U32(w)) => Ok(w.clone()),
        _ => err(format!("{THREEFRY_ROUNDS_TARGET} takes u32 arrays")),
    };
    let out = match shape {
        Shape::Tuple(items) if items.len() == 2 && items[0] == items[1] => items[0].as_array(),
        _ => None,
    };
    let Some(out) = out.filter(|_| operands.len() == 14) else {
        return err(format!(
            "{THREEFRY_ROUNDS_TARGET} takes 14 operands and gives two equal arrays"
        ));
    };
    let n = out.element_count() as usize;
    let (c0, c1) = (words(operands[0])?, words(operands[1])?);
    let mut added = [0u32; 12];
    for (a, l) in added.iter_mut().zip(&operands[2..]) {
        match words(l)?.as_slice() {
            [w] => *a = *w,
            _ => {
                return err(format!(
                    "{THREEFRY_ROUNDS_TARGET}'s added words are scalars"
                ))
            }
        }
    }
    let at = |w: &[u32], i: usize| -> EvalResult<u32> {
        match w.len() {
            1 => Ok(w[0]),
            len if len == n => Ok(w[i]),
            len => err(format!(
                "{THREEFRY_ROUNDS_TARGET}: a counter of {len} words for {n}"
            )),
        }
    };
    let (mut x0, mut x1) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let [a, b] = rounds(at(&c0, i)?, at(&c1, i)?, &added);
        x0.push(a);
        x1.push(b);
    }
    let word = |w: Vec<u32>| Literal::Array(Array::new(out.clone(), ArrayData::U32(w)));
    Ok(Literal::Tuple(vec![word(x0), word(x1)]))
}
