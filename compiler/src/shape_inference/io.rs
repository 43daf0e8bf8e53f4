//! Ops that talk to the host or name the device: infeed, outfeed, after-all, replica-id,
//! partition-id.

use super::util::{err, expect_operands, list, text, Result};
use crate::ir::{ElementType, Shape};

/// `replica-id` / `partition-id`: no operands, `u32[]`.
pub(crate) fn device_id(name: &str, operands: &[&Shape]) -> Result<Shape> {
    expect_operands(name, operands, 0)?;
    Ok(Shape::scalar(ElementType::U32))
}

/// `after-all(tokens...)`: joins tokens (any number, even none) into one.
pub(crate) fn after_all(operands: &[&Shape]) -> Result<Shape> {
    if operands.iter().any(|s| !s.is_token()) {
        return err(format!(
            "after-all: every operand must be a token, got {}",
            list(operands)
        ));
    }
    Ok(Shape::Token)
}

/// `outfeed(data, token)`: sends data to the host, returns a token.
pub(crate) fn outfeed(operands: &[&Shape]) -> Result<Shape> {
    expect_operands("outfeed", operands, 2)?;
    if !operands[1].is_token() {
        return err(format!(
            "outfeed: operand 1 must be a token (ordering the transfer), got {}",
            text(operands[1])
        ));
    }
    if operands[0].is_token() {
        return err(format!(
            "outfeed: operand 0 must be data (an array or tuple), got {}",
            text(operands[0])
        ));
    }
    Ok(Shape::Token)
}

/// `infeed(token)` with the given result `(data, token)`.
pub(crate) fn check_infeed(operands: &[&Shape], result: &Shape) -> Result<()> {
    expect_operands("infeed", operands, 1)?;
    if !operands[0].is_token() {
        return err(format!(
            "infeed: the operand must be a token, got {}",
            text(operands[0])
        ));
    }
    match result.as_tuple() {
        Some([data, Shape::Token]) if !data.is_token() => Ok(()),
        _ => err(format!(
            "infeed: the result must be (data, token[]), got {}",
            text(result)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_ids() {
        let t = Shape::Token;
        let x = Shape::array(ElementType::F32, &[2]);
        assert_eq!(after_all(&[]).unwrap(), t);
        assert_eq!(after_all(&[&t, &t]).unwrap(), t);
        let e = after_all(&[&t, &x]).unwrap_err();
        assert!(e.message.contains("token[] and f32[2]"), "{e}");
        assert_eq!(outfeed(&[&x, &t]).unwrap(), t);
        assert!(outfeed(&[&x, &x]).is_err());
        assert_eq!(
            device_id("replica-id", &[]).unwrap(),
            Shape::scalar(ElementType::U32)
        );
        assert!(device_id("replica-id", &[&x]).is_err());
        let r = Shape::Tuple(vec![x.clone(), t.clone()]);
        assert!(check_infeed(&[&t], &r).is_ok());
        assert!(check_infeed(&[&x], &r).is_err());
        assert!(check_infeed(&[&t], &x).is_err());
    }
}
