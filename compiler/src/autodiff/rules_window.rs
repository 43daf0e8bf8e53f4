//! Gradients of `reduce-window`: max/min pooling through select-and-scatter (as JAX does),
//! sum pooling through an interior-padded cotangent summed over windows again.

use super::emit::{Emitter, R};
use super::rules_reduce::{classify, Reducer};
use super::scalar_computations::ScalarKind;
use super::{non_differentiable, unsupported, Contributions, Node};
use crate::ir::{InstrId, Op, Window, WindowDim};

pub(crate) fn vjp(em: &mut Emitter, node: &Node, g: InstrId) -> R<Contributions> {
    let Op::ReduceWindow { window, to_apply } = &node.instr.op else {
        return Err(non_differentiable(em, node));
    };
    if node.instr.operands().len() != 2 {
        return Err(unsupported(
            em,
            node,
            "a reduce-window of several arrays at once has no gradient rule",
        ));
    }
    match classify(em.module, *to_apply) {
        Reducer::Max | Reducer::Min => chooser(em, node, g, window, *to_apply),
        Reducer::Add => sum(em, node, g, window),
        Reducer::Other => Err(unsupported(
            em,
            node,
            "only reduce-windows whose region is add, maximum or minimum have a gradient rule",
        )),
    }
}

/// Max/min pooling: each window's cotangent goes to the element the window chose (the first
/// one on ties, which select-and-scatter's `GE`/`LE` select gives).
fn chooser(
    em: &mut Emitter,
    node: &Node,
    g: InstrId,
    window: &Window,
    to_apply: crate::ir::ComputationId,
) -> R<Contributions> {
    if node.wants(1) {
        return Err(unsupported(
            em,
            node,
            "the init value of a max/min reduce-window must not depend on the differentiated parameters",
        ));
    }
    if window
        .dims
        .iter()
        .any(|w| w.base_dilation != 1 || w.window_dilation != 1 || w.reversal)
    {
        return Err(unsupported(
            em,
            node,
            "max/min reduce-window with dilation has no gradient rule (select-and-scatter has no dilation)",
        ));
    }
    let x = node.operand(0);
    let ty = em.element_type(x)?;
    let kind = if classify(em.module, to_apply) == Reducer::Max {
        ScalarKind::Ge
    } else {
        ScalarKind::Le
    };
    let select = em.scalars.get(em.module, kind, ty);
    let scatter = em.scalars.get(em.module, ScalarKind::Add, ty);
    let zero = em.scalar(ty, 0.0);
    let dx = em.select_and_scatter(x, g, zero, window.clone(), select, scatter)?;
    Ok(node.to_operand(0, dx))
}

/// Sum pooling: input element `i` receives the cotangents of every window covering it. That
/// is the cotangent dilated by the stride, padded so windows line up, and summed over
/// windows again with the base dilation as stride (the transposed convolution of an all-ones
/// kernel, which needs no reversal).
fn sum(em: &mut Emitter, node: &Node, g: InstrId, window: &Window) -> R<Contributions> {
    let x = node.operand(0);
    let xs = em.dims(x)?;
    let gs = em.dims(g)?;
    let mut out = Contributions::new();
    if gs.contains(&0) {
        return Ok(out);
    }
    if node.wants(1) {
        let simple = window
            .dims
            .iter()
            .all(|w| w.pad_low == 0 && w.pad_high == 0 && w.base_dilation == 1);
        if !simple {
            return Err(unsupported(
                em,
                node,
                "the init value of a padded or dilated reduce-window sum must not depend on the differentiated parameters",
            ));
        }
        out.extend(node.to_operand(1, em.sum_all(g)?));
    }
    if node.wants(0) {
        let mut low = Vec::new();
        let mut high = Vec::new();
        let mut interior = Vec::new();
        let mut dims = Vec::new();
        for (i, w) in window.dims.iter().enumerate() {
            let (n, m, k) = (xs[i], gs[i], w.size);
            low.push((k - 1) * w.window_dilation - w.pad_low);
            high.push((n - 1) * w.base_dilation + w.pad_low - (m - 1) * w.stride);
            interior.push(w.stride - 1);
            dims.push(WindowDim {
                size: k,
                stride: w.base_dilation,
                pad_low: 0,
                pad_high: 0,
                window_dilation: w.window_dilation,
                base_dilation: 1,
                reversal: false,
            });
        }
        let padded = em.pad_zeros_or_crop(g, &low, &high, &interior)?;
        let dx = em.reduce_window_sum(padded, Window { dims })?;
        out.extend(node.to_operand(0, dx));
    }
    Ok(out)
}
