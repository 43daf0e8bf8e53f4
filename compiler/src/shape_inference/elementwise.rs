//! Elementwise ops: unary and binary math, compare, select, clamp, convert, bitcast-convert, copy.
//!
//! HLO has no implicit broadcasting: operands of a binary op must have the same dimensions
//! (a dynamic dimension of unknown size matches any size) and the same element type.

use super::util::{
    array_text, canonical, err, expect_array, expect_operands, list, make_array, merge_dims, text,
    Result,
};
use crate::ir::{
    ArrayShape, BinaryOp, ComparisonDirection, ComparisonType, ElementType, Shape, UnaryOp,
    UNKNOWN_DIM,
};

/// What element types a unary op accepts, and what it returns.
fn unary_rule(op: UnaryOp) -> (fn(ElementType) -> bool, &'static str, Option<ElementType>) {
    use UnaryOp::*;
    fn numeric(t: ElementType) -> bool {
        t.is_float() || t.is_integer()
    }
    fn float(t: ElementType) -> bool {
        t.is_float()
    }
    fn int(t: ElementType) -> bool {
        t.is_integer()
    }
    fn pred_or_int(t: ElementType) -> bool {
        t.is_pred() || t.is_integer()
    }
    match op {
        Abs | Negate | Sign => (numeric, "an integer or floating-point", None),
        Not => (pred_or_int, "a pred or integer", None),
        PopCnt | Clz => (int, "an integer", None),
        IsFinite => (float, "a floating-point", Some(ElementType::Pred)),
        Exp | Expm1 | Log | Log1p | Tanh | Logistic | Sqrt | Rsqrt | Cbrt | Floor | Ceil
        | RoundNearestEven | RoundNearestAfz | Sine | Cosine | Tan | Erf | Real | Imag => {
            (float, "a floating-point", None)
        }
    }
}

pub(crate) fn unary(op: UnaryOp, operands: &[&Shape]) -> Result<Shape> {
    let name = op.name();
    expect_operands(name, operands, 1)?;
    let a = expect_array(name, "the operand", operands[0])?;
    let (accepts, kind, result_type) = unary_rule(op);
    if !accepts(a.element_type) {
        return err(format!(
            "{name}: operand {} has element type {}, expected {kind} type",
            array_text(a),
            a.element_type
        ));
    }
    let result = canonical(a);
    Ok(Shape::Array(match result_type {
        Some(t) => result.with_element_type(t),
        None => result,
    }))
}

/// Which element types a binary op accepts.
fn binary_accepts(op: BinaryOp, t: ElementType) -> Option<&'static str> {
    use BinaryOp::*;
    let ok = match op {
        And | Or | Xor => t.is_pred() || t.is_integer(),
        ShiftLeft | ShiftRightLogical | ShiftRightArithmetic => t.is_integer(),
        Atan2 => t.is_float(),
        Add | Subtract | Multiply | Divide | Remainder | Maximum | Minimum | Power => true,
    };
    if ok {
        return None;
    }
    Some(match op {
        And | Or | Xor => "a pred or integer",
        ShiftLeft | ShiftRightLogical | ShiftRightArithmetic => "an integer",
        _ => "a floating-point",
    })
}

/// Two operands of the same element type and compatible dimensions; returns the combined
/// dimensions (dynamic where either operand is).
fn same_shape_operands<'a>(
    name: &str,
    operands: &[&'a Shape],
) -> Result<(&'a ArrayShape, Vec<(i64, bool)>)> {
    expect_operands(name, operands, 2)?;
    let lhs = expect_array(name, "the first operand", operands[0])?;
    let rhs = expect_array(name, "the second operand", operands[1])?;
    let Some(dims) = merge_dims(lhs, rhs) else {
        return err(format!(
            "{name}: operand shapes {} and {} differ; elementwise ops need equal dimensions \
             (HLO has no implicit broadcasting: broadcast the smaller operand first)",
            text(operands[0]),
            text(operands[1])
        ));
    };
    if lhs.element_type != rhs.element_type {
        return err(format!(
            "{name}: operand element types differ: {} and {}; convert one operand first",
            text(operands[0]),
            text(operands[1])
        ));
    }
    Ok((lhs, dims))
}

