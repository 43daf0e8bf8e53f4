//! The algebraic simplifier's folds of a transpose of a result: `transpose(convolution)` and
//! `transpose(dot)` where the transpose is the only user become one convolution writing the
//! transposed layout, or one dot with its operands swapped. Each returns the instruction that
//! now computes the transpose's value.

use crate::ir::{ComputationId, DotDimensionNumbers, InstrId, Module, Op};

/// `transpose(convolution(..))` where the transpose is the convolution's only user: the
/// convolution writes the transposed layout itself. Output dimension `i` of the transpose is
/// dimension `perm[i]` of the convolution, so a role at convolution dimension `d` moves to
/// `inverse(perm)[d]`. Backends pick routines by these labels, so the gradient convolutions of
/// an NHWC model then look like the forward's (`b01f` outputs) instead of writing `bf01` for a
/// strided transpose to read back.
pub(super) fn fold_transpose_of_convolution(
    m: &mut Module,
    c: ComputationId,
    id: InstrId,
    perm: &[i64],
) -> Option<InstrId> {
    let comp = m.computation(c);
    let x = comp.get(id).operand(0);
    let Op::Convolution(conv) = &comp.get(x).op else {
        return None;
    };
    if comp.users(x) != [id] || comp.root() == x {
        return None;
    }
    let mut inv = vec![0i64; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as i64;
    }
    let mut new = conv.clone();
    let dn = &mut new.dims;
    dn.output_batch = inv[dn.output_batch as usize];
    dn.output_feature = inv[dn.output_feature as usize];
    dn.output_spatial = dn.output_spatial.iter().map(|&d| inv[d as usize]).collect();
    let shape = comp.get(id).shape.clone();
    let comp = m.computation_mut(c);
    let instr = comp.get_mut(x);
    instr.op = Op::Convolution(new);
    instr.shape = shape;
    Some(x)
}

/// `transpose(dot(a, b))` where the transpose is the dot's only user and moves `b`'s free
/// dimensions before `a`'s (batch dimensions in place, each side's free dimensions in order):
/// that is `dot(b, a)`, which writes the transposed result itself (a weight gradient
/// `dot(g, x)^T` becomes `dot(x, g)`). The products and their order are the same.
pub(super) fn fold_transpose_of_dot(
    m: &mut Module,
    c: ComputationId,
    id: InstrId,
    perm: &[i64],
) -> Option<InstrId> {
    let comp = m.computation(c);
    let x = comp.get(id).operand(0);
    let Op::Dot(d) = &comp.get(x).op else {
        return None;
    };
    if comp.users(x) != [id] || comp.root() == x {
        return None;
    }
    let (a, b) = (comp.get(x).operand(0), comp.get(x).operand(1));
    let rank = |o: InstrId| comp.get(o).shape.dims().len() as i64;
    let nb = d.lhs_batch.len() as i64;
    let nl = rank(a) - nb - d.lhs_contracting.len() as i64;
    let nr = rank(b) - nb - d.rhs_contracting.len() as i64;
    let swapped: Vec<i64> = (0..nb)
        .chain(nb + nl..nb + nl + nr)
        .chain(nb..nb + nl)
        .collect();
    if swapped != perm || nl == 0 || nr == 0 {
        return None;
    }
    let new = DotDimensionNumbers {
        lhs_batch: d.rhs_batch.clone(),
        rhs_batch: d.lhs_batch.clone(),
        lhs_contracting: d.rhs_contracting.clone(),
        rhs_contracting: d.lhs_contracting.clone(),
    };
    let shape = comp.get(id).shape.clone();
    let comp = m.computation_mut(c);
    let instr = comp.get_mut(x);
    instr.op = Op::Dot(new);
    instr.shape = shape;
    // `operand_precision={p_lhs,p_rhs}` follows its operands.
    for (k, v) in instr.extra_attrs.iter_mut() {
        if k == "operand_precision" {
            let inner = v.trim_matches(|ch| ch == '{' || ch == '}');
            if let Some((l, r)) = inner.split_once(',') {
                *v = format!("{{{},{}}}", r.trim(), l.trim());
            }
        }
    }
    comp.set_operand(x, 0, b);
    comp.set_operand(x, 1, a);
    Some(x)
}
