//! Gradient of `dot` with any batch and contracting dimensions.
//!
//! The result's dimensions are `[batch..., lhs free..., rhs free...]`. Each operand's gradient
//! is a dot of the cotangent with the other operand that contracts the other operand's free
//! dimensions; its result comes out as `[batch..., own free..., own contracting...]` and a
//! transpose puts it back into the operand's dimension order.

use super::emit::{Emitter, R};
use super::{Contributions, Node};
use crate::ir::{DotDimensionNumbers, InstrId};

pub(crate) fn vjp(
    em: &mut Emitter,
    node: &Node,
    dn: &DotDimensionNumbers,
    g: InstrId,
) -> R<Contributions> {
    let (lhs, rhs) = (node.operand(0), node.operand(1));
    let lhs_rank = em.array(lhs)?.rank() as i64;
    let rhs_rank = em.array(rhs)?.rank() as i64;
    let lhs_free = free_dims(lhs_rank, &dn.lhs_batch, &dn.lhs_contracting);
    let rhs_free = free_dims(rhs_rank, &dn.rhs_batch, &dn.rhs_contracting);
    let nb = dn.lhs_batch.len() as i64;
    let g_batch: Vec<i64> = (0..nb).collect();
    let g_lhs_free: Vec<i64> = (nb..nb + lhs_free.len() as i64).collect();
    let g_rhs_free: Vec<i64> =
        (nb + lhs_free.len() as i64..nb + (lhs_free.len() + rhs_free.len()) as i64).collect();
    let mut out = Contributions::new();
    // Mixed precision (e.g. bf16 operands, f32 result): each gradient dot runs in the other
    // operand's type and its result is converted to the differentiated operand's type.
    let (lhs_ty, rhs_ty) = (em.element_type(lhs)?, em.element_type(rhs)?);
    if node.wants(0) {
        let g_as_rhs = em.convert(g, rhs_ty)?;
        let d = em.dot(
            g_as_rhs,
            rhs,
            DotDimensionNumbers {
                lhs_batch: g_batch.clone(),
                rhs_batch: dn.rhs_batch.clone(),
                lhs_contracting: g_rhs_free.clone(),
                rhs_contracting: rhs_free.clone(),
            },
        )?;
        let layout = result_layout(
            &dn.lhs_batch,
            &lhs_free,
            &dn.rhs_contracting,
            &dn.lhs_contracting,
            rhs_rank,
        );
        let d = em.convert(d, lhs_ty)?;
        out.extend(node.to_operand(0, em.transpose(d, &inverse_of(&layout))?));
    }
    if node.wants(1) {
        let g_as_lhs = em.convert(g, lhs_ty)?;
        let d = em.dot(
            g_as_lhs,
            lhs,
            DotDimensionNumbers {
                lhs_batch: g_batch,
                rhs_batch: dn.lhs_batch.clone(),
                lhs_contracting: g_lhs_free,
                rhs_contracting: lhs_free.clone(),
            },
        )?;
        let layout = result_layout(
            &dn.rhs_batch,
            &rhs_free,
            &dn.lhs_contracting,
            &dn.rhs_contracting,
            lhs_rank,
        );
        let d = em.convert(d, rhs_ty)?;
        out.extend(node.to_operand(1, em.transpose(d, &inverse_of(&layout))?));
    }
    Ok(out)
}

/// Dimensions that are neither batch nor contracting, ascending.
fn free_dims(rank: i64, batch: &[i64], contracting: &[i64]) -> Vec<i64> {
    (0..rank)
        .filter(|d| !batch.contains(d) && !contracting.contains(d))
        .collect()
}

/// For the gradient dot `dot(g, other)`: which dimension of the differentiated operand each
/// result dimension is. The result is `[batch, own free, other's leftover dims ascending]`,
/// and the other's leftover dims are its contracting dims, each paired with one of ours.
fn result_layout(
    own_batch: &[i64],
    own_free: &[i64],
    other_contracting: &[i64],
    own_contracting: &[i64],
    other_rank: i64,
) -> Vec<i64> {
    let mut layout: Vec<i64> = own_batch.to_vec();
    layout.extend_from_slice(own_free);
    for d in 0..other_rank {
        if let Some(j) = other_contracting.iter().position(|&c| c == d) {
            layout.push(own_contracting[j]);
        }
    }
    layout
}

/// The transpose permutation that sends result position p to operand dimension layout[p].
fn inverse_of(layout: &[i64]) -> Vec<i64> {
    let mut perm = vec![0i64; layout.len()];
    for (p, &d) in layout.iter().enumerate() {
        perm[d as usize] = p as i64;
    }
    perm
}
