//! Finite-difference checks through calls, tuples and counted while loops.

use super::{check, check_with, random_inputs, Case};
use crate::autodiff::emit::Emitter;
use crate::ir::{
    ComparisonDirection, Computation, ComputationId, ElementType, InstrId, Metadata, Op, Shape,
    UnaryOp,
};

/// Adds an empty computation and returns an emitter on it.
fn computation<'c>(c: &'c mut Case, name: &str) -> (ComputationId, Emitter<'c>) {
    let name = c.module.unique_name(name);
    let id = c.module.add_computation(Computation::new(name));
    (
        id,
        Emitter {
            module: &mut c.module,
            comp: id,
            metadata: Metadata::default(),
            scalars: &mut c.scalars,
        },
    )
}

/// `for i in start..limit { state = body(i, state) }` as a while loop whose state is
/// `(i, state...)`; returns the final state elements (without the counter).
fn fori_loop(
    c: &mut Case,
    comp: ComputationId,
    start: i32,
    limit: i32,
    init: &[InstrId],
    body: impl FnOnce(&mut Emitter, InstrId, Vec<InstrId>) -> Vec<InstrId>,
) -> Vec<InstrId> {
    let mut shapes = vec![Shape::scalar(ElementType::S32)];
    for &x in init {
        shapes.push(c.module.computation(comp).get(x).shape.clone());
    }
    let state = Shape::Tuple(shapes.clone());
    let n = init.len();
    let (body_id, mut e) = computation(c, "body");
    let p = e.parameter(0, state.clone());
    let i = e.gte(p, 0).unwrap();
    let elems: Vec<InstrId> = (1..=n).map(|k| e.gte(p, k).unwrap()).collect();
    let next = body(&mut e, i, elems);
    let one = e.scalar(ElementType::S32, 1.0);
    let i1 = e.add(i, one).unwrap();
    let mut parts = vec![i1];
    parts.extend(next);
    let root = e.tuple(&parts);
    e.module.computation_mut(body_id).set_root(root);

    let (cond_id, mut e) = computation(c, "cond");
    let p = e.parameter(0, state);
    let i = e.gte(p, 0).unwrap();
    let lim = e.scalar(ElementType::S32, limit as f64);
    let root = e.compare(ComparisonDirection::Lt, i, lim).unwrap();
    e.module.computation_mut(cond_id).set_root(root);

    let mut em = Emitter {
        module: &mut c.module,
        comp,
        metadata: Metadata::default(),
        scalars: &mut c.scalars,
    };
    let i0 = em.scalar(ElementType::S32, start as f64);
    let mut parts = vec![i0];
    parts.extend_from_slice(init);
    let t = em.tuple(&parts);
    let w = em.while_loop(t, cond_id, body_id);
    (1..=n).map(|k| em.gte(w, k).unwrap()).collect()
}

/// `0.5 x + sin(x)` as a computation to call.
fn half_plus_sine(c: &mut Case, dims: &[i64]) -> ComputationId {
    let (id, mut e) = computation(c, "half_plus_sine");
    let x = e.parameter(0, Shape::array(ElementType::F32, dims));
    let h = e.mul_const(x, 0.5).unwrap();
    let s = e.unary(UnaryOp::Sine, x).unwrap();
    let root = e.add(h, s).unwrap();
    e.module.computation_mut(id).set_root(root);
    id
}

#[test]
fn call_with_a_repeated_operand_and_a_tuple_result() {
    let mut c = Case::new();
    let (callee, mut e) = computation(&mut c, "pair");
    let a = e.parameter(0, Shape::array(ElementType::F32, &[3]));
    let b = e.parameter(1, Shape::array(ElementType::F32, &[3]));
    let ab = e.mul(a, b).unwrap();
    let ea = e.unary(UnaryOp::Exp, a).unwrap();
    let root = e.tuple(&[ab, ea]);
    e.module.computation_mut(callee).set_root(root);
    let x = c.param(&[3]);
    let tuple_shape = Shape::Tuple(vec![Shape::array(ElementType::F32, &[3]); 2]);
    let call = c
        .em()
        .raw(Op::Call { to_apply: callee }, tuple_shape, &[x, x]);
    let mut em = c.em();
    let first = em.gte(call, 0).unwrap();
    let second = em.gte(call, 1).unwrap();
    let y = em.add(first, second).unwrap();
    check(&c.finish(y), 1, -1.0, 1.0);
}

