//! Small helpers shared by the passes: adding and removing instructions, recognising
//! constants, and finding the computations that run as code (rather than as regions).

use crate::ir::Computation;
use crate::ir::{
    ArrayData, ComputationId, InstrId, Instruction, Literal, Metadata, Module, Op, Shape,
};

/// Makes every computation's root explicit, so that adding instructions cannot move it
/// (a computation without an explicit root takes its last instruction as root).
pub(crate) fn pin_roots(m: &mut Module) {
    for c in &mut m.computations {
        if c.has_root() {
            let r = c.root();
            c.set_root(r);
        }
    }
}

/// Adds an instruction with a fresh module-unique name built from `base`.
pub(crate) fn add_named(
    m: &mut Module,
    comp: ComputationId,
    base: &str,
    op: Op,
    shape: Shape,
    operands: &[InstrId],
    metadata: Metadata,
) -> InstrId {
    let name = m.unique_name(base);
    let mut instr = Instruction::new(name, op, shape);
    instr.metadata = metadata;
    m.computation_mut(comp).add(instr, operands)
}

/// Adds an instruction named after its opcode.
pub(crate) fn add_instr(
    m: &mut Module,
    comp: ComputationId,
    op: Op,
    shape: Shape,
    operands: &[InstrId],
    metadata: Metadata,
) -> InstrId {
    let base = op.opcode_name();
    add_named(m, comp, base, op, shape, operands, metadata)
}

/// The name without its numeric suffix: `add.12` -> `add`.
pub(crate) fn name_base(name: &str) -> &str {
    match name.rsplit_once('.') {
        Some((base, suffix)) if !base.is_empty() && suffix.parse::<u64>().is_ok() => base,
        _ => name,
    }
}

/// Whether removing `id` (when unused) could change what the module does.
pub(crate) fn is_removable(c: &Computation, id: InstrId) -> bool {
    let instr = c.get(id);
    !matches!(instr.op, Op::Parameter(_)) && !instr.op.has_side_effect() && c.root() != id
}

/// Removes `id` if nothing uses it and it has no effect, then its operands likewise.
/// Returns how many instructions were removed.
pub(crate) fn remove_if_dead(c: &mut Computation, id: InstrId) -> usize {
    let mut removed = 0;
    let mut stack = vec![id];
    while let Some(x) = stack.pop() {
        if !c.contains(x) || c.users_unordered(x).next().is_some() || !is_removable(c, x) {
            continue;
        }
        let instr = c.remove(x);
        removed += 1;
        stack.extend(instr.operands().iter().copied());
    }
    removed
}

/// The value of every element of a constant (or a broadcast of a constant) when they are
/// all equal, as f64. Used to recognise zeros and ones.
pub(crate) fn uniform_constant(c: &Computation, id: InstrId) -> Option<f64> {
    let instr = c.get(id);
    match &instr.op {
        Op::Constant(Literal::Array(a)) => {
            if a.data.is_empty() {
                return None;
            }
            let first = a.data.get_f64(0);
            if matches!(a.data, ArrayData::S64(_) | ArrayData::U64(_)) {
                // 64-bit integers are not exact in f64: compare the integers themselves.
                let f = a.data.get_i64(0);
                return (0..a.data.len())
                    .all(|i| a.data.get_i64(i) == f)
                    .then_some(first);
            }
            (0..a.data.len())
                .all(|i| a.data.get_f64(i) == first)
                .then_some(first)
        }
        Op::Broadcast { .. } => uniform_constant(c, instr.operand(0)),
        _ => None,
    }
}

/// Whether two literals hold the same bits (so `0.0` and `-0.0` differ, and a NaN equals
/// itself): the equality CSE needs.
pub(crate) fn literals_identical(a: &Literal, b: &Literal) -> bool {
    match (a, b) {
        (Literal::Array(x), Literal::Array(y)) => {
            x.shape == y.shape && x.data.to_le_bytes() == y.data.to_le_bytes()
        }
        (Literal::Tuple(x), Literal::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| literals_identical(a, b))
        }
        (Literal::Token, Literal::Token) => true,
        _ => false,
    }
}

/// Whether two ops are the same operation with the same attributes.
pub(crate) fn ops_identical(a: &Op, b: &Op) -> bool {
    match (a, b) {
        (Op::Constant(x), Op::Constant(y)) => literals_identical(x, y),
        _ => a == b,
    }
}

/// Computations whose instructions run as code: the entry and, transitively, the bodies of
/// `while`, `call` and `conditional` (not reduction regions or fused computations).
pub(crate) fn code_computations(m: &Module) -> Vec<ComputationId> {
    let mut out = vec![m.entry];
    let mut i = 0;
    while i < out.len() {
        let c = m.computation(out[i]);
        for id in c.post_order() {
            let callees = match &c.get(id).op {
                Op::While { condition, body } => vec![*condition, *body],
                Op::Call { to_apply } => vec![*to_apply],
                Op::Conditional { branches } => branches.clone(),
                _ => vec![],
            };
            for callee in callees {
                if !out.contains(&callee) {
                    out.push(callee);
                }
            }
        }
        i += 1;
    }
    out
}

/// How many instructions (over the whole module) call computation `target`.
pub(crate) fn caller_count(m: &Module, target: ComputationId) -> usize {
    m.computations
        .iter()
        .map(|c| {
            c.ids()
                .iter()
                .filter(|&&id| c.get(id).op.called_computations().contains(&target))
                .count()
        })
        .sum()
}

/// The `while` instructions of computation `comp`, operands before users.
pub(crate) fn while_loops(m: &Module, comp: ComputationId) -> Vec<InstrId> {
    let c = m.computation(comp);
    c.post_order()
        .into_iter()
        .filter(|&id| matches!(c.get(id).op, Op::While { .. }))
        .collect()
}