pub(crate) fn binary(op: BinaryOp, operands: &[&Shape]) -> Result<Shape> {
    let name = op.name();
    let (lhs, dims) = same_shape_operands(name, operands)?;
    if let Some(kind) = binary_accepts(op, lhs.element_type) {
        return err(format!(
            "{name}: operands {} have element type {}, expected {kind} type",
            list(operands),
            lhs.element_type
        ));
    }
    Ok(Shape::Array(make_array(lhs.element_type, &dims)))
}

/// The element types a comparison type orders.
fn comparison_type_accepts(ct: ComparisonType, t: ElementType) -> bool {
    match ct {
        ComparisonType::Float | ComparisonType::TotalOrder => t.is_float(),
        ComparisonType::Signed => t.is_signed_int(),
        ComparisonType::Unsigned => t.is_unsigned_int() || t.is_pred(),
    }
}

pub(crate) fn compare(
    direction: ComparisonDirection,
    comparison_type: Option<ComparisonType>,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "compare";
    let (lhs, dims) = same_shape_operands(name, operands)?;
    if let Some(ct) = comparison_type {
        if !comparison_type_accepts(ct, lhs.element_type) {
            return err(format!(
                "compare: direction={} type={} cannot order operands {} of element type {}; \
                 the default type for {} is {}",
                direction.name(),
                ct.name(),
                list(operands),
                lhs.element_type,
                lhs.element_type,
                ComparisonType::default_for(lhs.element_type).name()
            ));
        }
    }
    Ok(Shape::Array(make_array(ElementType::Pred, &dims)))
}

/// `select(pred, on_true, on_false)`: pred is `pred` of the same dimensions, or a scalar.
pub(crate) fn select(operands: &[&Shape]) -> Result<Shape> {
    let name = "select";
    expect_operands(name, operands, 3)?;
    let pred = expect_array(name, "the predicate (operand 0)", operands[0])?;
    let on_true = expect_array(name, "on_true (operand 1)", operands[1])?;
    let on_false = expect_array(name, "on_false (operand 2)", operands[2])?;
    let Some(dims) = merge_dims(on_true, on_false) else {
        return err(format!(
            "select: on_true and on_false shapes {} and {} differ; they must be equal",
            text(operands[1]),
            text(operands[2])
        ));
    };
    if on_true.element_type != on_false.element_type {
        return err(format!(
            "select: on_true and on_false element types differ: {} and {}",
            text(operands[1]),
            text(operands[2])
        ));
    }
    if pred.element_type != ElementType::Pred {
        return err(format!(
            "select: the predicate must have element type pred, got {} (operands {})",
            text(operands[0]),
            list(operands)
        ));
    }
    let dims = if pred.rank() == 0 {
        dims
    } else {
        let result = make_array(on_true.element_type, &dims);
        match merge_dims(pred, &result) {
            Some(d) => d,
            None => {
                return err(format!(
                    "select: predicate shape {} must be a scalar or have the dimensions of \
                     on_true/on_false; operands are {}",
                    text(operands[0]),
                    list(operands)
                ))
            }
        }
    };
    Ok(Shape::Array(make_array(on_true.element_type, &dims)))
}

