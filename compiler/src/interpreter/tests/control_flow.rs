//! while, conditional, call, fusion, tuples, custom calls and argument checks.

use super::*;
use crate::ir::ComparisonDirection;

/// `while (i < 5) { i += 1; x *= 2 }` on the state `(i, x)`.
#[test]
fn while_loop_runs_until_the_condition_fails() {
    let mut b = ModuleBuilder::new();
    let s = ElementType::S32;
    let f = ElementType::F32;
    let state = Shape::Tuple(vec![Shape::scalar(s), Shape::array(f, &[2])]);
    let st = state.clone();
    let cond = b.computation("cond", move |b| {
        let p = b.param(0, st);
        let i = b.op(Op::GetTupleElement { index: 0 }, Shape::scalar(s), &[p]);
        let five = b.constant(Array::scalar_s32(5));
        b.op(
            Op::Compare {
                direction: ComparisonDirection::Lt,
                comparison_type: None,
            },
            Shape::scalar(ElementType::Pred),
            &[i, five],
        )
    });
    let st = state.clone();
    let body = b.computation("body", move |b| {
        let p = b.param(0, st.clone());
        let i = b.op(Op::GetTupleElement { index: 0 }, Shape::scalar(s), &[p]);
        let x = b.op(
            Op::GetTupleElement { index: 1 },
            Shape::array(f, &[2]),
            &[p],
        );
        let one = b.constant(Array::scalar_s32(1));
        let i2 = b.op(Op::Binary(BinaryOp::Add), Shape::scalar(s), &[i, one]);
        let x2 = b.op(Op::Binary(BinaryOp::Add), Shape::array(f, &[2]), &[x, x]);
        b.op(Op::Tuple, st, &[i2, x2])
    });
    let i0 = b.param(0, Shape::scalar(s));
    let x0 = b.param(1, Shape::array(f, &[2]));
    let init = b.op(Op::Tuple, state.clone(), &[i0, x0]);
    let w = b.op(
        Op::While {
            condition: cond,
            body,
        },
        state,
        &[init],
    );
    let m = b.finish(w);
    let out = run(&m, &[Array::scalar_s32(2), f32s(&[2], &[1.0, -0.5])]);
    let leaves = out.leaves();
    assert_eq!(leaves[0].data, ArrayData::S32(vec![5]));
    assert_eq!(leaves[1].data, ArrayData::F32(vec![8.0, -4.0]));
}

fn conditional_module(selector: Shape) -> Module {
    let mut b = ModuleBuilder::new();
    let f = ElementType::F32;
    let neg = b.computation("neg", |b| {
        let p = b.param(0, Shape::scalar(f));
        b.op(
            Op::Unary(crate::ir::UnaryOp::Negate),
            Shape::scalar(f),
            &[p],
        )
    });
    let double = b.computation("double", |b| {
        let p = b.param(0, Shape::scalar(f));
        b.op(Op::Binary(BinaryOp::Add), Shape::scalar(f), &[p, p])
    });
    let sel = b.param(0, selector);
    let x = b.param(1, Shape::scalar(f));
    let c = b.op(
        Op::Conditional {
            branches: vec![neg, double],
        },
        Shape::scalar(f),
        &[sel, x, x],
    );
    b.finish(c)
}

#[test]
fn conditional_by_pred_and_by_index() {
    let m = conditional_module(Shape::scalar(ElementType::Pred));
    let t = Array::new(
        ArrayShape::scalar(ElementType::Pred),
        ArrayData::Pred(vec![true]),
    );
    let fl = Array::new(
        ArrayShape::scalar(ElementType::Pred),
        ArrayData::Pred(vec![false]),
    );
    assert_eq!(
        as_f32(&run_array(&m, &[t, Array::scalar_f32(3.0)])),
        &[-3.0]
    );
    assert_eq!(
        as_f32(&run_array(&m, &[fl, Array::scalar_f32(3.0)])),
        &[6.0]
    );
    let m = conditional_module(Shape::scalar(ElementType::S32));
    assert_eq!(
        as_f32(&run_array(
            &m,
            &[Array::scalar_s32(0), Array::scalar_f32(3.0)]
        )),
        &[-3.0]
    );
    // Out of range selects the last branch.
    assert_eq!(
        as_f32(&run_array(
            &m,
            &[Array::scalar_s32(7), Array::scalar_f32(3.0)]
        )),
        &[6.0]
    );
    assert_eq!(
        as_f32(&run_array(
            &m,
            &[Array::scalar_s32(-1), Array::scalar_f32(3.0)]
        )),
        &[6.0]
    );
}

