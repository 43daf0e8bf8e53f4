//! Gradient of a `while` loop with a fixed trip count.
//!
//! The loop must count (`crate::loop_counter`): one state element `i` starts at a constant
//! `c0`, the body adds 1 to it, and the condition is `i < n` (or `i <= n`, `n > i`, `n >= i`)
//! with `n` a constant or a state element that the body passes through unchanged and that
//! starts at a constant. The trip count is then `N = n - c0` (`+1` for `<=`).
//!
//! The gradient runs two new loops:
//! 1. a *tape* loop: the original body, plus one stacked buffer `[N, ...]` per state element
//!    into which each iteration writes the state it started from (dynamic-update-slice at row
//!    `i - c0`);
//! 2. a *reverse* loop of `N` iterations, `j = 0, 1, ...`: it reads the state of iteration
//!    `N-1-j` from the buffers, recomputes that iteration's body from it, and pulls the state
//!    cotangent back through the body (the body's own gradient rules, emitted into the
//!    reverse loop's body).
//!
//! The original loop is left in place for the forward value, so the forward iterations run
//! twice; a later CSE/DCE pass may merge them.

use super::cotangent::{materialize, split, Cot};
use super::emit::{Emitter, R};
use super::inline::inline;
use super::sweep::backprop;
use super::{unsupported, Contributions, Node};
use crate::ir::{
    ArrayShape, ComparisonDirection as Dir, Computation, ComputationId, InstrId, Op, Shape,
};
use crate::loop_counter::{find_counter, Counter};

pub(crate) fn vjp(em: &mut Emitter, node: &Node, ct: Cot) -> R<Contributions> {
    let Op::While { condition, body } = node.instr.op else {
        return Err(unsupported(em, node, "not a while loop"));
    };
    let init = node.operand(0);
    let elems: Vec<ArrayShape> = match &node.instr.shape {
        Shape::Tuple(elems) => elems
            .iter()
            .map(|e| e.as_array().cloned())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                unsupported(
                    em,
                    node,
                    "loop states with nested tuples have no gradient rule",
                )
            })?,
        _ => {
            return Err(unsupported(
                em,
                node,
                "only loops whose state is a tuple have a gradient rule",
            ))
        }
    };
    let counter = find_counter(em.module, em.comp, init, condition, body)
        .map_err(|why| unsupported(em, node, &format!("the trip count is not known: {why}")))?;
    let ct_parts = split(em, ct, elems.len())?;
    if counter.trips <= 0 {
        // The body never runs: the state passes through.
        return Ok(vec![(init, Cot::Tuple(ct_parts))]);
    }
    let buffers = record_states(em, init, &elems, &counter, condition, body)?;
    let ct_init = reverse_loop(em, &elems, &counter, body, &buffers, ct_parts)?;
    Ok(vec![(init, Cot::Tuple(ct_init))])
}

fn stacked(shape: &ArrayShape, n: i64) -> ArrayShape {
    let mut dims = vec![n];
    dims.extend_from_slice(&shape.dims);
    ArrayShape::new(shape.element_type, &dims)
}

fn new_computation(em: &mut Emitter, base: &str) -> ComputationId {
    let name = em.module.unique_name(base);
    em.module.add_computation(Computation::new(name))
}

/// Runs the loop again, saving the state each iteration starts from; returns the buffers.
fn record_states(
    em: &mut Emitter,
    init: InstrId,
    elems: &[ArrayShape],
    counter: &Counter,
    condition: ComputationId,
    body: ComputationId,
) -> R<Vec<InstrId>> {
    let m = elems.len();
    let n = counter.trips;
    let mut parts: Vec<Shape> = elems.iter().map(|e| Shape::Array(e.clone())).collect();
    parts.extend(elems.iter().map(|e| Shape::Array(stacked(e, n))));
    let tape_shape = Shape::Tuple(parts);

    let tape_body = new_computation(em, "grad_tape_body");
    {
        let mut e = em.for_computation(tape_body);
        let p = e.parameter(0, tape_shape.clone());
        let state = (0..m).map(|k| e.gte(p, k)).collect::<R<Vec<_>>>()?;
        let st = e.tuple(&state);
        let r = inline(&mut e, body, &[st])?;
        let mut next = (0..m).map(|k| e.gte(r, k)).collect::<R<Vec<_>>>()?;
        let c0 = e.scalar(counter.ty, counter.start as f64);
        let row = e.sub(state[counter.index], c0)?;
        let zero = e.scalar(counter.ty, 0.0);
        for (k, elem) in elems.iter().enumerate() {
            let buf = e.gte(p, m + k)?;
            let mut dims = vec![1];
            dims.extend_from_slice(&elem.dims);
            let one_row = e.reshape(state[k], &dims)?;
            let mut starts = vec![row];
            starts.extend(std::iter::repeat_n(zero, elem.rank()));
            next.push(e.dynamic_update_slice(buf, one_row, &starts)?);
        }
        let root = e.tuple(&next);
        e.module.computation_mut(tape_body).set_root(root);
    }

    let tape_cond = new_computation(em, "grad_tape_condition");
    {
        let mut e = em.for_computation(tape_cond);
        let p = e.parameter(0, tape_shape);
        let state = (0..m).map(|k| e.gte(p, k)).collect::<R<Vec<_>>>()?;
        let st = e.tuple(&state);
        let root = inline(&mut e, condition, &[st])?;
        e.module.computation_mut(tape_cond).set_root(root);
    }

    let mut start = (0..m).map(|k| em.gte(init, k)).collect::<R<Vec<_>>>()?;
    for elem in elems {
        start.push(em.full(&stacked(elem, n), 0.0));
    }
    let tape_init = em.tuple(&start);
    let tape = em.while_loop(tape_init, tape_cond, tape_body);
    (0..m).map(|k| em.gte(tape, m + k)).collect()
}

