//! Common subexpression elimination: two instructions with the same op, attributes, shape and
//! operands compute the same value, so the later one is replaced by the earlier.
//!
//! Never merged: parameters, side-effecting ops, tokens (`after-all`), and collectives that
//! carry a channel id (each channel is its own communication). Constants merge only when
//! their bits are identical (`0.0` and `-0.0` stay apart).

use super::util::{ops_identical, pin_roots};
use super::{Pass, PassError};
use crate::ir::{Computation, InstrId, Module, Op, Shape};
use hashbrown::HashMap;

#[derive(Default)]
pub struct Cse;

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for c in &mut m.computations {
            changed |= cse_computation(c) > 0;
        }
        Ok(changed)
    }
}

fn mergeable(op: &Op) -> bool {
    match op {
        Op::Parameter(_) | Op::AfterAll | Op::Infeed { .. } | Op::Outfeed { .. } => false,
        Op::AllReduce { collective, .. }
        | Op::AllGather { collective, .. }
        | Op::ReduceScatter { collective, .. }
        | Op::AllToAll { collective, .. } => collective.channel_id.is_none(),
        Op::CollectivePermute { channel_id, .. } => channel_id.is_none(),
        other => !other.has_side_effect(),
    }
}

/// Merges equal instructions of `c`; returns how many were removed.
pub(crate) fn cse_computation(c: &mut Computation) -> usize {
    let mut seen: HashMap<(&'static str, Shape, Vec<InstrId>), Vec<InstrId>> = HashMap::new();
    let mut removed = 0;
    for id in c.post_order() {
        let instr = c.get(id);
        if !mergeable(&instr.op) {
            continue;
        }
        let key = (
            instr.op.opcode_name(),
            instr.shape.clone(),
            instr.operands().to_vec(),
        );
        let bucket = seen.entry(key).or_default();
        let existing = bucket
            .iter()
            .copied()
            .find(|&e| ops_identical(&c.get(e).op, &c.get(id).op));
        match existing {
            Some(e) => {
                c.replace_all_uses(id, e);
                c.remove(id);
                removed += 1;
            }
            None => bucket.push(id),
        }
    }
    removed
}