#[test]
fn fori_loop_of_a_call_like_the_corpus() {
    let mut c = Case::new();
    let x = c.param(&[4]);
    let f = half_plus_sine(&mut c, &[4]);
    let entry = c.module.entry;
    let out = fori_loop(&mut c, entry, 0, 5, &[x], |e, _, s| {
        let shape = e.shape(s[0]).clone();
        vec![e.raw(Op::Call { to_apply: f }, shape, &[s[0]])]
    });
    check(&c.finish(out[0]), 2, -1.0, 1.0);
}

#[test]
fn loop_reading_loop_invariant_weights_by_the_counter() {
    // for i in 2..6: h = tanh(h * w[i - 2] + b); the counter starts at 2.
    let mut c = Case::new();
    let h0 = c.param(&[3]);
    let w = c.param(&[4, 3]);
    let b = c.param(&[3]);
    let entry = c.module.entry;
    let out = fori_loop(&mut c, entry, 2, 6, &[h0, w, b], |e, i, s| {
        let two = e.scalar(ElementType::S32, 2.0);
        let row = e.sub(i, two).unwrap();
        let zero = e.scalar(ElementType::S32, 0.0);
        let wi = e.dynamic_slice(s[1], &[row, zero], &[1, 3]).unwrap();
        let wi = e.reshape(wi, &[3]).unwrap();
        let hw = e.mul(s[0], wi).unwrap();
        let pre = e.add(hw, s[2]).unwrap();
        let h = e.unary(UnaryOp::Tanh, pre).unwrap();
        vec![h, s[1], s[2]]
    });
    let mut em = c.em();
    let y = em.add(out[0], out[2]).unwrap();
    check(&c.finish(y), 3, -1.0, 1.0);
}

#[test]
fn loop_with_its_limit_in_the_state() {
    let mut c = Case::new();
    let x = c.param(&[2]);
    let n = c.em().scalar(ElementType::S32, 3.0);
    // state (i, n, x), condition i < n where n passes through the body
    let mut shapes = vec![Shape::scalar(ElementType::S32); 2];
    shapes.push(Shape::array(ElementType::F32, &[2]));
    let state = Shape::Tuple(shapes);
    let (body_id, mut e) = computation(&mut c, "body");
    let p = e.parameter(0, state.clone());
    let i = e.gte(p, 0).unwrap();
    let lim = e.gte(p, 1).unwrap();
    let v = e.gte(p, 2).unwrap();
    let one = e.scalar(ElementType::S32, 1.0);
    let i1 = e.add(one, i).unwrap();
    let vv = e.mul(v, v).unwrap();
    let v1 = e.mul_const(vv, 0.7).unwrap();
    let root = e.tuple(&[i1, lim, v1]);
    e.module.computation_mut(body_id).set_root(root);
    let (cond_id, mut e) = computation(&mut c, "cond");
    let p = e.parameter(0, state);
    let i = e.gte(p, 0).unwrap();
    let lim = e.gte(p, 1).unwrap();
    let root = e.compare(ComparisonDirection::Gt, lim, i).unwrap();
    e.module.computation_mut(cond_id).set_root(root);
    let mut em = c.em();
    let zero = em.scalar(ElementType::S32, 0.0);
    let t = em.tuple(&[zero, n, x]);
    let w = em.while_loop(t, cond_id, body_id);
    let y = em.gte(w, 2).unwrap();
    check(&c.finish(y), 4, 0.3, 1.2);
}

#[test]
fn nested_loops() {
    let mut c = Case::new();
    let x = c.param(&[2]);
    let f = half_plus_sine(&mut c, &[2]);
    let (inner_id, mut e) = computation(&mut c, "inner");
    let v = e.parameter(0, Shape::array(ElementType::F32, &[2]));
    let out = fori_loop(&mut c, inner_id, 0, 3, &[v], |e, _, s| {
        let shape = e.shape(s[0]).clone();
        vec![e.raw(Op::Call { to_apply: f }, shape, &[s[0]])]
    });
    c.module.computation_mut(inner_id).set_root(out[0]);
    let entry = c.module.entry;
    let out = fori_loop(&mut c, entry, 0, 2, &[x], |e, _, s| {
        let shape = e.shape(s[0]).clone();
        let r = e.raw(Op::Call { to_apply: inner_id }, shape, &[s[0]]);
        vec![e.mul_const(r, 0.9).unwrap()]
    });
    check(&c.finish(out[0]), 5, -1.0, 1.0);
}

