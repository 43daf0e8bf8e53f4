//! `sort`: its operands sorted together along one dimension by a comparator.

use super::util::{err, expect_array, shapes_agree, signature, text, Result};
use crate::ir::{ComputationId, ElementType, Module, Shape};

/// The operands' shapes (a tuple of them when there are several): every operand is an array
/// of the same dimensions, `dimension` is one of them, and the comparator takes two scalars of
/// each operand's type, `(a_0, b_0, a_1, b_1, ...)`, and returns `pred[]`.
pub(crate) fn sort(
    module: &Module,
    dimension: i64,
    to_apply: ComputationId,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "sort";
    let Some(first) = operands.first() else {
        return err("sort: needs at least one operand");
    };
    let first = expect_array(name, "operand 0", first)?;
    let mut arrays = Vec::with_capacity(operands.len());
    for (k, s) in operands.iter().enumerate() {
        let a = expect_array(name, &format!("operand {k}"), s)?;
        if a.dims != first.dims {
            return err(format!(
                "sort: operand {k} is {}, operand 0 is {}: every operand needs the same dimensions",
                text(s),
                text(operands[0])
            ));
        }
        arrays.push(a);
    }
    if dimension < 0 || dimension as usize >= first.rank() {
        return err(format!(
            "sort: dimension {dimension} is not a dimension of {}",
            text(operands[0])
        ));
    }
    let sig = signature(module, name, "to_apply", to_apply)?;
    let expected: Vec<Shape> = arrays
        .iter()
        .flat_map(|a| [Shape::scalar(a.element_type), Shape::scalar(a.element_type)])
        .collect();
    let params_ok = sig.params.len() == expected.len()
        && sig
            .params
            .iter()
            .zip(&expected)
            .all(|(p, e)| shapes_agree(e, p));
    if !params_ok || !shapes_agree(&Shape::scalar(ElementType::Pred), sig.result) {
        let want: Vec<String> = expected.iter().map(text).collect();
        return err(format!(
            "sort: comparator {} has signature {}, but the operands need ({}) -> pred[]",
            sig.name,
            sig.text(),
            want.join(", ")
        ));
    }
    Ok(if operands.len() == 1 {
        operands[0].clone()
    } else {
        Shape::Tuple(operands.iter().map(|s| (*s).clone()).collect())
    })
}
