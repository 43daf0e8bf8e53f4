//! Gradients of elementwise ops: math, arithmetic, max/min, select, clamp, convert.
//!
//! Formulas follow JAX's JVP rules transposed. Where JAX makes a choice at a point where the
//! function is not differentiable, so do we: `abs` uses `sign(x)` (0 at 0), `max`/`min` split
//! the gradient in half between tied operands, `clamp` gives 0 at the bounds.
//!
//! One exception: `max(x, 0)` with a constant zero is ReLU (`tf.nn.relu` and `jax.nn.relu`
//! both lower to it, and the HLO cannot tell it from `jnp.maximum(x, 0.)`). Its gradient is
//! the one both frameworks give ReLU, `g` where `x > 0` and 0 elsewhere (TF's `ReluGrad`,
//! `jax.nn.relu`'s custom JVP), so at `x == 0` it is 0, not the tie split's `g / 2`. That is
//! what a ported TF model trains with (a conv layer's output is exactly 0 wherever its input
//! patch and bias are zero, as at MNIST's borders on the first step), and it is the form the
//! JIT's max-pool gradient routine computes (`select(x > 0, ., 0)`).

use super::cotangent::Cot;
use super::emit::{Emitter, R};
use super::{non_differentiable, Contributions, Node};
use crate::ir::{BinaryOp, ComparisonDirection as Dir, InstrId, Literal, Op, UnaryOp};

pub(crate) fn vjp(em: &mut Emitter, node: &Node, g: InstrId) -> R<Contributions> {
    match &node.instr.op {
        Op::Unary(u) => unary(em, node, *u, g),
        Op::Binary(b) => binary(em, node, *b, g),
        Op::Select => select(em, node, g),
        Op::Clamp => clamp(em, node, g),
        Op::Convert => {
            let x = node.operand(0);
            let ty = em.element_type(x)?;
            if ty.is_float() && node.wants(0) {
                Ok(vec![(x, Cot::Value(em.convert(g, ty)?))])
            } else {
                Ok(vec![])
            }
        }
        Op::Copy => Ok(node.to_operand(0, g)),
        _ => Err(non_differentiable(em, node)),
    }
}

fn unary(em: &mut Emitter, node: &Node, op: UnaryOp, g: InstrId) -> R<Contributions> {
    use UnaryOp::*;
    let x = node.operand(0);
    let y = node.id;
    let dx = match op {
        Abs => {
            let s = em.unary(Sign, x)?;
            em.mul(g, s)?
        }
        Negate => em.neg(g)?,
        Exp => em.mul(g, y)?,
        Expm1 => {
            let y1 = em.add_const(y, 1.0)?;
            em.mul(g, y1)?
        }
        Log => em.div(g, x)?,
        Log1p => {
            let x1 = em.add_const(x, 1.0)?;
            em.div(g, x1)?
        }
        Tanh => {
            // 1 - y^2
            let yy = em.mul(y, y)?;
            let one = em.full_like(y, 1.0)?;
            let d = em.sub(one, yy)?;
            em.mul(g, d)?
        }
        Logistic => {
            // y (1 - y)
            let one = em.full_like(y, 1.0)?;
            let omy = em.sub(one, y)?;
            let d = em.mul(y, omy)?;
            em.mul(g, d)?
        }
        Sqrt => {
            // 1 / (2 sqrt x)
            let twice = em.mul_const(y, 2.0)?;
            em.div(g, twice)?
        }
        Rsqrt => {
            // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y / x
            let yx = em.div(y, x)?;
            let d = em.mul_const(yx, -0.5)?;
            em.mul(g, d)?
        }
        Cbrt => {
            // d x^(1/3) = 1/3 x^(-2/3) = 1 / (3 y^2)
            let yy = em.mul(y, y)?;
            let d = em.mul_const(yy, 3.0)?;
            em.div(g, d)?
        }
        Sine => {
            let c = em.unary(Cosine, x)?;
            em.mul(g, c)?
        }
        Cosine => {
            let s = em.unary(Sine, x)?;
            let ns = em.neg(s)?;
            em.mul(g, ns)?
        }
        Tan => {
            // 1 + tan^2
            let yy = em.mul(y, y)?;
            let d = em.add_const(yy, 1.0)?;
            em.mul(g, d)?
        }
        Erf => {
            // 2 / sqrt(pi) exp(-x^2)
            let xx = em.mul(x, x)?;
            let nxx = em.neg(xx)?;
            let e = em.unary(Exp, nxx)?;
            let d = em.mul_const(e, std::f64::consts::FRAC_2_SQRT_PI)?;
            em.mul(g, d)?
        }
        // Piecewise constant: zero gradient, as in JAX.
        Floor | Ceil | RoundNearestEven | RoundNearestAfz | Sign => return Ok(vec![]),
        Not | IsFinite | PopCnt | Clz | Real | Imag => return Err(non_differentiable(em, node)),
    };
    Ok(node.to_operand(0, dx))
}

