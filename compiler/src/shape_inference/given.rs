//! Checking a result shape that is given (by HLO text or by a caller) rather than inferred.

use super::util::{dims_agree, err, expect_operands, list, shapes_agree, text, Result};
use super::{elementwise, infer_shape, io, shape_ops, ShapeError};
use crate::ir::{ElementType, Module, Op, Shape};

/// Checks that `result` is a valid result shape for `op` applied to `operands`.
///
/// For ops whose shape HLO text states (broadcast, reshape, convert, constant, iota, ...)
/// this validates the stated shape against the operands and attributes; for every other op
/// it infers the shape and compares. `dot` and `convolution` may give a different element
/// type than their operands' (`preferred_element_type`): a float result for float operands,
/// an integer result for integer operands.
pub(crate) fn check_given_shape(
    module: &Module,
    op: &Op,
    operands: &[&Shape],
    result: &Shape,
) -> std::result::Result<(), ShapeError> {
    match op {
        Op::Parameter(_) => expect_operands("parameter", operands, 0),
        Op::Constant(literal) => {
            expect_operands("constant", operands, 0)?;
            let shape = literal.shape();
            if !shapes_agree(&shape, result) {
                return err(format!(
                    "constant: the literal has shape {} but the result shape is {}",
                    text(&shape),
                    text(result)
                ));
            }
            Ok(())
        }
        Op::Iota { dimension } => shape_ops::check_iota(operands, *dimension, result),
        Op::Broadcast { dimensions } => {
            expect_operands("broadcast", operands, 1)?;
            shape_ops::check_broadcast(operands[0], dimensions, result)
        }
        Op::Reshape => {
            expect_operands("reshape", operands, 1)?;
            shape_ops::check_reshape(operands[0], result)
        }
        Op::Bitcast => shape_ops::check_bitcast(operands, result),
        Op::Convert => elementwise::check_convert(operands, result),
        Op::BitcastConvert => elementwise::check_bitcast_convert(operands, result),
        Op::Infeed { .. } => io::check_infeed(operands, result),
        Op::CustomCall { called, target, .. } => {
            // The target decides the shape; only the called computations can be checked.
            for c in called {
                if c.0 as usize >= module.computations.len() {
                    return err(format!(
                        "custom-call: custom_call_target=\"{target}\" calls {c}, but the module \
                         has only {} computations",
                        module.computations.len()
                    ));
                }
            }
            Ok(())
        }
        Op::Dot(_) | Op::Convolution(_) => {
            let inferred = infer_shape(module, op, operands)?;
            check_with_preferred_type(op, operands, &inferred, result)
        }
        _ => {
            let inferred = infer_shape(module, op, operands)?;
            if !shapes_agree(&inferred, result) {
                return mismatch(op, operands, &inferred, result);
            }
            Ok(())
        }
    }
}

fn mismatch(op: &Op, operands: &[&Shape], inferred: &Shape, result: &Shape) -> Result<()> {
    let (noun, verb) = if operands.len() == 1 {
        ("operand", "gives")
    } else {
        ("operands", "give")
    };
    err(format!(
        "{}: the result shape is {}, but {noun} {} {verb} {}",
        op.opcode_name(),
        text(result),
        list(operands),
        text(inferred)
    ))
}

/// Whether a result element type may replace the operands' in dot/convolution.
fn preferred_type_allowed(operand: ElementType, result: ElementType) -> bool {
    operand == result
        || (operand.is_float() && result.is_float())
        || (operand.is_integer() && result.is_integer())
}

fn check_with_preferred_type(
    op: &Op,
    operands: &[&Shape],
    inferred: &Shape,
    result: &Shape,
) -> Result<()> {
    let (Some(i), Some(r)) = (inferred.as_array(), result.as_array()) else {
        return mismatch(op, operands, inferred, result);
    };
    if !dims_agree(i, &r.with_element_type(i.element_type)) {
        return mismatch(op, operands, inferred, result);
    }
    if !preferred_type_allowed(i.element_type, r.element_type) {
        return err(format!(
            "{}: result element type {} cannot hold the product of {} operands {}; a \
             preferred element type must be a float for float operands and an integer for \
             integer operands",
            op.opcode_name(),
            r.element_type,
            i.element_type,
            list(operands)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Array, BinaryOp, DotDimensionNumbers, Literal};
    use ElementType::*;

    fn s(t: ElementType, dims: &[i64]) -> Shape {
        Shape::array(t, dims)
    }

    #[test]
    fn inferable_ops_compare_with_given() {
        let m = Module::new("t");
        let x = s(F32, &[2]);
        let add = Op::Binary(BinaryOp::Add);
        assert!(check_given_shape(&m, &add, &[&x, &x], &x).is_ok());
        let e = check_given_shape(&m, &add, &[&x, &x], &s(F32, &[3])).unwrap_err();
        assert!(
            e.message.contains(
                "add: the result shape is f32[3], but operands f32[2] and f32[2] give f32[2]"
            ),
            "{e}"
        );
    }

    #[test]
    fn given_shape_ops_are_validated() {
        let m = Module::new("t");
        let x = s(F32, &[2, 3]);
        let c = Op::Constant(Literal::Array(Array::f32(&[2], vec![1.0, 2.0])));
        assert!(check_given_shape(&m, &c, &[], &s(F32, &[2])).is_ok());
        assert!(check_given_shape(&m, &c, &[], &s(F32, &[3])).is_err());
        let neg = Op::Unary(crate::ir::UnaryOp::Negate);
        let e = check_given_shape(&m, &neg, &[&x], &s(F32, &[3])).unwrap_err();
        assert!(
            e.message.contains(
                "negate: the result shape is f32[3], but operand f32[2,3] gives f32[2,3]"
            ),
            "{e}"
        );
        assert!(check_given_shape(&m, &Op::Parameter(0), &[], &x).is_ok());
        assert!(check_given_shape(&m, &Op::Parameter(0), &[&x], &x).is_err());
        assert!(check_given_shape(&m, &Op::Reshape, &[&x], &s(F32, &[6])).is_ok());
        assert!(check_given_shape(&m, &Op::Convert, &[&x], &s(S32, &[2, 3])).is_ok());
        let b = Op::Broadcast {
            dimensions: vec![0],
        };
        assert!(check_given_shape(&m, &b, &[&s(F32, &[2])], &x).is_ok());
        assert!(check_given_shape(&m, &b, &[&s(F32, &[3])], &x).is_err());
    }

    #[test]
    fn dot_accepts_a_preferred_float_type() {
        let m = Module::new("t");
        let dot = Op::Dot(DotDimensionNumbers {
            lhs_contracting: vec![1],
            rhs_contracting: vec![0],
            ..Default::default()
        });
        let a = s(BF16, &[2, 3]);
        let b = s(BF16, &[3, 4]);
        assert!(check_given_shape(&m, &dot, &[&a, &b], &s(BF16, &[2, 4])).is_ok());
        assert!(check_given_shape(&m, &dot, &[&a, &b], &s(F32, &[2, 4])).is_ok());
        let e = check_given_shape(&m, &dot, &[&a, &b], &s(S32, &[2, 4])).unwrap_err();
        assert!(e.message.contains("preferred element type"), "{e}");
        let e = check_given_shape(&m, &dot, &[&a, &b], &s(F32, &[4, 2])).unwrap_err();
        assert!(
            e.message.contains("bf16[2,3] and bf16[3,4] give bf16[2,4]"),
            "{e}"
        );
    }
}
