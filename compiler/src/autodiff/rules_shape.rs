//! Gradients of ops that move data without arithmetic: broadcast, reshape, transpose, slice,
//! pad, concatenate, reverse, dynamic-slice, dynamic-update-slice.

use super::cotangent::Cot;
use super::emit::{Emitter, R};
use super::{non_differentiable, Contributions, Node};
use crate::ir::{InstrId, Op, PadDim, SliceDim};

pub(crate) fn vjp(em: &mut Emitter, node: &Node, g: InstrId) -> R<Contributions> {
    let x = node.operand(0);
    match &node.instr.op {
        Op::Broadcast { dimensions } => {
            let dx = unbroadcast(em, g, x, dimensions)?;
            Ok(node.to_operand(0, dx))
        }
        Op::Reshape | Op::Bitcast => {
            let dims = em.dims(x)?;
            Ok(node.to_operand(0, em.reshape(g, &dims)?))
        }
        Op::Transpose { permutation } => {
            let mut inverse = vec![0i64; permutation.len()];
            for (i, &p) in permutation.iter().enumerate() {
                inverse[p as usize] = i as i64;
            }
            Ok(node.to_operand(0, em.transpose(g, &inverse)?))
        }
        Op::Slice { dims } => slice(em, node, g, dims),
        Op::Pad { dims } => pad(em, node, g, dims),
        Op::Concatenate { dimension } => {
            let mut out = Contributions::new();
            let mut offset = 0;
            for (i, &part) in node.instr.operands().iter().enumerate() {
                let len = em.dims(part)?[*dimension as usize];
                if node.wants(i) {
                    let piece = em.slice_in_dim(g, *dimension as usize, offset, len)?;
                    out.push((part, Cot::Value(piece)));
                }
                offset += len;
            }
            Ok(out)
        }
        Op::Reverse { dimensions } => Ok(node.to_operand(0, em.reverse(g, dimensions)?)),
        Op::DynamicSlice { .. } => {
            // The slice's transpose: write it into zeros at the same (clamped) start.
            let starts = &node.instr.operands()[1..];
            let shape = em.shape(x).clone();
            let zeros = em.zeros(&shape)?;
            Ok(node.to_operand(0, em.dynamic_update_slice(zeros, g, starts)?))
        }
        Op::DynamicUpdateSlice => {
            let update = node.operand(1);
            let starts = &node.instr.operands()[2..];
            let mut out = Contributions::new();
            if node.wants(0) {
                let shape = em.shape(update).clone();
                let hole = em.zeros(&shape)?;
                out.extend(node.to_operand(0, em.dynamic_update_slice(g, hole, starts)?));
            }
            if node.wants(1) {
                let sizes = em.dims(update)?;
                out.extend(node.to_operand(1, em.dynamic_slice(g, starts, &sizes)?));
            }
            Ok(out)
        }
        _ => Err(non_differentiable(em, node)),
    }
}

/// The transpose of `broadcast(x), dimensions=dims`: sums `g` over the dimensions the broadcast
/// added, then puts the rest in the operand's dimension order (HLO wants `dims` increasing;
/// other orders are handled too).
pub(crate) fn unbroadcast(em: &mut Emitter, g: InstrId, x: InstrId, dims: &[i64]) -> R<InstrId> {
    let xs = em.dims(x)?;
    let gs = em.dims(g)?;
    let mut reduce: Vec<i64> = (0..gs.len() as i64).filter(|d| !dims.contains(d)).collect();
    for (i, &d) in dims.iter().enumerate() {
        if xs[i] == 1 && gs[d as usize] != 1 {
            reduce.push(d);
        }
    }
    let summed = em.reduce_sum(g, &reduce)?;
    // Operand dimensions in the order their output dimensions appear.
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by_key(|&i| dims[i]);
    let in_order: Vec<i64> = order.iter().map(|&i| xs[i]).collect();
    let reshaped = em.reshape(summed, &in_order)?;
    let mut perm = vec![0i64; xs.len()];
    for (pos, &i) in order.iter().enumerate() {
        perm[i] = pos as i64;
    }
    em.transpose(reshaped, &perm)
}

fn slice(em: &mut Emitter, node: &Node, g: InstrId, dims: &[SliceDim]) -> R<Contributions> {
    let xs = em.dims(node.operand(0))?;
    let gs = em.dims(g)?;
    if gs.contains(&0) {
        return Ok(vec![]);
    }
    let low: Vec<i64> = dims.iter().map(|s| s.start).collect();
    let interior: Vec<i64> = dims.iter().map(|s| s.stride - 1).collect();
    let high: Vec<i64> = (0..xs.len())
        .map(|d| xs[d] - (dims[d].start + (gs[d] - 1) * dims[d].stride + 1))
        .collect();
    let dx = em.pad_zeros_or_crop(g, &low, &high, &interior)?;
    Ok(node.to_operand(0, dx))
}

fn pad(em: &mut Emitter, node: &Node, g: InstrId, dims: &[PadDim]) -> R<Contributions> {
    let rank = dims.len();
    // Undo the edge padding (negative padding was a crop: pad zeros back), then take every
    // (interior + 1)-th element.
    let low: Vec<i64> = dims.iter().map(|p| -p.low).collect();
    let high: Vec<i64> = dims.iter().map(|p| -p.high).collect();
    let unpadded = em.pad_zeros_or_crop(g, &low, &high, &vec![0; rank])?;
    let us = em.dims(unpadded)?;
    let strided: Vec<SliceDim> = (0..rank)
        .map(|d| SliceDim {
            start: 0,
            limit: us[d],
            stride: dims[d].interior + 1,
        })
        .collect();
    let dx = em.slice(unpadded, &strided)?;
    let mut out = Contributions::new();
    if node.wants(1) {
        // Every output element not taken from x is the padding value.
        let total = em.sum_all(g)?;
        let taken = em.sum_all(dx)?;
        out.extend(node.to_operand(1, em.sub(total, taken)?));
    }
    if node.wants(0) {
        out.extend(node.to_operand(0, dx));
    }
    Ok(out)
}
