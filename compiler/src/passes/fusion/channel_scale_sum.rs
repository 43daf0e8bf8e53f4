//! A sum over leading dimensions of a per-channel multiple, computed as the multiple of a sum.
//!
//! Batch normalization's gradient sums the variance term `-(t + t)`, `t = broadcast(c) * (x -
//! mean)`, for the mean's gradient. `c` is the variance gradient's factor, which needs
//! `sum(dy * (x - mean))`: that sum could not join the pass computing `dy`, so it was a pass of
//! its own reading `x` (one per layer, after the pass computing `dy`). Written as
//! `-(c * s + c * s)` with `s = sum(x - mean)`, the sum depends on the forward values alone and
//! joins the forward pass computing the variance `sum((x - mean)^2)` as a second reduce: the
//! backward's pass over `x` goes. The rounding differs (one product per channel instead of one
//! per element); both are sums of values that cancel to about zero.

use super::*;
use crate::ir::{BinaryOp, UnaryOp};
use crate::passes::util::{add_instr, remove_if_dead, uniform_constant};

/// Rewrites every `reduce(-(t + t))`, `reduce(t + t)`, `reduce(-t)` or `reduce(t)` of
/// computation `cid` with `t = broadcast(c) * w`, a sum of leading dimensions whose kept
/// dimensions are `c`'s, as `c * reduce(w)` doubled and negated the same way. Returns whether
/// anything changed.
pub(super) fn sum_channel_scales_once(m: &mut Module, cid: ComputationId) -> bool {
    let mut matches: Vec<(InstrId, Factored)> = {
        let c = m.computation(cid);
        c.ids()
            .iter()
            .filter_map(|&r| factored(m, c, r).map(|f| (r, f)))
            .collect()
    };
    // A sum rewritten here is removed: it cannot be another's existing sum.
    let rewritten: HashSet<InstrId> = matches.iter().map(|(r, _)| *r).collect();
    for (_, f) in &mut matches {
        f.existing = f.existing.filter(|s| !rewritten.contains(s));
    }
    for (r, f) in &matches {
        let (shape, metadata, op, init) = {
            let instr = m.computation(cid).get(*r);
            let init = instr.operand(1);
            (
                instr.shape.clone(),
                instr.metadata.clone(),
                instr.op.clone(),
                init,
            )
        };
        let md = || metadata.clone();
        let sum = match f.existing {
            Some(s) => s,
            None => add_instr(m, cid, op, shape.clone(), &[f.w, init], md()),
        };
        let mul = Op::Binary(BinaryOp::Multiply);
        let mut out = add_instr(m, cid, mul, shape.clone(), &[f.scale, sum], md());
        if f.doubled {
            let add = Op::Binary(BinaryOp::Add);
            out = add_instr(m, cid, add, shape.clone(), &[out, out], md());
        }
        if f.negated {
            let neg = Op::Unary(UnaryOp::Negate);
            out = add_instr(m, cid, neg, shape.clone(), &[out], md());
        }
        let c = m.computation_mut(cid);
        c.replace_all_uses(*r, out);
        remove_if_dead(c, *r);
    }
    !matches.is_empty()
}

/// `reduce(±(t [+ t]))` with `t = broadcast(scale) * w`, taken apart.
struct Factored {
    scale: InstrId,
    w: InstrId,
    doubled: bool,
    negated: bool,
    /// A sum of `w` the computation has already (batch normalization's `sum(dy)`, for
    /// `sum(-(dy * scale))`).
    existing: Option<InstrId>,
}

fn factored(m: &Module, c: &Computation, r: InstrId) -> Option<Factored> {
    let instr = c.get(r);
    let Op::Reduce {
        dimensions,
        to_apply,
    } = &instr.op
    else {
        return None;
    };
    let [v, init] = instr.operands()[..] else {
        return None;
    };
    let rank = c.get(v).shape.dims().len();
    let n = dimensions.len();
    let leading = n >= 1 && n < rank && (0..n).all(|d| dimensions.contains(&(d as i64)));
    if !leading
        || !instr.shape.element_type().is_some_and(|t| t.is_float())
        || uniform_constant(c, init) != Some(0.0)
        || !is_scalar_add(m.computation(*to_apply))
    {
        return None;
    }
    let mut x = v;
    let negated = matches!(c.get(x).op, Op::Unary(UnaryOp::Negate));
    if negated {
        x = c.get(x).operand(0);
    }
    let doubled = matches!(c.get(x).op, Op::Binary(BinaryOp::Add))
        && c.get(x).operand(0) == c.get(x).operand(1);
    if doubled {
        x = c.get(x).operand(0);
    }
    if !matches!(c.get(x).op, Op::Binary(BinaryOp::Multiply)) {
        return None;
    }
    let (a, b) = (c.get(x).operand(0), c.get(x).operand(1));
    let kept: Vec<i64> = (n as i64..rank as i64).collect();
    let scale_of = |p: InstrId| match &c.get(p).op {
        Op::Broadcast { dimensions } if *dimensions == kept => {
            let s = c.get(p).operand(0);
            (c.get(s).shape.dims() == instr.shape.dims()).then_some(s)
        }
        _ => None,
    };
    let (scale, w) = match (scale_of(a), scale_of(b)) {
        (Some(s), _) => (s, b),
        (None, Some(s)) => (s, a),
        _ => return None,
    };
    if c.get(w).shape.dims() != c.get(v).shape.dims() {
        return None;
    }
    // The same sum over `w`, or another sum of the same dimensions over a value read straight
    // from `w` (the variance's `(x - mean)^2`), whose pass the new sum joins. Else the sum
    // would be a pass of its own, no better than the one it replaces.
    let same_sum = |u: InstrId| {
        u != r
            && matches!(&c.get(u).op, Op::Reduce { dimensions: d, to_apply: f }
                if d == dimensions && f == to_apply)
            && c.get(u).operands().len() == 2
            && uniform_constant(c, c.get(u).operand(1)) == Some(0.0)
    };
    let existing = c
        .users_unordered(w)
        .find(|&u| same_sum(u) && c.get(u).operand(0) == w);
    let sibling = c
        .users_unordered(w)
        .any(|u| u != x && c.users_unordered(u).any(same_sum));
    (existing.is_some() || sibling).then_some(Factored {
        scale,
        w,
        doubled,
        negated,
        existing,
    })
}

/// A computation `add(parameter(0), parameter(1))` of scalars.
fn is_scalar_add(f: &Computation) -> bool {
    let root = f.get(f.root());
    matches!(root.op, Op::Binary(BinaryOp::Add))
        && root.shape.as_array().is_some_and(|a| a.rank() == 0)
        && root
            .operands()
            .iter()
            .all(|&o| matches!(f.get(o).op, Op::Parameter(_)))
}
