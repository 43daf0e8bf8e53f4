//! Dead code elimination: removes instructions whose values nothing needs, and computations
//! that nothing calls.
//!
//! An instruction is live when the root depends on it, when it has a side effect (infeed,
//! outfeed, side-effecting custom-calls) or feeds one, or when it is a parameter (parameters
//! are a computation's signature and stay even when unused).

use super::util::pin_roots;
use super::{Pass, PassError};
use crate::ir::{Computation, ComputationId, InstrId, Module, Op};
use hashbrown::HashSet;

#[derive(Default)]
pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for c in &mut m.computations {
            changed |= remove_dead_instructions(c) > 0;
        }
        changed |= remove_dead_computations(m) > 0;
        Ok(changed)
    }
}

/// Removes every dead instruction of `c`; returns how many.
pub(crate) fn remove_dead_instructions(c: &mut Computation) -> usize {
    if !c.has_root() {
        return 0;
    }
    let mut live: HashSet<InstrId> = HashSet::new();
    let mut stack: Vec<InstrId> = vec![c.root()];
    for &id in c.ids() {
        let op = &c.get(id).op;
        if op.has_side_effect() || matches!(op, Op::Parameter(_)) {
            stack.push(id);
        }
    }
    while let Some(id) = stack.pop() {
        if live.insert(id) {
            stack.extend(c.get(id).operands().iter().copied());
        }
    }
    let mut removed = 0;
    // Users come after their operands in post-order: removing in reverse removes users first.
    for id in c.post_order().into_iter().rev() {
        if !live.contains(&id) {
            c.remove(id);
            removed += 1;
        }
    }
    removed
}

/// Removes computations that the entry does not reach through calls; renumbers the rest.
pub(crate) fn remove_dead_computations(m: &mut Module) -> usize {
    let n = m.computations.len();
    let mut reached = vec![false; n];
    let mut stack = vec![m.entry];
    while let Some(cid) = stack.pop() {
        if std::mem::replace(&mut reached[cid.0 as usize], true) {
            continue;
        }
        let c = m.computation(cid);
        for &id in c.ids() {
            stack.extend(c.get(id).op.called_computations());
        }
    }
    let dead = reached.iter().filter(|r| !**r).count();
    if dead == 0 {
        return 0;
    }
    let mut new_index = vec![None; n];
    let mut kept = Vec::with_capacity(n - dead);
    for (i, c) in std::mem::take(&mut m.computations).into_iter().enumerate() {
        if reached[i] {
            new_index[i] = Some(ComputationId(kept.len() as u32));
            kept.push(c);
        }
    }
    m.computations = kept;
    m.entry = new_index[m.entry.0 as usize].expect("the entry is live");
    let map =
        |c: ComputationId| new_index[c.0 as usize].expect("live computation calls only live ones");
    for c in &mut m.computations {
        let ids: Vec<InstrId> = c.ids().to_vec();
        for id in ids {
            c.get_mut(id).op.map_called_computations(map);
        }
    }
    dead
}
