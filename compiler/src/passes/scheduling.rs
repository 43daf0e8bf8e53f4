//! Scheduling: picks the order in which each computation's instructions run, to keep the
//! memory that is live at once small.
//!
//! A list scheduler (like XLA's) repeatedly runs the ready instruction that frees the most
//! bytes net of what it allocates; the result is kept only if its simulated peak is below
//! that of the current order, so scheduling never makes memory worse.

use super::util::{code_computations, pin_roots};
use super::{Pass, PassError};
use crate::ir::Module;
use crate::ir::{Computation, InstrId, Op};
use hashbrown::{HashMap, HashSet};

#[derive(Default)]
pub struct Scheduler;

impl Pass for Scheduler {
    fn name(&self) -> &'static str {
        "scheduling"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for cid in code_computations(m) {
            let c = m.computation(cid);
            let current = c.post_order();
            let listed = list_schedule(c);
            let best = if peak_bytes(c, &listed) < peak_bytes(c, &current) {
                listed
            } else {
                current
            };
            if best.as_slice() != c.ids() {
                m.computation_mut(cid).set_order(best);
                changed = true;
            }
        }
        Ok(changed)
    }
}

/// Ops whose result is a view of their operands' buffers, not a new allocation.
pub(crate) fn is_alias(op: &Op) -> bool {
    matches!(
        op,
        Op::Tuple | Op::GetTupleElement { .. } | Op::Bitcast | Op::Reshape | Op::Parameter(_)
    )
}

/// Bytes an instruction allocates when it runs (parameters and constants are not counted:
/// they are live throughout whatever the order).
fn allocated(c: &Computation, id: InstrId) -> i64 {
    let instr = c.get(id);
    if is_alias(&instr.op) || matches!(instr.op, Op::Constant(_)) {
        0
    } else {
        instr.shape.byte_size()
    }
}

/// The allocating instructions whose buffers `id`'s value may live in.
fn sources(
    c: &Computation,
    id: InstrId,
    memo: &mut HashMap<InstrId, Vec<InstrId>>,
) -> Vec<InstrId> {
    if let Some(s) = memo.get(&id) {
        return s.clone();
    }
    let instr = c.get(id);
    let out = match instr.op {
        Op::Parameter(_) | Op::Constant(_) => vec![],
        Op::Tuple | Op::GetTupleElement { .. } | Op::Bitcast | Op::Reshape => {
            let mut v = Vec::new();
            for &o in instr.operands() {
                for s in sources(c, o, memo) {
                    if !v.contains(&s) {
                        v.push(s);
                    }
                }
            }
            v
        }
        _ => vec![id],
    };
    memo.insert(id, out.clone());
    out
}

/// The largest number of bytes live at once when `c` runs in `order`.
pub fn peak_bytes(c: &Computation, order: &[InstrId]) -> i64 {
    let mut memo = HashMap::new();
    let pos: HashMap<InstrId, usize> = order.iter().enumerate().map(|(i, &x)| (x, i)).collect();
    let mut last: HashMap<InstrId, usize> = HashMap::new();
    for (p, &x) in order.iter().enumerate() {
        last.entry(x).or_insert(p);
        for &o in c.get(x).operands() {
            for s in sources(c, o, &mut memo) {
                let e = last.entry(s).or_insert(p);
                *e = (*e).max(p);
            }
        }
    }
    for s in sources(c, c.root(), &mut memo) {
        last.insert(s, order.len());
    }
    let mut delta = vec![0i64; order.len() + 2];
    for (&x, &p) in &pos {
        let bytes = allocated(c, x);
        if bytes > 0 {
            delta[p] += bytes;
            delta[last[&x] + 1] -= bytes;
        }
    }
    let (mut live, mut peak) = (0i64, 0i64);
    for d in delta {
        live += d;
        peak = peak.max(live);
    }
    peak
}

/// Greedy list scheduling: among ready instructions, run the one that frees the most bytes
/// minus what it allocates; ties go to the earlier instruction of the current order.
pub(crate) fn list_schedule(c: &Computation) -> Vec<InstrId> {
    let current = c.post_order();
    let rank: HashMap<InstrId, usize> = current.iter().enumerate().map(|(i, &x)| (x, i)).collect();
    let mut memo = HashMap::new();
    // Who reads each allocation (through any view of it).
    let mut readers: HashMap<InstrId, HashSet<InstrId>> = HashMap::new();
    let mut reads: HashMap<InstrId, Vec<InstrId>> = HashMap::new();
    for &x in &current {
        let mut srcs = Vec::new();
        for &o in c.get(x).operands() {
            for s in sources(c, o, &mut memo) {
                if !srcs.contains(&s) {
                    srcs.push(s);
                }
            }
        }
        for &s in &srcs {
            readers.entry(s).or_default().insert(x);
        }
        reads.insert(x, srcs);
    }
    let pinned: HashSet<InstrId> = sources(c, c.root(), &mut memo).into_iter().collect();
    let mut waiting: HashMap<InstrId, usize> = current
        .iter()
        .map(|&x| {
            let mut ops = c.get(x).operands().to_vec();
            ops.sort();
            ops.dedup();
            (x, ops.len())
        })
        .collect();
    let mut ready: Vec<InstrId> = current
        .iter()
        .copied()
        .filter(|x| waiting[x] == 0)
        .collect();
    let mut out = Vec::with_capacity(current.len());
    while !ready.is_empty() {
        let score = |x: InstrId| -> (bool, i64) {
            if is_alias(&c.get(x).op) {
                return (true, 0);
            }
            let freed: i64 = reads[&x]
                .iter()
                .filter(|s| !pinned.contains(*s) && readers[*s].len() == 1)
                .map(|&s| allocated(c, s))
                .sum();
            (false, freed - allocated(c, x))
        };
        let (best_i, _) = ready
            .iter()
            .enumerate()
            .max_by(|(_, &a), (_, &b)| {
                score(a)
                    .cmp(&score(b))
                    .then_with(|| rank[&b].cmp(&rank[&a]))
            })
            .expect("ready is not empty");
        let x = ready.swap_remove(best_i);
        out.push(x);
        for s in &reads[&x] {
            if let Some(r) = readers.get_mut(s) {
                r.remove(&x);
            }
        }
        let mut users = c.users(x);
        users.sort_by_key(|u| rank[u]);
        for u in users {
            let w = waiting.get_mut(&u).expect("user is scheduled");
            *w -= 1;
            if *w == 0 {
                ready.push(u);
            }
        }
    }
    out
}
