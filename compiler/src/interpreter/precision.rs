//! bf16 excess precision, as XLA:CPU computes it (the "precision contract" of
//! `docs/interpreter.md`).
//!
//! XLA:CPU has no bf16 arithmetic: it computes each bf16 elementwise op in f32 and rounds the
//! result to bf16. Where such a result is read by a `convert` to f32 (or f64), that rounding is
//! dropped (with excess precision allowed, XLA's default, the f32 -> bf16 -> f32 pair is
//! removed), so the convert sees the f32 value. Everything else reads the rounded bf16 value:
//! the next bf16 op of a chain, an output, a reduce. Explicit converts to bf16 always round.
//! f16 has native arithmetic on XLA:CPU and rounds at every op.

use super::elementwise;
use super::{convert, EvalResult};
use crate::ir::{Array, Computation, ElementType, InstrId, Op};
use hashbrown::HashSet;

/// Whether `op` producing `ty` is bf16 arithmetic whose f32 value XLA keeps for a convert.
fn is_bf16_arithmetic(op: &Op, ty: Option<ElementType>) -> bool {
    ty == Some(ElementType::BF16) && matches!(op, Op::Unary(_) | Op::Binary(_))
}

/// The bf16 op whose unrounded f32 value `convert` reads, if it reads one.
pub(crate) fn unrounded_source(c: &Computation, convert: InstrId) -> Option<InstrId> {
    let instr = c.get(convert);
    if !matches!(instr.op, Op::Convert)
        || !matches!(
            instr.shape.element_type(),
            Some(ElementType::F32 | ElementType::F64)
        )
    {
        return None;
    }
    let src = *instr.operands().first()?;
    let s = c.get(src);
    is_bf16_arithmetic(&s.op, s.shape.element_type()).then_some(src)
}

/// The bf16 ops of `order` whose f32 value some convert reads.
pub(crate) fn unrounded_sources(c: &Computation, order: &[InstrId]) -> HashSet<InstrId> {
    order
        .iter()
        .filter_map(|&id| unrounded_source(c, id))
        .collect()
}

/// `op` (unary or binary) evaluated in f32 on its bf16 operands, without the final rounding.
pub(crate) fn eval_in_f32(op: &Op, operands: &[&Array]) -> EvalResult<Array> {
    let wide: Vec<Array> = operands
        .iter()
        .map(|a| convert::convert(a, ElementType::F32))
        .collect::<EvalResult<_>>()?;
    match op {
        Op::Unary(u) => elementwise::unary(*u, &wide[0]),
        Op::Binary(b) => elementwise::binary(*b, &wide[0], &wide[1]),
        _ => super::err(format!("{} has no f32 evaluation", op.opcode_name())),
    }
}
