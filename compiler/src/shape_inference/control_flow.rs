//! Tuples and ops that call computations: tuple, get-tuple-element, call, while, conditional,
//! fusion.

use super::util::{
    err, expect_operands, expect_scalar, list, paren_list, shapes_agree, signature, text, Result,
    Signature,
};
use crate::ir::{ComputationId, ElementType, Module, Shape};

pub(crate) fn tuple(operands: &[&Shape]) -> Result<Shape> {
    Ok(Shape::Tuple(
        operands.iter().map(|s| (*s).clone()).collect(),
    ))
}

pub(crate) fn get_tuple_element(index: i64, operands: &[&Shape]) -> Result<Shape> {
    let name = "get-tuple-element";
    expect_operands(name, operands, 1)?;
    let Some(elems) = operands[0].as_tuple() else {
        return err(format!(
            "get-tuple-element: the operand must be a tuple, got {}",
            text(operands[0])
        ));
    };
    if index < 0 || index as usize >= elems.len() {
        return err(format!(
            "get-tuple-element: index={index} is out of range for {} ({} elements)",
            text(operands[0]),
            elems.len()
        ));
    }
    Ok(elems[index as usize].clone())
}

/// Checks that a callee's parameters take exactly `operands`.
fn check_params(name: &str, role: &str, sig: &Signature, operands: &[&Shape]) -> Result<()> {
    let ok = sig.params.len() == operands.len()
        && sig
            .params
            .iter()
            .zip(operands)
            .all(|(p, o)| shapes_agree(o, p));
    if !ok {
        return err(format!(
            "{name}: {role} computation {} takes {} but is given operands {}",
            sig.name,
            paren_list(&sig.params),
            paren_list(operands)
        ));
    }
    Ok(())
}

pub(crate) fn call(module: &Module, to_apply: ComputationId, operands: &[&Shape]) -> Result<Shape> {
    let sig = signature(module, "call", "to_apply", to_apply)?;
    check_params("call", "to_apply", &sig, operands)?;
    Ok(sig.result.clone())
}

pub(crate) fn fusion(module: &Module, calls: ComputationId, operands: &[&Shape]) -> Result<Shape> {
    let sig = signature(module, "fusion", "calls", calls)?;
    check_params("fusion", "calls", &sig, operands)?;
    Ok(sig.result.clone())
}

pub(crate) fn while_loop(
    module: &Module,
    condition: ComputationId,
    body: ComputationId,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "while";
    expect_operands(name, operands, 1)?;
    let state = operands[0];
    let cond = signature(module, name, "condition", condition)?;
    check_params(name, "condition", &cond, operands)?;
    if *cond.result != Shape::scalar(ElementType::Pred) {
        return err(format!(
            "while: condition computation {} returns {}, but a loop condition returns pred[]",
            cond.name,
            text(cond.result)
        ));
    }
    let body_sig = signature(module, name, "body", body)?;
    check_params(name, "body", &body_sig, operands)?;
    if !shapes_agree(state, body_sig.result) {
        return err(format!(
            "while: body computation {} returns {}, but the loop state is {}; the body must \
             return the state's shape",
            body_sig.name,
            text(body_sig.result),
            text(state)
        ));
    }
    Ok(state.clone())
}

