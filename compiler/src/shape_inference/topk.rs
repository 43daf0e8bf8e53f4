//! `topk`: XLA's TopK over the last dimension, giving `(values, s32 indices)`.

use super::util::{err, expect_array, expect_operands, text, Result};
use crate::ir::{ElementType, Shape};

/// `(T[..., k], s32[..., k])` from an operand `T[..., n]` with `0 <= k <= n`.
pub(super) fn topk(k: i64, operands: &[&Shape]) -> Result<Shape> {
    let name = "topk";
    expect_operands(name, operands, 1)?;
    let a = expect_array(name, "the operand", operands[0])?;
    if a.rank() == 0 {
        return err(format!(
            "topk: the operand must have at least one dimension, got {}",
            text(operands[0])
        ));
    }
    if a.element_type.is_pred() || !(a.element_type.is_float() || a.element_type.is_integer()) {
        return err(format!(
            "topk: the operand must be of a number type, got {}",
            text(operands[0])
        ));
    }
    let last = a.rank() - 1;
    let n = a.dims[last];
    if k < 0 || (!a.is_dynamic_dim(last) && k > n) {
        return err(format!(
            "topk: k={k} must be between 0 and the size {n} of the last dimension of {}",
            text(operands[0])
        ));
    }
    let mut values = a.clone();
    values.dims[last] = k;
    if !values.dynamic.is_empty() {
        values.dynamic[last] = false;
    }
    let indices = values.with_element_type(ElementType::S32);
    Ok(Shape::Tuple(vec![
        Shape::Array(values),
        Shape::Array(indices),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_leading_dims() {
        let x = Shape::array(ElementType::F32, &[4, 9]);
        let s = topk(3, &[&x]).unwrap();
        assert_eq!(
            s,
            Shape::Tuple(vec![
                Shape::array(ElementType::F32, &[4, 3]),
                Shape::array(ElementType::S32, &[4, 3])
            ])
        );
        assert!(topk(10, &[&x]).unwrap_err().message.contains("k=10"));
        assert!(topk(1, &[&Shape::scalar(ElementType::F32)]).is_err());
    }
}
