//! Finds Threefry-2x32's 20 rounds on arrays and replaces them with one custom call,
//! [`THREEFRY_ROUNDS_TARGET`], that the JIT runs as a vectorized routine
//! (`tessel_kernels::threefry`) and the interpreter element by element.
//!
//! tessel's `random_bits` and JAX's PRNG both trace Threefry as about 130 elementwise u32
//! instructions per pair of words. Fused, they run as 4-lane generated code with each rotate
//! spelled as two shifts and an or: a dropout mask's rounds took as long as one of the MLP's
//! 1024-wide products. The routine runs 16 lanes with a one-instruction rotate.
//!
//! What is matched: starting from the second output word, twenty rounds `x0 += x1;
//! x1 = rotl(x1, r) ^ x0` with Threefry's rotation amounts, every fourth followed by adding a
//! broadcast scalar to each word (JAX adds two to the second word, which become one scalar
//! sum), and before the first round at most one such add per word. The added scalars are
//! operands of the call, so the key schedule that computed them is left as it was and any key
//! gives the same bits. The counters are operands too: a broadcast scalar is passed as the
//! scalar.
//!
//! Limits: only chains on arrays of at least [`MIN_ELEMENTS`] elements (the step key's
//! Threefry on scalars stays as it is); rotations must be `or(shift-left(x, r),
//! shift-right-logical(x, 32 - r))` by constants, in either operand order. A chain that
//! deviates anywhere is left alone.

use super::util::{add_instr, pin_roots, uniform_constant};
use super::{Pass, PassError};
use crate::ir::{
    Array, ArrayShape, BinaryOp, Computation, ComputationId, ElementType, InstrId, Literal, Module,
    Op, Shape,
};

/// The custom call's target. Operands: the two counter words (u32 scalars, or u32 arrays of
/// the result's dimensions), then twelve u32 scalars: the words added before the first round,
/// and after every fourth round. Result: a tuple of the two output words.
pub const THREEFRY_ROUNDS_TARGET: &str = "tessel.threefry2x32_rounds";

/// Threefry-2x32's rotation amounts: rounds `4k+1..4k+4` use row `k % 2`.
pub const THREEFRY_ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

/// Arrays smaller than this keep their rounds as instructions.
pub const MIN_ELEMENTS: i64 = 1024;

/// Threefry's key-schedule parity constant.
pub const THREEFRY_PARITY: u32 = 0x1BD1_1BDA;

/// The twelve added words of Threefry-2x32-20 under `key` (its key schedule), in the order
/// [`rounds`] and the custom call take them.
pub fn key_words(key: [u32; 2]) -> [u32; 12] {
    let ks = [key[0], key[1], key[0] ^ key[1] ^ THREEFRY_PARITY];
    let mut added = [ks[0], ks[1], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    for k in 0..5 {
        added[2 + 2 * k] = ks[(k + 1) % 3];
        added[3 + 2 * k] = ks[(k + 2) % 3].wrapping_add(k as u32 + 1);
    }
    added
}

/// The rounds on one pair of words, as the custom call computes them: `x0 = c0 + added[0]`,
/// `x1 = c1 + added[1]`, then five times four rounds each followed by adding
/// `added[2 + 2k]` and `added[3 + 2k]`, all wrapping.
pub fn rounds(c0: u32, c1: u32, added: &[u32; 12]) -> [u32; 2] {
    let mut x0 = c0.wrapping_add(added[0]);
    let mut x1 = c1.wrapping_add(added[1]);
    for (k, block) in added[2..].chunks_exact(2).enumerate() {
        for &r in &THREEFRY_ROTATIONS[k % 2] {
            x0 = x0.wrapping_add(x1);
            x1 = x1.rotate_left(r) ^ x0;
        }
        x0 = x0.wrapping_add(block[0]);
        x1 = x1.wrapping_add(block[1]);
    }
    [x0, x1]
}

/// The pass: see the module documentation.
#[derive(Default)]
pub struct ThreefryRounds;

impl Pass for ThreefryRounds {
    fn name(&self) -> &'static str {
        "threefry-rounds"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for cid in m.computation_ids().collect::<Vec<_>>() {
            for id in m.computation(cid).post_order() {
                if !m.computation(cid).contains(id) {
                    continue;
                }
                if let Some(chain) = match_chain(m.computation(cid), id) {
                    replace_chain(m, cid, &chain);
                    changed = true;
                }
            }
        }
        Ok(changed)
    }
}