fn binary(em: &mut Emitter, node: &Node, op: BinaryOp, g: InstrId) -> R<Contributions> {
    use BinaryOp::*;
    let a = node.operand(0);
    let b = node.operand(1);
    let y = node.id;
    let mut out = Contributions::new();
    match op {
        Add => {
            out.extend(node.to_operand(0, g));
            out.extend(node.to_operand(1, g));
        }
        Subtract => {
            out.extend(node.to_operand(0, g));
            if node.wants(1) {
                out.extend(node.to_operand(1, em.neg(g)?));
            }
        }
        Multiply => {
            if node.wants(0) {
                out.extend(node.to_operand(0, em.mul(g, b)?));
            }
            if node.wants(1) {
                out.extend(node.to_operand(1, em.mul(g, a)?));
            }
        }
        Divide => {
            if node.wants(0) {
                out.extend(node.to_operand(0, em.div(g, b)?));
            }
            if node.wants(1) {
                // d(a/b)/db = -(a/b)/b
                let yb = em.div(y, b)?;
                let gyb = em.mul(g, yb)?;
                out.extend(node.to_operand(1, em.neg(gyb)?));
            }
        }
        Remainder => {
            out.extend(node.to_operand(0, g));
            if node.wants(1) {
                // rem(a, b) = a - b trunc(a/b): d/db = -trunc(a/b)
                let q = em.div(a, b)?;
                let s = em.unary(UnaryOp::Sign, q)?;
                let aq = em.unary(UnaryOp::Abs, q)?;
                let f = em.unary(UnaryOp::Floor, aq)?;
                let t = em.mul(s, f)?;
                let gt = em.mul(g, t)?;
                out.extend(node.to_operand(1, em.neg(gt)?));
            }
        }
        Maximum if relu_input(em, a, b).is_some() => {
            // ReLU, `max(x, 0)`: TF's ReluGrad and jax.nn.relu's rule, g where x > 0 (0 at
            // x == 0), not a general max's tie split (module doc).
            let (x, k) = relu_input(em, a, b).expect("checked by the guard");
            if node.wants(k) {
                let zero = em.full_like(x, 0.0)?;
                let positive = em.compare(Dir::Gt, x, zero)?;
                let zero_g = em.full_like(g, 0.0)?;
                out.extend(node.to_operand(k, em.select(positive, g, zero_g)?));
            }
        }
        Maximum | Minimum => {
            if node.wants(0) {
                let share = balanced_share(em, a, y, b)?;
                out.extend(node.to_operand(0, em.mul(g, share)?));
            }
            if node.wants(1) {
                let share = balanced_share(em, b, y, a)?;
                out.extend(node.to_operand(1, em.mul(g, share)?));
            }
        }
        Power => {
            let zero = em.full_like(a, 0.0)?;
            if node.wants(0) {
                // b a^(b-1), and 0 where b == 0 (so that 0^0 has no NaN gradient)
                let bm1 = em.add_const(b, -1.0)?;
                let p = em.binary(Power, a, bm1)?;
                let d = em.mul(b, p)?;
                let b_zero = em.compare(Dir::Eq, b, zero)?;
                let d = em.select(b_zero, zero, d)?;
                out.extend(node.to_operand(0, em.mul(g, d)?));
            }
            if node.wants(1) {
                // log(a) a^b, with log(1) in place of log(0) as JAX does
                let one = em.full_like(a, 1.0)?;
                let a_zero = em.compare(Dir::Eq, a, zero)?;
                let safe = em.select(a_zero, one, a)?;
                let l = em.unary(UnaryOp::Log, safe)?;
                let d = em.mul(l, y)?;
                out.extend(node.to_operand(1, em.mul(g, d)?));
            }
        }
        Atan2 => {
            // atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
            let aa = em.mul(a, a)?;
            let bb = em.mul(b, b)?;
            let denom = em.add(aa, bb)?;
            let gd = em.div(g, denom)?;
            if node.wants(0) {
                out.extend(node.to_operand(0, em.mul(gd, b)?));
            }
            if node.wants(1) {
                let ga = em.mul(gd, a)?;
                out.extend(node.to_operand(1, em.neg(ga)?));
            }
        }
        And | Or | Xor | ShiftLeft | ShiftRightLogical | ShiftRightArithmetic => {
            return Err(non_differentiable(em, node))
        }
    }
    Ok(out)
}

