//! Reverse-mode automatic differentiation on the IR.
//!
//! [`gradients`] adds to a computation the instructions computing the gradient of a scalar
//! loss with respect to chosen instructions; [`grad_module`] wraps that for a whole module
//! (`tessel grad`). The transformation walks back from the loss (see `sweep`), applying one
//! gradient rule per instruction (the `rules_*` files); loops with a fixed trip count are
//! differentiated with a recording loop and a reverse loop (`rules_while`), calls by
//! differentiating a copy of the callee. See `docs/autodiff.md`.

mod cotangent;
mod emit;
mod inline;
mod rules_conditional;
mod rules_control;
mod rules_convolution;
mod rules_dot;
mod rules_elementwise;
mod rules_gather;
mod rules_reduce;
mod rules_shape;
mod rules_while;
mod rules_window;
mod scalar_computations;
mod sweep;

use crate::builder::Builder;
use crate::ir::{ComputationId, InstrId, Instruction, Metadata, Module, Op, Shape};
use cotangent::{materialize, Cot};
use emit::{Emitter, R};
use hashbrown::HashSet;
use scalar_computations::ScalarComputations;

/// Why a gradient could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AutodiffError {
    pub message: String,
    /// The instruction the problem is at, when there is one.
    pub instruction: Option<String>,
}

impl AutodiffError {
    pub fn new(message: impl Into<String>) -> AutodiffError {
        AutodiffError {
            message: message.into(),
            instruction: None,
        }
    }
}

/// A new module with the same parameters as `module`'s entry whose root is the tuple
/// `(value, d value / d param wrt[0], d value / d param wrt[1], ...)`.
///
/// The entry's root must be a scalar float, or a tuple whose element 0 is the scalar loss; then
/// only element 0 is differentiated and returned as the value (the other elements are dropped).
/// Gradients with respect to integer or pred parameters are zeros of the parameter's shape.
pub fn grad_module(module: &Module, wrt: &[u32]) -> Result<Module, AutodiffError> {
    let mut m = module.clone();
    let entry = m.entry;
    if !m.entry().has_root() {
        return Err(AutodiffError::new("the entry computation is empty"));
    }
    let root = m.entry().root();
    let loss = match &m.entry().get(root).shape {
        Shape::Tuple(elems) if !elems.is_empty() => {
            if m.entry().get(root).op == Op::Tuple {
                m.entry().get(root).operand(0)
            } else {
                let shape = elems[0].clone();
                Builder::new(&mut m, entry).add_with_shape(
                    Op::GetTupleElement { index: 0 },
                    shape,
                    &[root],
                )
            }
        }
        _ => root,
    };
    let mut params = Vec::with_capacity(wrt.len());
    for &w in wrt {
        let p = m.entry().parameter(w).ok_or_else(|| {
            AutodiffError::new(format!(
                "the entry computation has no parameter {w} (it has {})",
                m.entry().parameters().len()
            ))
        })?;
        params.push(p);
    }
    let grads = gradients(&mut m, entry, loss, &params)?;
    let mut outputs = vec![loss];
    outputs.extend(grads);
    let shapes = outputs
        .iter()
        .map(|&o| m.entry().get(o).shape.clone())
        .collect();
    let new_root =
        Builder::new(&mut m, entry).add_with_shape(Op::Tuple, Shape::Tuple(shapes), &outputs);
    m.entry_mut().set_root(new_root);
    remove_dead_instructions(&mut m, entry);
    // The header's layout names the old result shape.
    m.extra_attrs
        .retain(|(k, _)| k != "entry_computation_layout");
    Ok(m)
}

/// Adds to computation `comp` of `module` the instructions computing the gradient of the
/// scalar float `loss` with respect to each of `params` (any instructions of `comp`); returns
/// the gradients' ids, in the order of `params`. Existing instructions are left unchanged.
pub fn gradients(
    module: &mut Module,
    comp: ComputationId,
    loss: InstrId,
    params: &[InstrId],
) -> Result<Vec<InstrId>, AutodiffError> {
    if comp.0 as usize >= module.computations.len() {
        return Err(AutodiffError::new(format!("no computation {comp}")));
    }
    let c = module.computation(comp);
    for &id in params.iter().chain([&loss]) {
        if !c.contains(id) {
            return Err(AutodiffError::new(format!(
                "instruction {} is not in computation {}",
                id.index(),
                c.name
            )));
        }
    }
    for &p in params {
        let instr = c.get(p);
        if instr.shape.leaves().iter().any(|a| !a.is_static()) {
            return Err(AutodiffError {
                message: format!(
                    "cannot differentiate w.r.t. `{}` of shape {}: it has dynamic dimensions",
                    instr.name, instr.shape
                ),
                instruction: Some(instr.name.clone()),
            });
        }
    }
    let loss_instr = c.get(loss);
    let ty = match &loss_instr.shape {
        Shape::Array(a) if a.rank() == 0 && a.element_type.is_float() => a.element_type,
        other => {
            return Err(AutodiffError {
                message: format!(
                    "the loss `{}` must be a float scalar, but it is {}",
                    loss_instr.name, other
                ),
                instruction: Some(loss_instr.name.clone()),
            })
        }
    };
    let mut scalars = ScalarComputations::default();
    let mut em = Emitter {
        module,
        comp,
        metadata: Metadata::default(),
        scalars: &mut scalars,
    };
    let one = em.scalar(ty, 1.0);
    let cts = sweep::backprop(&mut em, vec![(loss, Cot::Value(one))], params)?;
    let mut out = Vec::with_capacity(params.len());
    for (&p, ct) in params.iter().zip(cts) {
        let shape = em.shape(p).clone();
        out.push(materialize(&mut em, ct, &shape)?);
    }
    Ok(out)
}

