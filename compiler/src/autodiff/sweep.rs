//! The reverse sweep: walks a computation from seed cotangents back to target instructions,
//! applying each instruction's gradient rule once all its users have contributed.
//!
//! **Masked cotangents are strong zeros.** A select sends its untaken operand an exact zero
//! cotangent; that operand's own gradient rules then multiply the zero by their local
//! derivatives, which can be infinite there (XLA's erfc expansion computes `1/|x|` in the
//! branch it does not take near 0), and `0 * inf` is NaN. The sweep marks the cotangents a
//! select (or clamp) produces, and everything computed from them, as *masked*; below a masked
//! cotangent `g`, each elementwise rule's result is `select(g == 0, 0, rule)`, so a zero
//! cotangent stays zero whatever the derivative. This is JAX's "double where" done by the
//! differentiator: the gradient of a piecewise function is the gradient of the piece taken.
//! Limit: where a masked cotangent is zero and the derivative is genuinely NaN or infinite,
//! tessel gives 0 where JAX's own (unmasked) rule would give NaN.

use super::cotangent::{accumulate, Cot};
use super::emit::{Emitter, R};
use super::{vjp, Node};
use crate::ir::{ComparisonDirection, InstrId, Op};
use hashbrown::{HashMap, HashSet};

/// Cotangents of `targets` given cotangents `seeds` of later values in the emitter's
/// computation. Only instructions between the two (descendants of a target that a seed
/// depends on) are visited; the walk never looks past a target.
pub(crate) fn backprop(
    em: &mut Emitter,
    seeds: Vec<(InstrId, Cot)>,
    targets: &[InstrId],
) -> R<Vec<Cot>> {
    let target_set: HashSet<InstrId> = targets.iter().copied().collect();
    let order = ancestors_in_order(em, seeds.iter().map(|(id, _)| *id), &target_set);
    let comp = em.module.computation(em.comp);
    let mut relevant: HashSet<InstrId> = HashSet::with_capacity(order.len());
    for &id in &order {
        if target_set.contains(&id) || comp.get(id).operands().iter().any(|o| relevant.contains(o))
        {
            relevant.insert(id);
        }
    }
    let mut cts: HashMap<InstrId, Cot> = HashMap::new();
    let mut masked: HashSet<InstrId> = HashSet::new();
    for (id, c) in seeds {
        if relevant.contains(&id) {
            add_cotangent(em, &mut cts, &mut masked, id, c)?;
        }
    }
    let saved = em.metadata.clone();
    for &id in order.iter().rev() {
        if target_set.contains(&id) || !relevant.contains(&id) {
            continue;
        }
        let Some(ct) = cts.remove(&id) else { continue };
        if ct.is_zero() {
            continue;
        }
        let instr = em.module.computation(em.comp).get(id).clone();
        let wanted = instr
            .operands()
            .iter()
            .map(|o| relevant.contains(o))
            .collect();
        let node = Node { id, instr, wanted };
        em.metadata = node.instr.metadata.clone();
        let g = match &ct {
            Cot::Value(g) => Some(*g),
            _ => None,
        };
        let contributions = vjp(em, &node, ct);
        let from_mask = matches!(node.instr.op, Op::Select | Op::Clamp);
        let below_mask = g.filter(|g| masked.contains(g));
        let mut out = Vec::new();
        for (operand, c) in contributions? {
            let c = match (c, below_mask) {
                (Cot::Value(c), Some(g)) => {
                    let elementwise = matches!(node.instr.op, Op::Unary(_) | Op::Binary(_));
                    let c = if elementwise {
                        strong_zero(em, g, c)?
                    } else {
                        c
                    };
                    masked.insert(c);
                    Cot::Value(c)
                }
                (Cot::Value(c), None) if from_mask => {
                    masked.insert(c);
                    Cot::Value(c)
                }
                (c, _) => c,
            };
            out.push((operand, c));
        }
        em.metadata = saved.clone();
        for (operand, c) in out {
            if relevant.contains(&operand) {
                add_cotangent(em, &mut cts, &mut masked, operand, c)?;
            }
        }
    }
    Ok(targets
        .iter()
        .map(|t| cts.get(t).cloned().unwrap_or(Cot::Zero))
        .collect())
}

/// `select(g == 0, 0, c)`: the contribution `c` computed from cotangent `g`, exactly zero where
/// `g` is (see the module doc). `c` has `g`'s shape (elementwise rules).
fn strong_zero(em: &mut Emitter, g: InstrId, c: InstrId) -> R<InstrId> {
    if em.shape(g) != em.shape(c) {
        return Ok(c);
    }
    let zero = em.full_like(g, 0.0)?;
    let is_zero = em.compare(ComparisonDirection::Eq, g, zero)?;
    em.select(is_zero, zero, c)
}

fn add_cotangent(
    em: &mut Emitter,
    cts: &mut HashMap<InstrId, Cot>,
    masked: &mut HashSet<InstrId>,
    id: InstrId,
    c: Cot,
) -> R<()> {
    let shape = em.shape(id).clone();
    let c = c.prune(&shape);
    if c.is_zero() {
        return Ok(());
    }
    let sum = match cts.remove(&id) {
        Some(old) => {
            // A sum with a masked part stays masked.
            let was_masked = [&old, &c]
                .iter()
                .any(|x| matches!(x, Cot::Value(v) if masked.contains(v)));
            let sum = accumulate(em, old, c)?;
            if let (true, Cot::Value(v)) = (was_masked, &sum) {
                masked.insert(*v);
            }
            sum
        }
        None => c,
    };
    cts.insert(id, sum);
    Ok(())
}

/// The seeds and everything they depend on, operands first, stopping at `stop`.
fn ancestors_in_order(
    em: &Emitter,
    seeds: impl Iterator<Item = InstrId>,
    stop: &HashSet<InstrId>,
) -> Vec<InstrId> {
    let comp = em.module.computation(em.comp);
    let mut visited: HashSet<InstrId> = HashSet::new();
    let mut out = Vec::new();
    for seed in seeds {
        if !visited.insert(seed) {
            continue;
        }
        let mut stack = vec![(seed, 0usize)];
        while let Some(&mut (id, ref mut next)) = stack.last_mut() {
            let operands = comp.get(id).operands();
            if !stop.contains(&id) && *next < operands.len() {
                let o = operands[*next];
                *next += 1;
                if visited.insert(o) {
                    stack.push((o, 0));
                }
            } else {
                out.push(id);
                stack.pop();
            }
        }
    }
    out
}