/// A matched chain: the instructions giving the two output words, the counters, and the
/// scalars added (each a list, summed).
struct Chain {
    out: [InstrId; 2],
    counters: [InstrId; 2],
    added: [Vec<InstrId>; 12],
}

/// If `b` is the second output word of a Threefry chain, the chain.
fn match_chain(c: &Computation, b: InstrId) -> Option<Chain> {
    let shape = c.get(b).shape.as_array()?.clone();
    if shape.element_type != ElementType::U32 || shape.element_count() < MIN_ELEMENTS {
        return None;
    }
    let mut added: [Vec<InstrId>; 12] = Default::default();
    // The last injection into x1: one or two added scalars.
    let (x1, q) = peel_adds(c, b, 2, &shape);
    if q.is_empty() {
        return None;
    }
    added[11] = q;
    let Op::Binary(BinaryOp::Xor) = c.get(x1).op else {
        return None;
    };
    // x0 after the last round is the xor's other operand; the first output word adds to it.
    let x0_last = round_sum(c, x1)?;
    let a = c.users(x0_last).into_iter().find(|&u| {
        let (inner, p) = peel_adds(c, u, 1, &shape);
        inner == x0_last && p.len() == 1
    })?;
    added[10] = peel_adds(c, a, 1, &shape).1;
    let (mut x0, mut x1) = (x0_last, x1);
    for k in (0..5).rev() {
        for &r in THREEFRY_ROTATIONS[k % 2].iter().rev() {
            (x0, x1) = undo_round(c, x0, x1, r, &shape)?;
        }
        let (p, q) = (peel_adds(c, x0, 1, &shape), peel_adds(c, x1, 2, &shape));
        if k > 0 {
            if p.1.is_empty() || q.1.is_empty() {
                return None;
            }
            added[2 * k] = p.1;
            added[2 * k + 1] = q.1;
        } else {
            // Before the first round a word may have nothing added.
            added[0] = p.1;
            added[1] = q.1;
        }
        (x0, x1) = (p.0, q.0);
    }
    let counters = [counter(c, x0, &shape)?, counter(c, x1, &shape)?];
    Some(Chain {
        out: [a, b],
        counters,
        added,
    })
}

/// `x`'s adds of broadcast u32 scalars peeled off, at most `most` of them: the instruction
/// under them and the scalars.
fn peel_adds(
    c: &Computation,
    x: InstrId,
    most: usize,
    shape: &ArrayShape,
) -> (InstrId, Vec<InstrId>) {
    let mut x = x;
    let mut scalars = Vec::new();
    while scalars.len() < most {
        let instr = c.get(x);
        if instr.op != Op::Binary(BinaryOp::Add) || instr.shape.as_array() != Some(shape) {
            break;
        }
        let (l, r) = (instr.operand(0), instr.operand(1));
        match (broadcast_scalar(c, r), broadcast_scalar(c, l)) {
            (Some(s), _) => {
                scalars.push(s);
                x = l;
            }
            (None, Some(s)) => {
                scalars.push(s);
                x = r;
            }
            _ => break,
        }
    }
    (x, scalars)
}

/// The u32 scalar `x` broadcasts, if it is a broadcast of one.
fn broadcast_scalar(c: &Computation, x: InstrId) -> Option<InstrId> {
    let instr = c.get(x);
    let Op::Broadcast { .. } = instr.op else {
        return None;
    };
    let s = instr.operand(0);
    let scalar = c.get(s).shape.as_array()?;
    (scalar.rank() == 0 && scalar.element_type == ElementType::U32).then_some(s)
}

/// For `x1 = xor(rotl(y, r), x0)`: `x0`, which must be `add(_, y)`.
fn round_sum(c: &Computation, x1: InstrId) -> Option<InstrId> {
    let instr = c.get(x1);
    let (l, r) = (instr.operand(0), instr.operand(1));
    [(l, r), (r, l)].into_iter().find_map(|(rot, sum)| {
        let (y, _) = rotated(c, rot)?;
        let s = c.get(sum);
        (s.op == Op::Binary(BinaryOp::Add) && s.operands().contains(&y)).then_some(sum)
    })
}

