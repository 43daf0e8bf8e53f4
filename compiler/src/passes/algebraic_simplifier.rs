//! Algebraic simplification: local rewrites that keep the value and remove work.
//!
//! - identities: `x+0`, `0+x`, `x-0`, `x*1`, `1*x`, `x/1`; `x*0 -> 0` for integers only (for
//!   floats it would lose NaN and infinity); `negate(negate(x))`, `not(not(x))`;
//! - no-op shape changes: converts to the same type, copies, reshapes/bitcasts to the same
//!   shape, identity transposes and broadcasts, full slices, one-operand concatenates, pads
//!   of zero width, selects between equal values;
//! - `get-tuple-element(tuple(a, b, ...), i)` is the i-th operand;
//! - chains: reshape of reshape, transpose of transpose, broadcast of broadcast, slice of
//!   slice collapse into one;
//! - broadcasts of scalars: a reshape, transpose or slice of a scalar broadcast is a
//!   broadcast of that scalar; a unary op or convert of one runs on the scalar;
//! - a reduce over dimensions of size 1 is its reducer applied to the reshaped operand;
//! - a reshape of a concatenate along dimension 0 whose rows each lie in one operand is a
//!   concatenate of the reshaped operands (picked per row, not per element);
//! - dot and convolution read a transposed operand directly, with the transpose folded into
//!   their dimension numbers; a transpose that is a convolution's only user folds into the
//!   convolution's output labels (autodiff's gradients come out in their operand's layout),
//!   and one that swaps a dot's free dimensions is the dot with its operands swapped.

use super::result_transpose::{fold_transpose_of_convolution, fold_transpose_of_dot};
use super::util::{add_instr, pin_roots, remove_if_dead, uniform_constant};
use super::{Pass, PassError};
use crate::ir::{
    ArrayShape, BinaryOp, ComputationId, Convolution, DotDimensionNumbers, InstrId, Module, Op,
    Shape, SliceDim, UnaryOp,
};

#[derive(Default)]
pub struct AlgebraicSimplifier;

impl Pass for AlgebraicSimplifier {
    fn name(&self) -> &'static str {
        "algebraic-simplifier"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for cid in m.computation_ids().collect::<Vec<_>>() {
            // Instructions a rewrite creates or changes are simplified again, so a chain
            // collapses in one run; the cap guards against rewrites that undo each other.
            let mut work = m.computation(cid).post_order();
            let cap = 8 * work.len() + 16;
            let mut i = 0;
            while i < work.len() && i < cap {
                let id = work[i];
                i += 1;
                if !m.computation(cid).contains(id) {
                    continue;
                }
                if let Some(rewrite) = simplify(m, cid, id) {
                    changed = true;
                    match rewrite {
                        Rewrite::ReplaceWith(new) => {
                            let c = m.computation_mut(cid);
                            c.replace_all_uses(id, new);
                            remove_if_dead(c, id);
                            work.push(new);
                            work.extend(m.computation(cid).users(new));
                        }
                        Rewrite::InPlace => work.push(id),
                    }
                }
            }
        }
        Ok(changed)
    }
}

enum Rewrite {
    /// Every use of the instruction now uses this one.
    ReplaceWith(InstrId),
    /// The instruction itself was changed (attributes or operands).
    InPlace,
}

fn shape_of(m: &Module, c: ComputationId, id: InstrId) -> Shape {
    m.computation(c).get(id).shape.clone()
}

fn is_scalar(s: &Shape) -> bool {
    s.as_array().is_some_and(|a| a.rank() == 0)
}

/// If `id` is `broadcast(s)` of a scalar `s`, returns `s`.
fn scalar_broadcast_operand(m: &Module, c: ComputationId, id: InstrId) -> Option<InstrId> {
    let comp = m.computation(c);
    let instr = comp.get(id);
    match instr.op {
        Op::Broadcast { .. } if is_scalar(&comp.get(instr.operand(0)).shape) => {
            Some(instr.operand(0))
        }
        _ => None,
    }
}