/// The reverse loop; returns the cotangent of each element of the initial state.
fn reverse_loop(
    em: &mut Emitter,
    elems: &[ArrayShape],
    counter: &Counter,
    body: ComputationId,
    buffers: &[InstrId],
    ct_out: Vec<Cot>,
) -> R<Vec<Cot>> {
    let m = elems.len();
    let n = counter.trips;
    let ty = counter.ty;
    // Positions of the float elements among the carried cotangents.
    let float: Vec<usize> = (0..m)
        .filter(|&k| elems[k].element_type.is_float())
        .collect();
    let nf = float.len();
    let mut parts = vec![Shape::scalar(ty)];
    parts.extend(float.iter().map(|&k| Shape::Array(elems[k].clone())));
    parts.extend(elems.iter().map(|e| Shape::Array(stacked(e, n))));
    let rev_shape = Shape::Tuple(parts);

    let rev_body = new_computation(em, "grad_reverse_body");
    {
        let mut e = em.for_computation(rev_body);
        let q = e.parameter(0, rev_shape.clone());
        let j = e.gte(q, 0)?;
        let last = e.scalar(ty, (n - 1) as f64);
        let row = e.sub(last, j)?;
        let zero = e.scalar(ty, 0.0);
        let mut state = Vec::with_capacity(m);
        let mut bufs = Vec::with_capacity(m);
        for (k, elem) in elems.iter().enumerate() {
            let buf = e.gte(q, 1 + nf + k)?;
            let mut sizes = vec![1];
            sizes.extend_from_slice(&elem.dims);
            let mut starts = vec![row];
            starts.extend(std::iter::repeat_n(zero, elem.rank()));
            let one_row = e.dynamic_slice(buf, &starts, &sizes)?;
            state.push(e.reshape(one_row, &elem.dims)?);
            bufs.push(buf);
        }
        let st = e.tuple(&state);
        let r = inline(&mut e, body, &[st])?;
        let mut seed = vec![Cot::Zero; m];
        for (p, &k) in float.iter().enumerate() {
            seed[k] = Cot::Value(e.gte(q, 1 + p)?);
        }
        let cts = backprop(&mut e, vec![(r, Cot::Tuple(seed))], &[st])?;
        let ct_state = split(&mut e, cts.into_iter().next().unwrap_or(Cot::Zero), m)?;
        let one = e.scalar(ty, 1.0);
        let mut next = vec![e.add(j, one)?];
        for &k in &float {
            let c = ct_state[k].clone();
            next.push(materialize(&mut e, c, &Shape::Array(elems[k].clone()))?);
        }
        next.extend(bufs);
        let root = e.tuple(&next);
        e.module.computation_mut(rev_body).set_root(root);
    }

    let rev_cond = new_computation(em, "grad_reverse_condition");
    {
        let mut e = em.for_computation(rev_cond);
        let q = e.parameter(0, rev_shape);
        let j = e.gte(q, 0)?;
        let limit = e.scalar(ty, n as f64);
        let root = e.compare(Dir::Lt, j, limit)?;
        e.module.computation_mut(rev_cond).set_root(root);
    }

    let mut start = vec![em.scalar(ty, 0.0)];
    for &k in &float {
        let c = ct_out[k].clone();
        start.push(materialize(em, c, &Shape::Array(elems[k].clone()))?);
    }
    start.extend_from_slice(buffers);
    let rev_init = em.tuple(&start);
    let rev = em.while_loop(rev_init, rev_cond, rev_body);
    let mut ct_init = vec![Cot::Zero; m];
    for (p, &k) in float.iter().enumerate() {
        ct_init[k] = Cot::Value(em.gte(rev, 1 + p)?);
    }
    Ok(ct_init)
}
