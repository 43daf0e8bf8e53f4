//! What autodiff refuses, and how it says so.

use super::Case;
use crate::autodiff::{grad_module, gradients};
use crate::ir::{
    ComparisonDirection, Computation, ElementType, Metadata, Op, Shape, SourceLocation, UnaryOp,
};

#[test]
fn a_non_differentiable_op_on_the_path_is_named_with_its_source_line() {
    let mut c = Case::new();
    let x = c.param(&[3]);
    let mut em = c.em();
    em.metadata = Metadata {
        source: Some(SourceLocation {
            file: "model.py".into(),
            line: 42,
            column: 0,
        }),
        ..Metadata::default()
    };
    let cc = em.raw(
        Op::CustomCall {
            target: "mystery".into(),
            has_side_effect: false,
            backend_config: None,
            called: vec![],
        },
        Shape::array(ElementType::F32, &[3]),
        &[x],
    );
    em.metadata = Metadata::default();
    let y = em.unary(UnaryOp::Exp, cc).unwrap();
    let m = c.finish(y);
    let e = grad_module(&m, &[0]).unwrap_err();
    assert!(e.message.contains("custom-call"), "{}", e.message);
    assert!(e.message.contains("model.py:42"), "{}", e.message);
    assert!(e.instruction.is_some());
}

#[test]
fn a_non_differentiable_op_off_the_path_is_fine() {
    let mut c = Case::new();
    let x = c.param(&[3]);
    let k = c.param(&[3]);
    let mut em = c.em();
    let cc = em.raw(
        Op::CustomCall {
            target: "mystery".into(),
            has_side_effect: false,
            backend_config: None,
            called: vec![],
        },
        Shape::array(ElementType::F32, &[3]),
        &[k],
    );
    let y = em.mul(cc, x).unwrap();
    let m = c.finish(y);
    grad_module(&m, &[0]).unwrap();
    assert!(grad_module(&m, &[1]).is_err());
}

#[test]
fn a_loop_without_a_known_trip_count_is_refused() {
    let mut c = Case::new();
    let x = c.param(&[]);
    let state = Shape::Tuple(vec![Shape::scalar(ElementType::F32)]);
    let body = c.module.add_computation(Computation::new("body"));
    let cond = c.module.add_computation(Computation::new("cond"));
    {
        let mut e = c.em();
        e.comp = body;
        let p = e.parameter(0, state.clone());
        let v = e.gte(p, 0).unwrap();
        let v2 = e.mul_const(v, 2.0).unwrap();
        let r = e.tuple(&[v2]);
        e.module.computation_mut(body).set_root(r);
        e.comp = cond;
        let p = e.parameter(0, state);
        let v = e.gte(p, 0).unwrap();
        let lim = e.scalar(ElementType::F32, 100.0);
        let r = e.compare(ComparisonDirection::Lt, v, lim).unwrap();
        e.module.computation_mut(cond).set_root(r);
    }
    let mut em = c.em();
    let t = em.tuple(&[x]);
    let w = em.while_loop(t, cond, body);
    let y = em.gte(w, 0).unwrap();
    let m = c.finish(y);
    let e = grad_module(&m, &[0]).unwrap_err();
    assert!(e.message.contains("trip count"), "{}", e.message);
}

#[test]
fn bad_requests_are_errors() {
    let mut c = Case::new();
    let x = c.param(&[3]);
    let m = c.finish(x);
    assert!(grad_module(&m, &[5])
        .unwrap_err()
        .message
        .contains("no parameter 5"));

    // A non-scalar loss.
    let mut c = Case::new();
    let x = c.param(&[3]);
    let y = c.em().unary(UnaryOp::Exp, x).unwrap();
    c.module.entry_mut().set_root(y);
    let entry = c.module.entry;
    let mut m = c.module;
    let e = gradients(&mut m, entry, y, &[x]).unwrap_err();
    assert!(e.message.contains("float scalar"), "{}", e.message);
}

#[test]
fn gradients_leaves_the_forward_instructions_alone() {
    let mut c = Case::new();
    let x = c.param(&[3]);
    let m = c.finish(x);
    let mut m2 = m.clone();
    let entry = m2.entry;
    let loss = m2.entry().root();
    let before: Vec<_> = m2.entry().ids().to_vec();
    let g = gradients(&mut m2, entry, loss, &[x, x]).unwrap();
    assert_eq!(g.len(), 2);
    for id in before {
        assert_eq!(m2.entry().get(id), m.entry().get(id));
    }
}
