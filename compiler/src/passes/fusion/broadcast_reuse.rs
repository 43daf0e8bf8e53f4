//! A small computed value that a broadcast spreads over a large array stays out of the large
//! array's fusion when computing it is not cheap (XLA's rule against fusing an expensive
//! producer into a consumer that reuses its elements).
//!
//! A fusion computes every member once per output element. Batch normalization's gradient
//! reads per-channel values such as `gamma / (var + eps) * -0.5 / N`, computed from `[C]`
//! vectors and broadcast over `[N, H, W, C]`. Fused into `dx`'s loop, those divides ran for each
//! of the 3.2 million elements of the Fashion-MNIST CNN's first layer instead of for its 32
//! channels: three vector divides per four elements made that loop compute-bound (1.1 ms
//! where reading and writing its arrays takes 0.4). Kept out, the per-channel values are a
//! small fusion of their own, stored as a `[C]` vector that the large loop loads from the L1
//! cache.
//!
//! Limits: the measure is syntactic. A value counts as costly when the small computation
//! behind the broadcast holds a divide, a transcendental or [`CHEAP_OPS_PER_KERNEL`]
//! elementwise ops or more; a broadcast that repeats each element fewer than
//! [`MIN_REUSE`] times keeps its operand fused, as does a parameter, a constant or a cheap
//! chain of a couple of ops.

use super::*;
use crate::ir::{BinaryOp, UnaryOp};

/// Fewest output elements per operand element for a broadcast to count as reusing its operand.
const MIN_REUSE: i64 = 8;

/// Elementwise ops whose repetition at every element of the large loop costs more than
/// storing their result as a small array and loading it back.
const CHEAP_OPS_PER_KERNEL: usize = 4;

/// Most instructions looked at behind one broadcast.
const MAX_VISITED: usize = 64;

/// Whether the operand of broadcast `b` stays outside the fusion that takes `b` in (see the
/// module doc).
pub(super) fn keeps_operand_outside(c: &Computation, b: InstrId) -> bool {
    let instr = c.get(b);
    if !matches!(instr.op, Op::Broadcast { .. }) {
        return false;
    }
    let operand = instr.operand(0);
    let (Some(out), Some(small)) = (instr.shape.as_array(), c.get(operand).shape.as_array()) else {
        return false;
    };
    let small_count = small.element_count().max(1);
    if out.element_count() < small_count.saturating_mul(MIN_REUSE) {
        return false;
    }
    is_costly(c, operand, small_count)
}

/// Whether the computation of `root` that a fusion would take in (loop-fusible ops of at most
/// `small_count` elements) holds a costly op or [`CHEAP_OPS_PER_KERNEL`] elementwise ops.
fn is_costly(c: &Computation, root: InstrId, small_count: i64) -> bool {
    let mut seen: HashSet<InstrId> = HashSet::new();
    let mut stack = vec![root];
    let mut elementwise = 0;
    while let Some(x) = stack.pop() {
        if !seen.insert(x) || seen.len() > MAX_VISITED {
            continue;
        }
        let xi = c.get(x);
        let small = xi
            .shape
            .as_array()
            .is_some_and(|a| a.element_count() <= small_count);
        if !small || !is_loop_fusible(&xi.op) {
            continue;
        }
        if is_costly_op(&xi.op) {
            return true;
        }
        if xi.op.is_elementwise() {
            elementwise += 1;
            if elementwise >= CHEAP_OPS_PER_KERNEL {
                return true;
            }
        }
        stack.extend(xi.operands().iter().copied());
    }
    false
}

/// Divides, powers and transcendental functions: many cycles per vector.
fn is_costly_op(op: &Op) -> bool {
    use BinaryOp as B;
    use UnaryOp as U;
    matches!(
        op,
        Op::Binary(B::Divide | B::Remainder | B::Power | B::Atan2)
            | Op::Unary(
                U::Exp
                    | U::Expm1
                    | U::Log
                    | U::Log1p
                    | U::Tanh
                    | U::Logistic
                    | U::Sqrt
                    | U::Rsqrt
                    | U::Cbrt
                    | U::Sine
                    | U::Cosine
                    | U::Tan
                    | U::Erf
            )
    )
}