fn simplify(m: &mut Module, c: ComputationId, id: InstrId) -> Option<Rewrite> {
    let comp = m.computation(c);
    let instr = comp.get(id);
    let shape = instr.shape.clone();
    let ops: Vec<InstrId> = instr.operands().to_vec();
    let op = instr.op.clone();
    let metadata = instr.metadata.clone();
    let same_shape = |x: InstrId| comp.get(x).shape == shape;
    let is_int = shape
        .element_type()
        .is_some_and(|t| t.is_integer() || t.is_pred());
    let value = |x: InstrId| uniform_constant(comp, x);
    let replace = |x: InstrId| Some(Rewrite::ReplaceWith(x));
    match &op {
        Op::Binary(b) => {
            let (l, r) = (ops[0], ops[1]);
            match b {
                BinaryOp::Add => {
                    if value(r) == Some(0.0) && same_shape(l) {
                        return replace(l);
                    }
                    if value(l) == Some(0.0) && same_shape(r) {
                        return replace(r);
                    }
                }
                BinaryOp::Subtract if value(r) == Some(0.0) && same_shape(l) => return replace(l),
                BinaryOp::Multiply => {
                    if value(r) == Some(1.0) && same_shape(l) {
                        return replace(l);
                    }
                    if value(l) == Some(1.0) && same_shape(r) {
                        return replace(r);
                    }
                    if is_int && value(r) == Some(0.0) && same_shape(r) {
                        return replace(r);
                    }
                    if is_int && value(l) == Some(0.0) && same_shape(l) {
                        return replace(l);
                    }
                }
                BinaryOp::Divide if value(r) == Some(1.0) && same_shape(l) => return replace(l),
                _ => {}
            }
            None
        }
        Op::Unary(u @ (UnaryOp::Negate | UnaryOp::Not)) => {
            let inner = comp.get(ops[0]);
            if inner.op == Op::Unary(*u) && comp.get(inner.operand(0)).shape == shape {
                return replace(inner.operand(0));
            }
            scalar_broadcast_through(m, c, id)
        }
        Op::Unary(_) => scalar_broadcast_through(m, c, id),
        Op::Convert => {
            if same_shape(ops[0]) {
                return replace(ops[0]);
            }
            scalar_broadcast_through(m, c, id)
        }
        Op::Copy => same_shape(ops[0]).then(|| Rewrite::ReplaceWith(ops[0])),
        Op::Reshape | Op::Bitcast => {
            if same_shape(ops[0]) {
                return replace(ops[0]);
            }
            let inner = comp.get(ops[0]);
            if op == Op::Reshape && inner.op == Op::Reshape {
                let x = inner.operand(0);
                let new = add_instr(m, c, Op::Reshape, shape, &[x], metadata);
                return replace(new);
            }
            if op == Op::Reshape {
                if let Some(r) = reshape_of_leading_concat(m, c, id) {
                    return Some(r);
                }
            }
            rebroadcast_scalar(m, c, id)
        }
        Op::Transpose { permutation } => {
            if permutation.iter().enumerate().all(|(i, &p)| i as i64 == p) && same_shape(ops[0]) {
                return replace(ops[0]);
            }
            if let Op::Transpose { permutation: inner } = &comp.get(ops[0]).op {
                // out dim i = mid dim outer[i] = x dim inner[outer[i]]
                let composed: Vec<i64> = permutation.iter().map(|&p| inner[p as usize]).collect();
                let x = comp.get(ops[0]).operand(0);
                let new = add_instr(
                    m,
                    c,
                    Op::Transpose {
                        permutation: composed,
                    },
                    shape,
                    &[x],
                    metadata,
                );
                return replace(new);
            }
            let folded = fold_transpose_of_convolution(m, c, id, permutation)
                .or_else(|| fold_transpose_of_dot(m, c, id, permutation));
            if let Some(x) = folded {
                return replace(x);
            }
            rebroadcast_scalar(m, c, id)
        }
        Op::Broadcast { dimensions } => {
            let in_shape = shape_of(m, c, ops[0]);
            let identity = dimensions.iter().enumerate().all(|(i, &d)| i as i64 == d);
            if identity && in_shape == shape {
                return replace(ops[0]);
            }
            if let Op::Broadcast { dimensions: inner } = &comp.get(ops[0]).op {
                let composed: Vec<i64> = inner.iter().map(|&d| dimensions[d as usize]).collect();
                let x = comp.get(ops[0]).operand(0);
                let new = add_instr(
                    m,
                    c,
                    Op::Broadcast {
                        dimensions: composed,
                    },
                    shape,
                    &[x],
                    metadata,
                );
                return replace(new);
            }
            None
        }
        Op::Slice { dims } => {
            let in_shape = shape_of(m, c, ops[0]);
            let full = dims
                .iter()
                .zip(in_shape.dims())
                .all(|(d, &n)| d.start == 0 && d.limit == n && d.stride == 1);
            if full && in_shape == shape {
                return replace(ops[0]);
            }
            if let Op::Slice { dims: inner } = &comp.get(ops[0]).op {
                let composed: Vec<SliceDim> = dims
                    .iter()
                    .zip(inner)
                    .zip(shape.dims())
                    .map(|((outer, inner), &count)| {
                        let start = inner.start + outer.start * inner.stride;
                        let stride = inner.stride * outer.stride;
                        let limit = if count == 0 {
                            start
                        } else {
                            start + (count - 1) * stride + 1
                        };
                        SliceDim {
                            start,
                            limit,
                            stride,
                        }
                    })
                    .collect();
                let x = comp.get(ops[0]).operand(0);
                let new = add_instr(m, c, Op::Slice { dims: composed }, shape, &[x], metadata);
                return replace(new);
            }
            rebroadcast_scalar(m, c, id)
        }
        Op::Concatenate { .. } if ops.len() == 1 && same_shape(ops[0]) => replace(ops[0]),
        Op::Pad { dims }
            if dims
                .iter()
                .all(|d| d.low == 0 && d.high == 0 && d.interior == 0)
                && same_shape(ops[0]) =>
        {
            replace(ops[0])
        }
        Op::GetTupleElement { index } => {
            let t = comp.get(ops[0]);
            (t.op == Op::Tuple && comp.get(t.operand(*index as usize)).shape == shape)
                .then(|| Rewrite::ReplaceWith(t.operand(*index as usize)))
        }
        Op::Select if ops[1] == ops[2] && same_shape(ops[1]) => replace(ops[1]),
        Op::Reduce {
            dimensions,
            to_apply,
        } => reduce_of_unit_dims(m, c, id, dimensions, *to_apply),
        Op::Dot(dnums) => fold_transpose_into_dot(m, c, id, dnums),
        Op::Convolution(conv) => fold_transpose_into_convolution(m, c, id, conv),
        _ => None,
    }
}

