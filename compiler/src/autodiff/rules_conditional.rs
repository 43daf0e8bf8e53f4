//! Gradient of `conditional`: a conditional with the same selector whose branch `k` runs the
//! gradient of the forward branch `k`.
//!
//! Backward branch `k` takes `(operand k, cotangent of the result)`, recomputes forward
//! branch `k` from its operand, pulls the cotangent back through it, and returns the
//! cotangents of all branch operands (zeros for the other branches' operands, since all
//! branches must return the same shape). The selector gets no gradient.

use super::cotangent::{materialize, Cot};
use super::emit::{Emitter, R};
use super::inline::inline;
use super::sweep::backprop;
use super::{unsupported, Contributions, Node};
use crate::ir::{Computation, ComputationId, Op, Shape};

pub(crate) fn vjp(em: &mut Emitter, node: &Node, ct: Cot) -> R<Contributions> {
    let Op::Conditional { branches } = &node.instr.op else {
        return Err(unsupported(em, node, "not a conditional"));
    };
    let operands = &node.instr.operands()[1..];
    if operands.len() != branches.len() {
        return Err(unsupported(
            em,
            node,
            "a conditional needs one operand per branch",
        ));
    }
    let out_shape = node.instr.shape.clone();
    let g = materialize(em, ct, &out_shape)?;
    let operand_shapes: Vec<Shape> = operands.iter().map(|&o| em.shape(o).clone()).collect();
    let result_shape = Shape::Tuple(operand_shapes.clone());

    let mut backward = Vec::with_capacity(branches.len());
    let mut args = vec![node.operand(0)];
    for (k, (&branch, &operand)) in branches.iter().zip(operands).enumerate() {
        let id = backward_branch(em, branch, k, &operand_shapes, &out_shape, &result_shape)?;
        backward.push(id);
        args.push(em.tuple(&[operand, g]));
    }
    let cond = em.raw(Op::Conditional { branches: backward }, result_shape, &args);
    let mut out = Contributions::new();
    for (k, &operand) in operands.iter().enumerate() {
        if node.wants(k + 1) {
            out.push((operand, Cot::Value(em.gte(cond, k)?)));
        }
    }
    Ok(out)
}

fn backward_branch(
    em: &mut Emitter,
    branch: ComputationId,
    k: usize,
    operand_shapes: &[Shape],
    out_shape: &Shape,
    result_shape: &Shape,
) -> R<ComputationId> {
    let name = em.module.unique_name("grad_branch");
    let id = em.module.add_computation(Computation::new(name));
    let mut e = em.for_computation(id);
    let param_shape = Shape::Tuple(vec![operand_shapes[k].clone(), out_shape.clone()]);
    let q = e.parameter(0, param_shape);
    let x = e.gte(q, 0)?;
    let g = e.gte(q, 1)?;
    let r = inline(&mut e, branch, &[x])?;
    let cts = backprop(&mut e, vec![(r, Cot::Value(g))], &[x])?;
    let mut parts = Vec::with_capacity(operand_shapes.len());
    for (j, shape) in operand_shapes.iter().enumerate() {
        let c = if j == k {
            cts.first().cloned().unwrap_or(Cot::Zero)
        } else {
            Cot::Zero
        };
        parts.push(materialize(&mut e, c, shape)?);
    }
    let root = e.tuple(&parts);
    debug_assert_eq!(e.shape(root), result_shape);
    e.module.computation_mut(id).set_root(root);
    Ok(id)
}