#[test]
fn loop_that_never_runs_passes_the_gradient_through() {
    let mut c = Case::new();
    let x = c.param(&[3]);
    let entry = c.module.entry;
    let out = fori_loop(&mut c, entry, 4, 4, &[x], |e, _, s| {
        vec![e.unary(UnaryOp::Exp, s[0]).unwrap()]
    });
    let y = c.em().mul(out[0], out[0]).unwrap();
    let m = c.finish(y);
    let inputs = random_inputs(&m, 6, -1.0, 1.0);
    check_with(&m, &[0], &inputs);
}

#[test]
fn tuple_root_differentiates_element_zero() {
    let mut c = Case::new();
    let x = c.param(&[2]);
    let mut em = c.em();
    let s = em.mul(x, x).unwrap();
    let loss = em.sum_all(s).unwrap();
    let other = em.unary(UnaryOp::Exp, x).unwrap();
    let root = em.tuple(&[loss, other]);
    c.module.entry_mut().set_root(root);
    let g = super::super::grad_module(&c.module, &[0]).unwrap();
    let (_, result) = g.entry_signature();
    assert_eq!(
        result,
        Shape::Tuple(vec![
            Shape::scalar(ElementType::F32),
            Shape::array(ElementType::F32, &[2])
        ])
    );
    let inputs = random_inputs(&c.module, 7, -1.0, 1.0);
    let out = crate::interpreter::evaluate(&g, &inputs).unwrap();
    let xs = inputs[0].as_array().unwrap();
    let gx = out.as_tuple().unwrap()[1].as_array().unwrap();
    for i in 0..2 {
        assert!((gx.data.get_f64(i) - 2.0 * xs.data.get_f64(i)).abs() < 1e-6);
    }
}

/// A branch computation `x -> f(x)` over f32[3].
fn branch(
    c: &mut Case,
    name: &str,
    f: impl FnOnce(&mut Emitter, InstrId) -> InstrId,
) -> ComputationId {
    let (id, mut e) = computation(c, name);
    let x = e.parameter(0, Shape::array(ElementType::F32, &[3]));
    let root = f(&mut e, x);
    e.module.computation_mut(id).set_root(root);
    id
}

#[test]
fn conditional_on_a_predicate_and_on_an_index() {
    for (selector_true, seed) in [(true, 8u64), (false, 9)] {
        let mut c = Case::new();
        let a = c.param(&[3]);
        let b = c.param(&[3]);
        let sin = branch(&mut c, "on_true", |e, x| e.unary(UnaryOp::Sine, x).unwrap());
        let sq = branch(&mut c, "on_false", |e, x| e.mul(x, x).unwrap());
        let mut em = c.em();
        let p = em.scalar(ElementType::Pred, if selector_true { 1.0 } else { 0.0 });
        let ab = em.mul(a, b).unwrap();
        let r = em.raw(
            Op::Conditional {
                branches: vec![sin, sq],
            },
            Shape::array(ElementType::F32, &[3]),
            &[p, ab, b],
        );
        check(&c.finish(r), seed, -1.0, 1.0);
    }
    for index in [0, 2, 7] {
        let mut c = Case::new();
        let x = c.param(&[3]);
        let k = c.param_of(ElementType::S32, &[]);
        let b0 = branch(&mut c, "b0", |e, x| e.unary(UnaryOp::Exp, x).unwrap());
        let b1 = branch(&mut c, "b1", |e, x| e.unary(UnaryOp::Tanh, x).unwrap());
        let b2 = branch(&mut c, "b2", |e, x| e.mul_const(x, 3.0).unwrap());
        let mut em = c.em();
        let y = em.unary(UnaryOp::Cosine, x).unwrap();
        let r = em.raw(
            Op::Conditional {
                branches: vec![b0, b1, b2],
            },
            Shape::array(ElementType::F32, &[3]),
            &[k, x, y, x],
        );
        let m = c.finish(r);
        let mut inputs = random_inputs(&m, 10 + index as u64, -1.0, 1.0);
        inputs[1] = crate::ir::Literal::Array(crate::ir::Array::scalar_s32(index));
        check_with(&m, &[0], &inputs);
    }
}