/// `reshape(concatenate(a, b, ...))` along dimension 0, to a shape `[d, rest...]` whose rows
/// each lie in one operand (every operand's element count a multiple of `rest`'s), is
/// `concatenate(reshape(a), reshape(b), ...)` along the rows. Row-major, a concatenate along
/// dimension 0 lays its operands end to end, so the values are the same. The second form
/// picks an operand once per row, where the first picked one per element, lane by lane in the
/// JIT's vector loops: the dropout mask's `reshape(concatenate(x0, x1))` of the two Threefry
/// words (tessel's `random_bits`, JAX's PRNG) was a scalar gather. Only when the concatenate
/// has no other user, so that nothing is computed twice.
fn reshape_of_leading_concat(m: &mut Module, c: ComputationId, id: InstrId) -> Option<Rewrite> {
    let comp = m.computation(c);
    let instr = comp.get(id);
    let concat = comp.get(instr.operand(0));
    if concat.op != (Op::Concatenate { dimension: 0 }) || comp.users(instr.operand(0)).len() != 1 {
        return None;
    }
    let out = instr.shape.as_array()?.clone();
    if out.rank() < 2 {
        return None;
    }
    let row: i64 = out.dims[1..].iter().product();
    if row == 0 {
        return None;
    }
    let mut pieces = Vec::new();
    for &o in concat.operands() {
        let count = comp.get(o).shape.as_array()?.element_count();
        if count % row != 0 {
            return None;
        }
        let mut dims = out.dims.clone();
        dims[0] = count / row;
        pieces.push((o, ArrayShape::new(out.element_type, &dims)));
    }
    let metadata = instr.metadata.clone();
    let reshaped: Vec<InstrId> = pieces
        .into_iter()
        .map(|(o, s)| add_instr(m, c, Op::Reshape, Shape::Array(s), &[o], metadata.clone()))
        .collect();
    let new = add_instr(
        m,
        c,
        Op::Concatenate { dimension: 0 },
        Shape::Array(out),
        &reshaped,
        metadata,
    );
    Some(Rewrite::ReplaceWith(new))
}