/// `conditional(selector, operand_0, ...)`: a pred selector picks between two branches
/// (true, false), an s32 index among any number; branch `i` takes operand `i + 1`.
pub(crate) fn conditional(
    module: &Module,
    branches: &[ComputationId],
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "conditional";
    if branches.is_empty() {
        return err("conditional: needs at least one branch computation");
    }
    if operands.len() != branches.len() + 1 {
        return err(format!(
            "conditional: {} branches need a selector and {} branch operands, got {}",
            branches.len(),
            branches.len(),
            list(operands)
        ));
    }
    let selector = expect_scalar(name, "the branch selector (operand 0)", operands[0])?;
    match selector.element_type {
        ElementType::Pred if branches.len() != 2 => {
            return err(format!(
                "conditional: a pred selector needs exactly 2 branches (true, false), got {}",
                branches.len()
            ))
        }
        ElementType::Pred | ElementType::S32 => {}
        _ => {
            return err(format!(
                "conditional: the branch selector must be pred[] or s32[], got {}",
                text(operands[0])
            ))
        }
    }
    let mut result: Option<(&Shape, &str)> = None;
    for (i, &b) in branches.iter().enumerate() {
        let sig = signature(module, name, &format!("branch {i}"), b)?;
        check_params(name, &format!("branch {i}"), &sig, &operands[i + 1..i + 2])?;
        match result {
            None => result = Some((sig.result, sig.name)),
            Some((first, first_name)) if !shapes_agree(first, sig.result) => {
                return err(format!(
                    "conditional: branches return different shapes: {first_name} returns {} \
                     but {} returns {}",
                    text(first),
                    sig.name,
                    text(sig.result)
                ))
            }
            Some(_) => {}
        }
    }
    Ok(result.expect("at least one branch").0.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::ir::{BinaryOp, ComparisonDirection, Computation, Op};
    use ElementType::*;

    fn s(t: ElementType, dims: &[i64]) -> Shape {
        Shape::array(t, dims)
    }

    fn state() -> Shape {
        Shape::Tuple(vec![s(S32, &[]), s(F32, &[4])])
    }

    /// `(s32[], f32[4]) -> (s32[], f32[4])` and `(s32[], f32[4]) -> pred[]`.
    fn loop_parts(m: &mut Module) -> (ComputationId, ComputationId) {
        let body = m.add_computation(Computation::new("body"));
        {
            let mut b = Builder::new(m, body);
            let p = b.add_with_shape(Op::Parameter(0), state(), &[]);
            let i = b.add(Op::GetTupleElement { index: 0 }, &[p]).unwrap();
            let x = b.add(Op::GetTupleElement { index: 1 }, &[p]).unwrap();
            let y = b.add(Op::Binary(BinaryOp::Add), &[x, x]).unwrap();
            b.add(Op::Tuple, &[i, y]).unwrap();
        }
        let cond = m.add_computation(Computation::new("cond"));
        {
            let mut b = Builder::new(m, cond);
            let p = b.add_with_shape(Op::Parameter(0), state(), &[]);
            let i = b.add(Op::GetTupleElement { index: 0 }, &[p]).unwrap();
            let cmp = Op::Compare {
                direction: ComparisonDirection::Lt,
                comparison_type: None,
            };
            b.add(cmp, &[i, i]).unwrap();
        }
        (cond, body)
    }

    #[test]
    fn tuples() {
        let a = s(F32, &[2]);
        let t = tuple(&[&a, &Shape::Token]).unwrap();
        assert_eq!(t, Shape::Tuple(vec![a.clone(), Shape::Token]));
        assert_eq!(get_tuple_element(0, &[&t]).unwrap(), a);
        let e = get_tuple_element(2, &[&t]).unwrap_err();
        assert!(
            e.message
                .contains("index=2 is out of range for (f32[2], token[])"),
            "{e}"
        );
        assert!(get_tuple_element(0, &[&a]).is_err());
    }

    #[test]
    fn while_checks_condition_and_body() {
        let mut m = Module::new("t");
        let (cond, body) = loop_parts(&mut m);
        let st = state();
        assert_eq!(while_loop(&m, cond, body, &[&st]).unwrap(), st);
        // Condition and body swapped: the condition returns the state, not pred[].
        let e = while_loop(&m, body, cond, &[&st]).unwrap_err();
        assert!(
            e.message
                .contains("returns (s32[], f32[4]), but a loop condition returns pred[]"),
            "{e}"
        );
        let other = Shape::Tuple(vec![s(S32, &[]), s(F32, &[5])]);
        let e = while_loop(&m, cond, body, &[&other]).unwrap_err();
        assert!(
            e.message
                .contains("takes ((s32[], f32[4])) but is given operands ((s32[], f32[5]))"),
            "{e}"
        );
    }

    #[test]
    fn call_and_fusion_check_params() {
        let mut m = Module::new("t");
        let (_, body) = loop_parts(&mut m);
        let st = state();
        assert_eq!(call(&m, body, &[&st]).unwrap(), st);
        assert_eq!(fusion(&m, body, &[&st]).unwrap(), st);
        let e = call(&m, body, &[&st, &st]).unwrap_err();
        assert!(
            e.message.contains("call: to_apply computation body takes"),
            "{e}"
        );
    }

    #[test]
    fn conditional_branches() {
        let mut m = Module::new("t");
        let (_, body) = loop_parts(&mut m);
        let (cond, _) = loop_parts(&mut m);
        let st = state();
        let p = s(Pred, &[]);
        assert_eq!(conditional(&m, &[body, body], &[&p, &st, &st]).unwrap(), st);
        let e = conditional(&m, &[body, cond], &[&p, &st, &st]).unwrap_err();
        assert!(
            e.message.contains("branches return different shapes"),
            "{e}"
        );
        let e = conditional(&m, &[body], &[&p, &st]).unwrap_err();
        assert!(e.message.contains("exactly 2 branches"), "{e}");
        let i = s(S32, &[]);
        assert_eq!(conditional(&m, &[body], &[&i, &st]).unwrap(), st);
        assert!(conditional(&m, &[body], &[&s(F32, &[]), &st]).is_err());
    }
}
