//! Gradients through tuples, `get-tuple-element` and `call`.

use super::cotangent::{split, Cot};
use super::emit::{Emitter, R};
use super::inline::inline;
use super::sweep::backprop;
use super::{non_differentiable, Contributions, Node};
use crate::ir::Op;

pub(crate) fn vjp(em: &mut Emitter, node: &Node, ct: Cot) -> R<Contributions> {
    match &node.instr.op {
        Op::Tuple => {
            let parts = split(em, ct, node.instr.operands().len())?;
            Ok(parts
                .into_iter()
                .enumerate()
                .filter(|(i, c)| node.wants(*i) && !c.is_zero())
                .map(|(i, c)| (node.operand(i), c))
                .collect())
        }
        Op::GetTupleElement { index } => {
            let n = em.shape(node.operand(0)).as_tuple().map_or(0, |t| t.len());
            let mut parts = vec![Cot::Zero; n];
            if (*index as usize) < n {
                parts[*index as usize] = ct;
            }
            Ok(vec![(node.operand(0), Cot::Tuple(parts))])
        }
        Op::Call { to_apply } => {
            // Differentiate a copy of the callee placed here, its parameters bound to the
            // call's operands; the original call still computes the forward value.
            let args: Vec<_> = node.instr.operands().to_vec();
            let root = inline(em, *to_apply, &args)?;
            let mut targets = args.clone();
            targets.sort();
            targets.dedup();
            let cts = backprop(em, vec![(root, ct)], &targets)?;
            Ok(targets
                .into_iter()
                .zip(cts)
                .filter(|(t, c)| node.wants_instr(*t) && !c.is_zero())
                .collect())
        }
        _ => Err(non_differentiable(em, node)),
    }
}