/// A reduce over dimensions of size 1 applies its reducer once per element:
/// `reduce(x, init)` is `f(broadcast(init), reshape(x))` when the reducer is one binary op `f`
/// of its parameters (and the `x+0`-style identities then remove the `f`).
fn reduce_of_unit_dims(
    m: &mut Module,
    c: ComputationId,
    id: InstrId,
    dimensions: &[i64],
    to_apply: ComputationId,
) -> Option<Rewrite> {
    let comp = m.computation(c);
    let instr = comp.get(id);
    if instr.operands().len() != 2 || !instr.shape.is_array() {
        return None;
    }
    let (x, init) = (instr.operand(0), instr.operand(1));
    let in_dims = comp.get(x).shape.dims().to_vec();
    if !dimensions
        .iter()
        .all(|&d| in_dims.get(d as usize) == Some(&1))
    {
        return None;
    }
    let region = m.computation(to_apply);
    let root = region.get(region.root());
    let Op::Binary(b) = root.op else {
        return None;
    };
    let (p0, p1) = (region.parameter(0)?, region.parameter(1)?);
    let init_first = match root.operands() {
        [a, b] if *a == p0 && *b == p1 => true,
        [a, b] if *a == p1 && *b == p0 => false,
        _ => return None,
    };
    let (shape, metadata) = (instr.shape.clone(), instr.metadata.clone());
    let r = add_instr(m, c, Op::Reshape, shape.clone(), &[x], metadata.clone());
    let bi = add_instr(
        m,
        c,
        Op::Broadcast { dimensions: vec![] },
        shape.clone(),
        &[init],
        metadata.clone(),
    );
    let operands = if init_first { [bi, r] } else { [r, bi] };
    let new = add_instr(m, c, Op::Binary(b), shape, &operands, metadata);
    Some(Rewrite::ReplaceWith(new))
}

/// `reshape/transpose/slice/bitcast(broadcast(s))` with scalar `s` is `broadcast(s)`.
fn rebroadcast_scalar(m: &mut Module, c: ComputationId, id: InstrId) -> Option<Rewrite> {
    let comp = m.computation(c);
    let instr = comp.get(id);
    let s = scalar_broadcast_operand(m, c, instr.operand(0))?;
    let shape = instr.shape.clone();
    let metadata = instr.metadata.clone();
    let new = add_instr(
        m,
        c,
        Op::Broadcast { dimensions: vec![] },
        shape,
        &[s],
        metadata,
    );
    Some(Rewrite::ReplaceWith(new))
}

/// `unary(broadcast(s))` with scalar `s` is `broadcast(unary(s))`: one element of work.
fn scalar_broadcast_through(m: &mut Module, c: ComputationId, id: InstrId) -> Option<Rewrite> {
    let comp = m.computation(c);
    let instr = comp.get(id);
    let s = scalar_broadcast_operand(m, c, instr.operand(0))?;
    if instr.shape.rank() == 0 {
        return None;
    }
    let et = instr.shape.element_type()?;
    let (op, shape, metadata) = (
        instr.op.clone(),
        instr.shape.clone(),
        instr.metadata.clone(),
    );
    let scalar = add_instr(
        m,
        c,
        op,
        Shape::Array(ArrayShape::scalar(et)),
        &[s],
        metadata.clone(),
    );
    let new = add_instr(
        m,
        c,
        Op::Broadcast { dimensions: vec![] },
        shape,
        &[scalar],
        metadata,
    );
    Some(Rewrite::ReplaceWith(new))
}

