//! The reverse sweep: walks a computation from seed cotangents back to target instructions,
//! applying each instruction's gradient rule once all its users have contributed.

use super::cotangent::{accumulate, Cot};
use super::emit::{Emitter, R};
use super::{vjp, Node};
use crate::ir::InstrId;
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
    for (id, c) in seeds {
        if relevant.contains(&id) {
            add_cotangent(em, &mut cts, id, c)?;
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
        let contributions = vjp(em, &node, ct);
        em.metadata = saved.clone();
        for (operand, c) in contributions? {
            if relevant.contains(&operand) {
                add_cotangent(em, &mut cts, operand, c)?;
            }
        }
    }
    Ok(targets
        .iter()
        .map(|t| cts.get(t).cloned().unwrap_or(Cot::Zero))
        .collect())
}

fn add_cotangent(em: &mut Emitter, cts: &mut HashMap<InstrId, Cot>, id: InstrId, c: Cot) -> R<()> {
    let shape = em.shape(id).clone();
    let c = c.prune(&shape);
    if c.is_zero() {
        return Ok(());
    }
    let sum = match cts.remove(&id) {
        Some(old) => accumulate(em, old, c)?,
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