/// `clamp(min, x, max)`: min and max are scalars or have x's shape; all one element type.
pub(crate) fn clamp(operands: &[&Shape]) -> Result<Shape> {
    let name = "clamp";
    expect_operands(name, operands, 3)?;
    let min = expect_array(name, "min (operand 0)", operands[0])?;
    let x = expect_array(name, "the operand (operand 1)", operands[1])?;
    let max = expect_array(name, "max (operand 2)", operands[2])?;
    if min.element_type != x.element_type || max.element_type != x.element_type {
        return err(format!(
            "clamp: element types of min, operand and max differ: {}; they must be equal",
            list(operands)
        ));
    }
    let mut dims: Vec<(i64, bool)> = canonical_dims(x);
    for (bound, role) in [(min, "min"), (max, "max")] {
        if bound.rank() == 0 {
            continue;
        }
        match merge_dims(bound, &make_array(x.element_type, &dims)) {
            Some(d) => dims = d,
            None => {
                return err(format!(
                    "clamp: {role} must be a scalar or have the operand's shape; operands \
                     (min, operand, max) are {}",
                    list(operands)
                ))
            }
        }
    }
    Ok(Shape::Array(make_array(x.element_type, &dims)))
}

fn canonical_dims(a: &ArrayShape) -> Vec<(i64, bool)> {
    (0..a.rank()).map(|d| super::util::dim(a, d)).collect()
}

/// `copy`: any shape, unchanged.
pub(crate) fn copy(operands: &[&Shape]) -> Result<Shape> {
    expect_operands("copy", operands, 1)?;
    Ok(match operands[0] {
        Shape::Array(a) => Shape::Array(canonical(a)),
        other => other.clone(),
    })
}

/// `convert` to the given result: same dimensions, any element types.
pub(crate) fn check_convert(operands: &[&Shape], result: &Shape) -> Result<()> {
    let name = "convert";
    expect_operands(name, operands, 1)?;
    let a = expect_array(name, "the operand", operands[0])?;
    let r = expect_array(name, "the result", result)?;
    if !super::util::dims_agree(&canonical(a), &r.with_element_type(a.element_type)) {
        return err(format!(
            "convert: result shape {} must have the dimensions of operand {}",
            text(result),
            text(operands[0])
        ));
    }
    Ok(())
}