#[test]
fn call_and_fusion_evaluate_their_computation() {
    let mut b = ModuleBuilder::new();
    let f = ElementType::F32;
    let mul = b.binary_computation(BinaryOp::Multiply, f);
    let x = b.param(0, Shape::scalar(f));
    let y = b.param(1, Shape::scalar(f));
    let c = b.op(Op::Call { to_apply: mul }, Shape::scalar(f), &[x, y]);
    let fu = b.op(
        Op::Fusion {
            kind: "kLoop".into(),
            calls: mul,
        },
        Shape::scalar(f),
        &[c, y],
    );
    let m = b.finish(fu);
    assert_eq!(
        as_f32(&run_array(
            &m,
            &[Array::scalar_f32(2.0), Array::scalar_f32(5.0)]
        )),
        &[50.0]
    );
}

#[test]
fn unknown_custom_call_names_its_target() {
    let mut b = ModuleBuilder::new();
    let x = b.param(0, Shape::scalar(ElementType::F32));
    let c = b.op(
        Op::CustomCall {
            target: "my_kernel".into(),
            has_side_effect: false,
            backend_config: None,
            called: vec![],
        },
        Shape::scalar(ElementType::F32),
        &[x],
    );
    let m = b.finish(c);
    let e = evaluate(&m, &[Literal::Array(Array::scalar_f32(1.0))]).unwrap_err();
    assert!(e.message.contains("\"my_kernel\""), "{e}");
    assert_eq!(e.instruction.as_deref(), Some("custom-call.2"));
}

#[test]
fn shard_map_markers_pass_values_through_when_shapes_agree() {
    let mut b = ModuleBuilder::new();
    let s = Shape::array(ElementType::F32, &[2]);
    let x = b.param(0, s.clone());
    let c = b.op(
        Op::CustomCall {
            target: "xla.sdy.GlobalToLocalShape".into(),
            has_side_effect: true,
            backend_config: None,
            called: vec![],
        },
        Shape::Tuple(vec![s.clone()]),
        &[x],
    );
    let m = b.finish(c);
    let out = run(&m, &[f32s(&[2], &[1., 2.])]);
    assert_eq!(
        out,
        Literal::Tuple(vec![Literal::Array(f32s(&[2], &[1., 2.]))])
    );
}

#[test]
fn arguments_are_checked_against_parameters() {
    let mut b = ModuleBuilder::new();
    let x = b.param(0, Shape::array(ElementType::F32, &[2]));
    let m = b.finish(x);
    let e = evaluate(&m, &[Literal::Array(s32s(&[2], &[1, 2]))]).unwrap_err();
    assert!(
        e.message.contains("f32[2]") && e.message.contains("s32[2]"),
        "{e}"
    );
    let e = evaluate(&m, &[]).unwrap_err();
    assert!(e.message.contains("takes 1 arguments, 0 given"), "{e}");
}

#[test]
fn dead_code_is_not_evaluated() {
    let mut b = ModuleBuilder::new();
    let x = b.param(0, Shape::scalar(ElementType::F32));
    // An instruction nothing uses, which would fail if it ran.
    b.op(
        Op::CustomCall {
            target: "never_run".into(),
            has_side_effect: false,
            backend_config: None,
            called: vec![],
        },
        Shape::scalar(ElementType::F32),
        &[x],
    );
    let neg = b.op(
        Op::Unary(crate::ir::UnaryOp::Negate),
        Shape::scalar(ElementType::F32),
        &[x],
    );
    let m = b.finish(neg);
    assert_eq!(as_f32(&run_array(&m, &[Array::scalar_f32(2.0)])), &[-2.0]);
}

#[test]
fn evaluate_computation_runs_a_called_computation() {
    let mut b = ModuleBuilder::new();
    let mul = b.binary_computation(BinaryOp::Multiply, ElementType::F32);
    let x = b.param(0, Shape::scalar(ElementType::F32));
    let m = b.finish(x);
    let args = [
        Literal::Array(Array::scalar_f32(3.0)),
        Literal::Array(Array::scalar_f32(4.0)),
    ];
    let r = super::super::evaluate_computation(&m, mul, &args).unwrap();
    assert_eq!(r, Literal::Array(Array::scalar_f32(12.0)));
    let e = super::super::evaluate_computation(&m, ComputationId(9), &args).unwrap_err();
    assert!(e.message.contains("does not exist"), "{e}");
}