/// One round backwards: `(x0, x1)` after a round with rotation `r` gives the words before it.
fn undo_round(
    c: &Computation,
    x0: InstrId,
    x1: InstrId,
    r: u32,
    shape: &ArrayShape,
) -> Option<(InstrId, InstrId)> {
    let xor = c.get(x1);
    if xor.op != Op::Binary(BinaryOp::Xor) || xor.shape.as_array() != Some(shape) {
        return None;
    }
    let (a, b) = (xor.operand(0), xor.operand(1));
    let rot = if b == x0 {
        a
    } else if a == x0 {
        b
    } else {
        return None;
    };
    let (y, amount) = rotated(c, rot)?;
    if amount != r {
        return None;
    }
    let sum = c.get(x0);
    if sum.op != Op::Binary(BinaryOp::Add) {
        return None;
    }
    let before = match sum.operands() {
        [p, q] if *q == y => *p,
        [p, q] if *p == y => *q,
        _ => return None,
    };
    let same = |x: InstrId| c.get(x).shape.as_array() == Some(shape);
    (same(before) && same(y)).then_some((before, y))
}

/// For `or(shift-left(y, r), shift-right-logical(y, 32 - r))` by constants: `(y, r)`.
fn rotated(c: &Computation, x: InstrId) -> Option<(InstrId, u32)> {
    let or = c.get(x);
    if or.op != Op::Binary(BinaryOp::Or) {
        return None;
    }
    let shift = |id: InstrId, op: BinaryOp| {
        let s = c.get(id);
        (s.op == Op::Binary(op)).then(|| (s.operand(0), uniform_constant(c, s.operand(1))))
    };
    let (l, r) = (or.operand(0), or.operand(1));
    [(l, r), (r, l)].into_iter().find_map(|(left, right)| {
        let (y, Some(amount)) = shift(left, BinaryOp::ShiftLeft)? else {
            return None;
        };
        let (y2, Some(back)) = shift(right, BinaryOp::ShiftRightLogical)? else {
            return None;
        };
        let ok = y == y2 && (1.0..32.0).contains(&amount) && amount + back == 32.0;
        ok.then_some((y, amount as u32))
    })
}

/// A counter word: the scalar a broadcast spreads, or the array itself.
fn counter(c: &Computation, x: InstrId, shape: &ArrayShape) -> Option<InstrId> {
    if let Some(s) = broadcast_scalar(c, x) {
        return Some(s);
    }
    (c.get(x).shape.as_array() == Some(shape)).then_some(x)
}

/// Replaces the chain's two output words with the custom call's.
fn replace_chain(m: &mut Module, cid: ComputationId, chain: &Chain) {
    let comp = m.computation(cid);
    let b = comp.get(chain.out[1]);
    let (shape, metadata) = (b.shape.clone(), b.metadata.clone());
    let scalar = Shape::Array(ArrayShape::scalar(ElementType::U32));
    let mut operands = chain.counters.to_vec();
    let mut zero = None;
    for list in &chain.added {
        let sum = match list.as_slice() {
            [] => *zero.get_or_insert_with(|| {
                let literal = Literal::Array(Array::zeros(ArrayShape::scalar(ElementType::U32)));
                let op = Op::Constant(literal);
                add_instr(m, cid, op, scalar.clone(), &[], metadata.clone())
            }),
            [one] => *one,
            [first, rest @ ..] => rest.iter().fold(*first, |acc, &s| {
                let op = Op::Binary(BinaryOp::Add);
                add_instr(m, cid, op, scalar.clone(), &[acc, s], metadata.clone())
            }),
        };
        operands.push(sum);
    }
    let call = add_instr(
        m,
        cid,
        Op::CustomCall {
            target: THREEFRY_ROUNDS_TARGET.to_string(),
            has_side_effect: false,
            backend_config: None,
            called: vec![],
        },
        Shape::Tuple(vec![shape.clone(), shape.clone()]),
        &operands,
        metadata.clone(),
    );
    for (k, &out) in chain.out.iter().enumerate() {
        let word = add_instr(
            m,
            cid,
            Op::GetTupleElement { index: k as i64 },
            shape.clone(),
            &[call],
            metadata.clone(),
        );
        m.computation_mut(cid).replace_all_uses(out, word);
    }
}