/// `bitcast-convert` to the given result. Equal bit widths keep the dimensions; converting to
/// a narrower type adds a trailing dimension of size `wide / narrow`, converting to a wider
/// type removes a trailing dimension that must have that size (as XLA).
pub(crate) fn check_bitcast_convert(operands: &[&Shape], result: &Shape) -> Result<()> {
    let name = "bitcast-convert";
    expect_operands(name, operands, 1)?;
    let a = expect_array(name, "the operand", operands[0])?;
    let r = expect_array(name, "the result", result)?;
    let (from, to) = (a.element_type, r.element_type);
    if from == ElementType::Pred || to == ElementType::Pred {
        return err(format!(
            "bitcast-convert: pred has no defined bit layout; cannot convert {} to {}",
            text(operands[0]),
            text(result)
        ));
    }
    let (wf, wt) = (from.bit_width(), to.bit_width());
    let mut expected: Vec<(i64, bool)> = canonical_dims(a);
    if wf > wt {
        expected.push(((wf / wt) as i64, false));
    } else if wf < wt {
        let ratio = (wt / wf) as i64;
        match expected.last() {
            Some(&(last, _)) if last == ratio || last == UNKNOWN_DIM => {
                expected.pop();
            }
            _ => {
                return err(format!(
                    "bitcast-convert: converting {} to the wider type {to} needs a last \
                     dimension of size {ratio} ({wt} bits / {wf} bits), which it removes",
                    text(operands[0])
                ))
            }
        }
    }
    let expected = make_array(to, &expected);
    if !super::util::dims_agree(&expected, r) {
        return err(format!(
            "bitcast-convert: converting {} to {to} gives {}, but the result shape is {}",
            text(operands[0]),
            array_text(&expected),
            text(result)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ArrayShape;
    use ElementType::*;

    fn s(t: ElementType, dims: &[i64]) -> Shape {
        Shape::array(t, dims)
    }

    fn dynamic(t: ElementType, dims: &[i64], flags: &[bool]) -> Shape {
        let mut a = ArrayShape::new(t, dims);
        a.dynamic = flags.iter().copied().collect();
        Shape::Array(a)
    }

    #[test]
    fn binary_ops_keep_shape_and_type() {
        let x = s(F32, &[2, 3]);
        assert_eq!(binary(BinaryOp::Add, &[&x, &x]).unwrap(), x);
        let i = s(U32, &[4]);
        assert_eq!(binary(BinaryOp::ShiftLeft, &[&i, &i]).unwrap(), i);
        let p = s(Pred, &[4]);
        assert_eq!(binary(BinaryOp::And, &[&p, &p]).unwrap(), p);
    }

    #[test]
    fn binary_with_different_dims_names_both_shapes() {
        let e = binary(BinaryOp::Add, &[&s(F32, &[2, 3]), &s(F32, &[3, 2])]).unwrap_err();
        assert!(
            e.message
                .contains("add: operand shapes f32[2,3] and f32[3,2] differ"),
            "{e}"
        );
        assert!(e.message.contains("broadcast"), "{e}");
        let e = binary(BinaryOp::Multiply, &[&s(F32, &[2]), &s(F32, &[])]).unwrap_err();
        assert!(e.message.contains("f32[2] and f32[]"), "{e}");
    }

    #[test]
    fn binary_with_different_types_names_both() {
        let e = binary(BinaryOp::Subtract, &[&s(F32, &[2]), &s(S32, &[2])]).unwrap_err();
        assert!(e.message.contains("subtract"), "{e}");
        assert!(e.message.contains("f32[2] and s32[2]"), "{e}");
    }

    #[test]
    fn binary_type_rules() {
        let f = s(F32, &[2]);
        let e = binary(BinaryOp::ShiftLeft, &[&f, &f]).unwrap_err();
        assert!(e.message.contains("expected an integer type"), "{e}");
        let e = binary(BinaryOp::And, &[&f, &f]).unwrap_err();
        assert!(e.message.contains("pred or integer"), "{e}");
        let i = s(S32, &[2]);
        let e = binary(BinaryOp::Atan2, &[&i, &i]).unwrap_err();
        assert!(e.message.contains("floating-point"), "{e}");
    }

    #[test]
    fn binary_operand_count() {
        let f = s(F32, &[2]);
        let e = binary(BinaryOp::Add, &[&f]).unwrap_err();
        assert!(e.message.contains("add: expects 2 operands, got 1"), "{e}");
        let e = binary(BinaryOp::Add, &[&f, &Shape::Token]).unwrap_err();
        assert!(e.message.contains("must be an array, got token[]"), "{e}");
    }

    #[test]
    fn dynamic_dims_propagate_and_unknown_matches() {
        let d = dynamic(F32, &[UNKNOWN_DIM, 3], &[true, false]);
        let x = s(F32, &[5, 3]);
        // Unknown size combines with a known one; the result stays dynamic.
        let r = binary(BinaryOp::Add, &[&d, &x]).unwrap();
        assert_eq!(r, dynamic(F32, &[5, 3], &[true, false]));
        let bounded = dynamic(F32, &[5, 3], &[true, false]);
        assert_eq!(binary(BinaryOp::Add, &[&x, &bounded]).unwrap(), bounded);
        // Unknown size still has to agree on the static dimensions.
        let e = binary(BinaryOp::Add, &[&d, &s(F32, &[5, 4])]).unwrap_err();
        assert!(e.message.contains("f32[?,3] and f32[5,4] differ"), "{e}");
    }

    #[test]
    fn compare_gives_pred_and_checks_type() {
        let x = s(F32, &[2]);
        let r = compare(ComparisonDirection::Lt, None, &[&x, &x]).unwrap();
        assert_eq!(r, s(Pred, &[2]));
        let e = compare(
            ComparisonDirection::Lt,
            Some(ComparisonType::Signed),
            &[&x, &x],
        )
        .unwrap_err();
        assert!(e.message.contains("type=SIGNED"), "{e}");
        assert!(e.message.contains("FLOAT"), "{e}");
        let e = compare(ComparisonDirection::Eq, None, &[&x, &s(F32, &[3])]).unwrap_err();
        assert!(
            e.message
                .contains("compare: operand shapes f32[2] and f32[3]"),
            "{e}"
        );
    }

    #[test]
    fn unary_type_rules() {
        let f = s(F32, &[2]);
        let i = s(S32, &[2]);
        let p = s(Pred, &[2]);
        assert_eq!(unary(UnaryOp::Exp, &[&f]).unwrap(), f);
        assert_eq!(unary(UnaryOp::IsFinite, &[&f]).unwrap(), s(Pred, &[2]));
        assert_eq!(unary(UnaryOp::Not, &[&p]).unwrap(), p);
        assert_eq!(unary(UnaryOp::Not, &[&i]).unwrap(), i);
        assert_eq!(unary(UnaryOp::PopCnt, &[&i]).unwrap(), i);
        assert_eq!(unary(UnaryOp::Negate, &[&i]).unwrap(), i);
        let e = unary(UnaryOp::Exp, &[&i]).unwrap_err();
        assert!(
            e.message.contains(
                "exponential: operand s32[2] has element type s32, expected a floating-point"
            ),
            "{e}"
        );
        assert!(unary(UnaryOp::Not, &[&f]).is_err());
        assert!(unary(UnaryOp::Clz, &[&f]).is_err());
        assert!(unary(UnaryOp::Negate, &[&p]).is_err());
        assert!(unary(UnaryOp::IsFinite, &[&i]).is_err());
    }

    #[test]
    fn select_rules() {
        let x = s(F32, &[2, 3]);
        let p = s(Pred, &[2, 3]);
        let ps = s(Pred, &[]);
        assert_eq!(select(&[&p, &x, &x]).unwrap(), x);
        assert_eq!(select(&[&ps, &x, &x]).unwrap(), x);
        let e = select(&[&s(Pred, &[3, 2]), &x, &x]).unwrap_err();
        assert!(e.message.contains("pred[3,2]"), "{e}");
        let e = select(&[&p, &x, &s(F32, &[2])]).unwrap_err();
        assert!(e.message.contains("f32[2,3] and f32[2] differ"), "{e}");
        let e = select(&[&s(F32, &[2, 3]), &x, &x]).unwrap_err();
        assert!(e.message.contains("element type pred"), "{e}");
    }

    #[test]
    fn clamp_rules() {
        let x = s(F32, &[4]);
        let lo = s(F32, &[]);
        assert_eq!(clamp(&[&lo, &x, &lo]).unwrap(), x);
        assert_eq!(clamp(&[&x, &x, &x]).unwrap(), x);
        let e = clamp(&[&s(F32, &[3]), &x, &lo]).unwrap_err();
        assert!(e.message.contains("f32[3], f32[4] and f32[]"), "{e}");
        let e = clamp(&[&s(S32, &[]), &x, &lo]).unwrap_err();
        assert!(e.message.contains("element types"), "{e}");
    }

    #[test]
    fn convert_and_bitcast_convert() {
        let x = s(F32, &[2, 3]);
        assert!(check_convert(&[&x], &s(S32, &[2, 3])).is_ok());
        let e = check_convert(&[&x], &s(S32, &[3, 2])).unwrap_err();
        assert!(
            e.message.contains("s32[3,2]") && e.message.contains("f32[2,3]"),
            "{e}"
        );
        assert!(check_bitcast_convert(&[&x], &s(U32, &[2, 3])).is_ok());
        assert!(check_bitcast_convert(&[&x], &s(U8, &[2, 3, 4])).is_ok());
        assert!(check_bitcast_convert(&[&s(U16, &[2, 2])], &s(F32, &[2])).is_ok());
        let e = check_bitcast_convert(&[&x], &s(F16, &[2, 3])).unwrap_err();
        assert!(e.message.contains("gives f16[2,3,2]"), "{e}");
        let e = check_bitcast_convert(&[&s(U16, &[2, 3])], &s(F32, &[2])).unwrap_err();
        assert!(e.message.contains("last dimension of size 2"), "{e}");
    }
}
