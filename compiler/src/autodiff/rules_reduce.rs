//! Gradients of reductions: `reduce` with an add, max or min region, and `all-reduce` sums.

use super::cotangent::Cot;
use super::emit::{Emitter, R};
use super::{non_differentiable, unsupported, Contributions, Node};
use crate::ir::{BinaryOp, ComparisonDirection, ComputationId, InstrId, Module, Op};

/// What a reduction region computes from its two scalar parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reducer {
    Add,
    Max,
    Min,
    Other,
}

/// Recognizes `(a, b) -> a + b` (and max, min) in either operand order.
pub(crate) fn classify(module: &Module, comp: ComputationId) -> Reducer {
    let c = module.computation(comp);
    let params = c.parameters();
    if params.len() != 2 || !c.has_root() {
        return Reducer::Other;
    }
    let root = c.get(c.root());
    let ops = root.operands();
    if ops.len() != 2
        || !((ops[0] == params[0] && ops[1] == params[1])
            || (ops[0] == params[1] && ops[1] == params[0]))
    {
        return Reducer::Other;
    }
    match root.op {
        Op::Binary(BinaryOp::Add) => Reducer::Add,
        Op::Binary(BinaryOp::Maximum) => Reducer::Max,
        Op::Binary(BinaryOp::Minimum) => Reducer::Min,
        _ => Reducer::Other,
    }
}

pub(crate) fn vjp(em: &mut Emitter, node: &Node, ct: Cot) -> R<Contributions> {
    match &node.instr.op {
        Op::Reduce {
            dimensions,
            to_apply,
        } => {
            if node.instr.operands().len() != 2 {
                return Err(unsupported(
                    em,
                    node,
                    "a reduce of several arrays at once (argmax-like) has no gradient rule",
                ));
            }
            let Cot::Value(g) = ct else {
                return Ok(vec![]);
            };
            reduce(em, node, g, dimensions, *to_apply)
        }
        Op::AllReduce {
            collective,
            to_apply,
        } => {
            if classify(em.module, *to_apply) != Reducer::Add || node.instr.operands().len() != 1 {
                return Err(unsupported(
                    em,
                    node,
                    "only all-reduce sums of one array have a gradient rule",
                ));
            }
            let Cot::Value(g) = ct else {
                return Ok(vec![]);
            };
            // The transpose of a sum over replicas is the same sum of the cotangents.
            let shape = em.shape(g).clone();
            let summed = em.raw(
                Op::AllReduce {
                    collective: collective.clone(),
                    to_apply: *to_apply,
                },
                shape,
                &[g],
            );
            Ok(node.to_operand(0, summed))
        }
        _ => Err(non_differentiable(em, node)),
    }
}

fn reduce(
    em: &mut Emitter,
    node: &Node,
    g: InstrId,
    dimensions: &[i64],
    to_apply: ComputationId,
) -> R<Contributions> {
    let x = node.operand(0);
    let xs = em.dims(x)?;
    let kept: Vec<i64> = (0..xs.len() as i64)
        .filter(|d| !dimensions.contains(d))
        .collect();
    let mut out = Contributions::new();
    match classify(em.module, to_apply) {
        Reducer::Add => {
            if node.wants(0) {
                out.extend(node.to_operand(0, em.broadcast(g, &xs, &kept)?));
            }
            if node.wants(1) {
                // The init value is added once into every output element.
                out.extend(node.to_operand(1, em.sum_all(g)?));
            }
        }
        Reducer::Max | Reducer::Min => {
            if node.wants(1) {
                return Err(unsupported(
                    em,
                    node,
                    "the init value of a max/min reduction must not depend on the differentiated parameters",
                ));
            }
            if node.wants(0) {
                // As JAX: the gradient is shared equally by the elements equal to the result.
                let ty = em.element_type(x)?;
                let y = em.broadcast(node.id, &xs, &kept)?;
                let hit = em.compare(ComparisonDirection::Eq, x, y)?;
                let indicator = em.convert(hit, ty)?;
                let counts = em.reduce_sum(indicator, dimensions)?;
                let share = em.div(g, counts)?;
                let spread = em.broadcast(share, &xs, &kept)?;
                out.extend(node.to_operand(0, em.mul(spread, indicator)?));
            }
        }
        Reducer::Other => {
            return Err(unsupported(
                em,
                node,
                "only reductions whose region is add, maximum or minimum have a gradient rule",
            ))
        }
    }
    Ok(out)
}