/// An instruction being differentiated, with which operands need a gradient.
pub(crate) struct Node {
    pub id: InstrId,
    pub instr: Instruction,
    wanted: Vec<bool>,
}

/// Gradient contributions of one rule: (operand, its cotangent share).
pub(crate) type Contributions = Vec<(InstrId, Cot)>;

impl Node {
    pub(crate) fn operand(&self, i: usize) -> InstrId {
        self.instr.operand(i)
    }

    /// Whether operand slot `i` needs a gradient.
    pub(crate) fn wants(&self, i: usize) -> bool {
        self.wanted.get(i).copied().unwrap_or(false)
    }

    pub(crate) fn wants_instr(&self, id: InstrId) -> bool {
        self.instr
            .operands()
            .iter()
            .zip(&self.wanted)
            .any(|(&o, &w)| o == id && w)
    }

    /// `x` as the gradient of operand `i`, if that operand needs one.
    pub(crate) fn to_operand(&self, i: usize, x: InstrId) -> Contributions {
        if self.wants(i) {
            vec![(self.operand(i), Cot::Value(x))]
        } else {
            vec![]
        }
    }
}

/// Dispatches to the gradient rule of the node's op.
pub(crate) fn vjp(em: &mut Emitter, node: &Node, ct: Cot) -> R<Contributions> {
    if node.instr.shape.leaves().iter().any(|a| !a.is_static()) {
        return Err(unsupported(
            em,
            node,
            "values with dynamic dimensions have no gradient (give every dimension a size)",
        ));
    }
    match &node.instr.op {
        Op::Tuple | Op::GetTupleElement { .. } | Op::Call { .. } => {
            rules_control::vjp(em, node, ct)
        }
        Op::While { .. } => rules_while::vjp(em, node, ct),
        Op::Conditional { .. } => rules_conditional::vjp(em, node, ct),
        Op::Reduce { .. } | Op::AllReduce { .. } => rules_reduce::vjp(em, node, ct),
        op => {
            let g = match ct {
                Cot::Value(g) if em.shape(g).is_array() => g,
                Cot::Zero => return Ok(vec![]),
                _ => {
                    return Err(unsupported(
                        em,
                        node,
                        "a tuple cotangent for an array value",
                    ))
                }
            };
            match op {
                Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Clamp | Op::Convert | Op::Copy => {
                    rules_elementwise::vjp(em, node, g)
                }
                Op::Broadcast { .. }
                | Op::Reshape
                | Op::Bitcast
                | Op::Transpose { .. }
                | Op::Slice { .. }
                | Op::Pad { .. }
                | Op::Concatenate { .. }
                | Op::Reverse { .. }
                | Op::DynamicSlice { .. }
                | Op::DynamicUpdateSlice => rules_shape::vjp(em, node, g),
                Op::Dot(dn) => rules_dot::vjp(em, node, dn, g),
                Op::Convolution(conv) => rules_convolution::vjp(em, node, conv, g),
                Op::ReduceWindow { .. } => rules_window::vjp(em, node, g),
                Op::Gather { .. } | Op::Scatter { .. } => rules_gather::vjp(em, node, g),
                _ => Err(non_differentiable(em, node)),
            }
        }
    }
}

/// Where an instruction came from: its source line (JAX's debug info or a trace's location)
/// and the line of the HLO text it was read from.
fn location(module: &Module, instr: &Instruction) -> String {
    let mut parts = Vec::new();
    if let Some(src) = module.source_location(instr) {
        parts.push(format!("at {src}"));
    }
    if let Some(line) = instr.text_line {
        match &module.source_file {
            Some(file) => parts.push(format!("{file}:{line}")),
            None => parts.push(format!("HLO line {line}")),
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// The error for an op on the path from a differentiated parameter to the loss that has no
/// gradient rule at all.
pub(crate) fn non_differentiable(em: &Emitter, node: &Node) -> AutodiffError {
    unsupported(em, node, "this op is not differentiable")
}

/// The error for an op whose gradient rule does not cover this use of it.
pub(crate) fn unsupported(em: &Emitter, node: &Node, why: &str) -> AutodiffError {
    let instr = &node.instr;
    AutodiffError {
        message: format!(
            "cannot differentiate through {} `{}`{}: {}",
            instr.op.opcode_name(),
            instr.name,
            location(em.module, instr),
            why
        ),
        instruction: Some(instr.name.clone()),
    }
}

/// Removes instructions of `comp` that neither the root nor a side effect needs (parameters
/// stay: they are the computation's signature).
fn remove_dead_instructions(module: &mut Module, comp: ComputationId) {
    let c = module.computation(comp);
    let mut live: HashSet<InstrId> = HashSet::new();
    let mut stack = vec![c.root()];
    for (id, instr) in c.instructions() {
        if instr.op.has_side_effect() || matches!(instr.op, Op::Parameter(_)) {
            stack.push(id);
        }
    }
    while let Some(id) = stack.pop() {
        if live.insert(id) {
            stack.extend(c.get(id).operands().iter().copied());
        }
    }
    let dead: Vec<InstrId> = c
        .post_order()
        .into_iter()
        .rev()
        .filter(|id| !live.contains(id))
        .collect();
    let c = module.computation_mut(comp);
    for id in dead {
        c.remove(id);
    }
}

#[cfg(test)]
mod tests;
