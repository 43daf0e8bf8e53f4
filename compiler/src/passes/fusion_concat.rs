//! Which operands of a concatenate the loop fusion pass (`fusion.rs`) stores instead of
//! recomputing inside the concatenate's fusion.
//!
//! A fused concatenate is evaluated per output element: the JIT computes every operand at that
//! element's position (clamped into the operand) and selects one, and lane by lane, in scalar
//! code, when the concatenated dimension is the one its loop vectorizes
//! (`runtime/src/jit/clif/value_at_index.rs`). An operand that is a long elementwise chain then
//! costs (operands x 4) times what computing it once per element would. Threefry-2x32 is the
//! case that matters: tessel's `random_bits` and JAX's PRNG both end in
//! `concatenate(x0, x1)` of the two words of one 20-round chain. Fused whole, each element of
//! the MLP's dropout masks computed the chain twice in scalar code (10 ms of its 18 ms step).
//!
//! Such an operand stays out of the concatenate's fusion. The expensive operands of one
//! concatenate become the roots of one multi-output fusion, so a chain they share (x0 and x1)
//! runs once per position in vector code and the concatenate reads the stored words.

use crate::ir::{Computation, InstrId, Op};
use hashbrown::HashSet;

/// Most elementwise instructions a concatenate's operand may hold and still be recomputed
/// inside the concatenate's fusion. Storing an operand costs about one store and one load per
/// element; recomputing it costs its ops at least twice over, in scalar code.
pub(super) const MAX_RECOMPUTED_CONCAT_OPS: usize = 8;

/// Whether `p` computes more than [`MAX_RECOMPUTED_CONCAT_OPS`] elementwise instructions,
/// counted once each through its elementwise and shape operands (stopping at everything else).
pub(super) fn is_expensive_operand(c: &Computation, p: InstrId) -> bool {
    let mut seen: HashSet<InstrId> = HashSet::new();
    let mut stack = vec![p];
    let mut count = 0;
    while let Some(x) = stack.pop() {
        if !seen.insert(x) {
            continue;
        }
        let op = &c.get(x).op;
        let shape_op = matches!(
            op,
            Op::Broadcast { .. }
                | Op::Reshape
                | Op::Bitcast
                | Op::Transpose { .. }
                | Op::Slice { .. }
                | Op::Reverse { .. }
        );
        if op.is_elementwise() {
            count += 1;
            if count > MAX_RECOMPUTED_CONCAT_OPS {
                return true;
            }
        } else if !shape_op {
            continue;
        }
        stack.extend(c.get(x).operands().iter().copied());
    }
    false
}

/// The operands of concatenates that read `p` and that should be computed together with it,
/// in operand order, when `p` is an expensive operand of one of them (else empty): the
/// concatenate's expensive operands with `p`'s dimensions that `eligible` accepts.
pub(super) fn stored_siblings(
    c: &Computation,
    p: InstrId,
    eligible: &dyn Fn(InstrId) -> bool,
) -> Vec<InstrId> {
    let dims = c.get(p).shape.dims();
    for u in c.users(p) {
        if !matches!(c.get(u).op, Op::Concatenate { .. }) || !is_expensive_operand(c, p) {
            continue;
        }
        let mut out: Vec<InstrId> = Vec::new();
        for &o in c.get(u).operands() {
            if !out.contains(&o)
                && (o == p
                    || (eligible(o) && c.get(o).shape.dims() == dims && is_expensive_operand(c, o)))
            {
                out.push(o);
            }
        }
        return out;
    }
    Vec::new()
}