/// For `max(a, b)` where one operand is a floating-point splat of zero (a constant, or a
/// broadcast of a scalar constant): the other operand and its operand number.
fn relu_input(em: &Emitter, a: InstrId, b: InstrId) -> Option<(InstrId, usize)> {
    let comp = em.module.computation(em.comp);
    let zero_splat = |id: InstrId| {
        let instr = comp.get(id);
        let constant = match &instr.op {
            Op::Broadcast { .. } => comp.get(*instr.operands().first()?),
            _ => instr,
        };
        match &constant.op {
            Op::Constant(Literal::Array(c)) => Some(
                c.shape.element_type.is_float()
                    && !c.is_empty()
                    && (0..c.len()).all(|i| c.data.get_f64(i) == 0.0),
            ),
            _ => None,
        }
    };
    if zero_splat(b) == Some(true) {
        Some((a, 0))
    } else if zero_splat(a) == Some(true) {
        Some((b, 1))
    } else {
        None
    }
}

/// JAX's `_balanced_eq(x, z, y)`: 1 where x alone attains z, 1/2 where x and y both do, else 0.
fn balanced_share(em: &mut Emitter, x: InstrId, z: InstrId, y: InstrId) -> R<InstrId> {
    let x_eq = em.compare(Dir::Eq, x, z)?;
    let y_eq = em.compare(Dir::Eq, y, z)?;
    let one = em.full_like(z, 1.0)?;
    let half = em.full_like(z, 0.5)?;
    let zero = em.full_like(z, 0.0)?;
    let tie = em.select(y_eq, half, one)?;
    em.select(x_eq, tie, zero)
}

fn select(em: &mut Emitter, node: &Node, g: InstrId) -> R<Contributions> {
    let p = node.operand(0);
    let zero = em.full_like(g, 0.0)?;
    let mut out = Contributions::new();
    if node.wants(1) {
        out.extend(node.to_operand(1, em.select(p, g, zero)?));
    }
    if node.wants(2) {
        out.extend(node.to_operand(2, em.select(p, zero, g)?));
    }
    Ok(out)
}

/// `clamp(lo, x, hi)`; `lo` and `hi` may be scalars.
fn clamp(em: &mut Emitter, node: &Node, g: InstrId) -> R<Contributions> {
    let (lo, x, hi) = (node.operand(0), node.operand(1), node.operand(2));
    let zero = em.full_like(g, 0.0)?;
    let mut out = Contributions::new();
    if node.wants(0) {
        // lo wins where lo > x and lo < hi
        let c1 = em.compare(Dir::Gt, lo, x)?;
        let c2 = em.compare(Dir::Lt, lo, hi)?;
        let c2 = broadcast_pred_like(em, c2, c1)?;
        let c = em.and(c1, c2)?;
        let d = em.select(c, g, zero)?;
        out.push((lo, Cot::Value(sum_to_operand(em, d, lo)?)));
    }
    if node.wants(1) {
        let c1 = em.compare(Dir::Gt, x, lo)?;
        let c2 = em.compare(Dir::Lt, x, hi)?;
        let c = em.and(c1, c2)?;
        out.extend(node.to_operand(1, em.select(c, g, zero)?));
    }
    if node.wants(2) {
        let c = em.compare(Dir::Lt, hi, x)?;
        let d = em.select(c, g, zero)?;
        out.push((hi, Cot::Value(sum_to_operand(em, d, hi)?)));
    }
    Ok(out)
}

fn broadcast_pred_like(em: &mut Emitter, p: InstrId, like: InstrId) -> R<InstrId> {
    let dims = em.dims(like)?;
    if em.dims(p)? == dims {
        Ok(p)
    } else {
        em.broadcast(p, &dims, &[])
    }
}

/// Sums `d` down to a scalar when `operand` is a scalar that was broadcast.
fn sum_to_operand(em: &mut Emitter, d: InstrId, operand: InstrId) -> R<InstrId> {
    if em.array(operand)?.rank() == 0 && em.array(d)?.rank() > 0 {
        em.sum_all(d)
    } else {
        Ok(d)
    }
}
