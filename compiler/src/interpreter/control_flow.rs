//! Tuples, `while`, `conditional`, and custom calls.

use super::element::index_scalar;
use super::{err, EvalError, EvalResult, Evaluator};
use crate::ir::{ComputationId, Literal, Shape};

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
/// when the shapes already agree, i.e. inside a per-replica program; anything else is an error.
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
        other => err(format!(
            "custom-call target \"{other}\" is not supported by the interpreter"
        )),
    }
}