/// The transpose feeding operand `i` of `id`, as (transposed value, permutation).
fn transposed_operand(
    m: &Module,
    c: ComputationId,
    id: InstrId,
    i: usize,
) -> Option<(InstrId, Vec<i64>)> {
    let comp = m.computation(c);
    let o = comp.get(id).operand(i);
    match &comp.get(o).op {
        Op::Transpose { permutation } => Some((comp.get(o).operand(0), permutation.clone())),
        _ => None,
    }
}

/// `dot(transpose(a), b)`: dimension `d` of the transpose is dimension `perm[d]` of `a`. The
/// dot's output lists the free (non-batch, non-contracting) dimensions in increasing order,
/// so the fold is exact only when `perm` keeps the free dimensions in order.
fn fold_transpose_into_dot(
    m: &mut Module,
    c: ComputationId,
    id: InstrId,
    dnums: &DotDimensionNumbers,
) -> Option<Rewrite> {
    for side in 0..2 {
        let Some((x, perm)) = transposed_operand(m, c, id, side) else {
            continue;
        };
        let (batch, contracting) = if side == 0 {
            (&dnums.lhs_batch, &dnums.lhs_contracting)
        } else {
            (&dnums.rhs_batch, &dnums.rhs_contracting)
        };
        let free: Vec<i64> = (0..perm.len() as i64)
            .filter(|d| !batch.contains(d) && !contracting.contains(d))
            .map(|d| perm[d as usize])
            .collect();
        if free.windows(2).any(|w| w[0] > w[1]) {
            continue;
        }
        let map = |v: &Vec<i64>| v.iter().map(|&d| perm[d as usize]).collect::<Vec<i64>>();
        let mut new = dnums.clone();
        if side == 0 {
            new.lhs_batch = map(&dnums.lhs_batch);
            new.lhs_contracting = map(&dnums.lhs_contracting);
        } else {
            new.rhs_batch = map(&dnums.rhs_batch);
            new.rhs_contracting = map(&dnums.rhs_contracting);
        }
        let transpose = m.computation(c).get(id).operand(side);
        let comp = m.computation_mut(c);
        comp.get_mut(id).op = Op::Dot(new);
        comp.set_operand(id, side, x);
        remove_if_dead(comp, transpose);
        return Some(Rewrite::InPlace);
    }
    None
}

/// `convolution(transpose(a), k)` or `convolution(x, transpose(k))`: every dimension of a
/// convolution operand is labelled, so the transpose folds into the labels.
fn fold_transpose_into_convolution(
    m: &mut Module,
    c: ComputationId,
    id: InstrId,
    conv: &Convolution,
) -> Option<Rewrite> {
    for side in 0..2 {
        let Some((x, perm)) = transposed_operand(m, c, id, side) else {
            continue;
        };
        let p = |d: i64| perm[d as usize];
        let mut new = conv.clone();
        let dn = &mut new.dims;
        if side == 0 {
            dn.input_batch = p(dn.input_batch);
            dn.input_feature = p(dn.input_feature);
            dn.input_spatial = dn.input_spatial.iter().map(|&d| p(d)).collect();
        } else {
            dn.kernel_input_feature = p(dn.kernel_input_feature);
            dn.kernel_output_feature = p(dn.kernel_output_feature);
            dn.kernel_spatial = dn.kernel_spatial.iter().map(|&d| p(d)).collect();
        }
        let transpose = m.computation(c).get(id).operand(side);
        let comp = m.computation_mut(c);
        comp.get_mut(id).op = Op::Convolution(new);
        comp.set_operand(id, side, x);
        remove_if_dead(comp, transpose);
        return Some(Rewrite::InPlace);
    }
    None
}
