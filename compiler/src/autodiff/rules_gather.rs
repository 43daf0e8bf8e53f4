//! Gradients of `gather` and of `scatter` with an add combiner.
//!
//! A gather's transpose is a scatter-add of the cotangent into zeros of the operand's shape,
//! with the same dimension numbers renamed; a scatter-add passes the cotangent through to
//! its operand and gathers it at the same windows for its updates. The indices are integers
//! and get no gradient. Limit: an out-of-bounds start is clamped by gather but skipped by
//! scatter, so gradients are exact only for indices in bounds (as in XLA without `mode=`).

use super::cotangent::Cot;
use super::emit::{Emitter, R};
use super::{unsupported, Contributions, Node};
use crate::ir::{BinaryOp, GatherDimensionNumbers, InstrId, Op, ScatterDimensionNumbers};

pub(crate) fn vjp(em: &mut Emitter, node: &Node, g: InstrId) -> R<Contributions> {
    match &node.instr.op {
        Op::Gather {
            dims,
            indices_are_sorted,
            ..
        } => {
            if !node.wants(0) {
                return Ok(vec![]);
            }
            let x = node.operand(0);
            let indices = node.operand(1);
            let shape = em.shape(x).clone();
            let zeros = em.zeros(&shape)?;
            let sdims = ScatterDimensionNumbers {
                update_window_dims: dims.offset_dims.clone(),
                inserted_window_dims: dims.collapsed_slice_dims.clone(),
                scatter_dims_to_operand_dims: dims.start_index_map.clone(),
                index_vector_dim: dims.index_vector_dim,
                input_batching_dims: dims.operand_batching_dims.clone(),
                scatter_indices_batching_dims: dims.start_indices_batching_dims.clone(),
            };
            let dx = em.scatter_add(zeros, indices, g, sdims, *indices_are_sorted)?;
            Ok(node.to_operand(0, dx))
        }
        Op::Scatter {
            dims,
            to_apply,
            indices_are_sorted,
            ..
        } => {
            if !is_add(em, *to_apply) {
                return Err(unsupported(
                    em,
                    node,
                    "only a scatter whose combiner adds (scatter-add) has a gradient rule",
                ));
            }
            let mut out = Contributions::new();
            if node.wants(0) {
                out.push((node.operand(0), Cot::Value(g)));
            }
            if node.wants(2) {
                let updates = em.dims(node.operand(2))?;
                let rank = em.array(node.operand(0))?.rank();
                let mut window = dims.update_window_dims.iter();
                let slice_sizes: Vec<i64> = (0..rank as i64)
                    .map(|d| {
                        if dims.inserted_window_dims.contains(&d)
                            || dims.input_batching_dims.contains(&d)
                        {
                            1
                        } else {
                            window.next().map_or(1, |&u| updates[u as usize])
                        }
                    })
                    .collect();
                let gdims = GatherDimensionNumbers {
                    offset_dims: dims.update_window_dims.clone(),
                    collapsed_slice_dims: dims.inserted_window_dims.clone(),
                    start_index_map: dims.scatter_dims_to_operand_dims.clone(),
                    index_vector_dim: dims.index_vector_dim,
                    operand_batching_dims: dims.input_batching_dims.clone(),
                    start_indices_batching_dims: dims.scatter_indices_batching_dims.clone(),
                };
                let du = em.gather(g, node.operand(1), gdims, slice_sizes, *indices_are_sorted)?;
                out.push((node.operand(2), Cot::Value(du)));
            }
            Ok(out)
        }
        _ => Err(super::non_differentiable(em, node)),
    }
}

/// Whether computation `c` is `add(p0, p1)` (in either order).
fn is_add(em: &Emitter, c: crate::ir::ComputationId) -> bool {
    let comp = em.module.computation(c);
    if !comp.has_root() {
        return false;
    }
    let root = comp.get(comp.root());
    let param = |k: usize| match comp.get(root.operand(k)).op {
        Op::Parameter(n) => Some(n),
        _ => None,
    };
    root.op == Op::Binary(BinaryOp::Add)
        && matches!(
            (param(0), param(1)),
            (Some(0), Some(1)) | (Some(1), Some(0))
        )
}
