//! All-reduce combining (XLA's `AllReduceCombiner`): independent all-reduces of one computation
//! that reduce over the same replica groups become one all-reduce with several operands, whose
//! tuple result the old users read with `get-tuple-element`.
//!
//! Each all-reduce is a meeting of every replica of its group (across hosts, a round trip
//! through the hosts' communication threads), so a training step that sums each gradient on
//! its own meets once per gradient; combined, it meets once. Every element is still reduced
//! on its own, in replica-id order, so the values are bitwise those of the separate
//! all-reduces.
//!
//! Combined together only all-reduces with the same `replica_groups`, `use_global_device_ids`,
//! presence of a `channel_id` (the combined one keeps the first's), element type and
//! reduction (the same computation, or computations of the same instructions), and none
//! depending on another through any path. Candidates are taken in post order and a group
//! closes at [`AllReduceCombiner::threshold_bytes`] or
//! [`AllReduceCombiner::threshold_count`] operands.
//!
//! Limits: all-reduces are combined only within one computation (not across a loop body and
//! its caller, nor inside fused computations: the pass runs before fusion); an all-reduce that
//! depends on a member of the group being formed waits for a later group, which can give more
//! groups than the fewest possible; other collectives (all-gather, reduce-scatter) are not
//! combined.

use super::util::{add_named, code_computations, ops_identical, pin_roots};
use super::{Pass, PassError};
use crate::ir::{
    CollectiveAttrs, Computation, ComputationId, ElementType, InstrId, Module, Op, Shape,
};
use hashbrown::HashMap;

/// XLA's default byte threshold: the combined operands of one all-reduce stay under 30 MiB.
/// The JIT's collectives do not overlap with computation, so a larger group loses no overlap;
/// the bound keeps one exchange's message (and its spare buffers) moderate.
pub const DEFAULT_THRESHOLD_BYTES: i64 = 30 * 1024 * 1024;

/// XLA's default operand count threshold.
pub const DEFAULT_THRESHOLD_COUNT: usize = 256;

pub struct AllReduceCombiner {
    /// At most this many bytes of operands in one combined all-reduce (an all-reduce larger
    /// than this on its own stays alone).
    pub threshold_bytes: i64,
    /// At most this many operands in one combined all-reduce.
    pub threshold_count: usize,
}

impl Default for AllReduceCombiner {
    fn default() -> Self {
        AllReduceCombiner {
            threshold_bytes: DEFAULT_THRESHOLD_BYTES,
            threshold_count: DEFAULT_THRESHOLD_COUNT,
        }
    }
}

impl Pass for AllReduceCombiner {
    fn name(&self) -> &'static str {
        "all-reduce-combiner"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for comp in code_computations(m) {
            // One group at a time, each found on the computation as the previous left it:
            // combining mutually independent all-reduces cannot make a cycle, but combining
            // two groups at once could (a member of each depending on a member of the other).
            while let Some(group) = self.next_group(m, comp) {
                combine(m, comp, &group)?;
                changed = true;
            }
        }
        Ok(changed)
    }
}

/// What all-reduces must share to be combined.
struct Candidate {
    id: InstrId,
    attrs: CollectiveAttrs,
    to_apply: ComputationId,
    element_type: ElementType,
    bytes: i64,
    operands: usize,
}

impl AllReduceCombiner {
    /// The first group (two or more all-reduces) that may become one, in post order.
    fn next_group(&self, m: &Module, comp: ComputationId) -> Option<Vec<InstrId>> {
        let c = m.computation(comp);
        let order = c.post_order();
        let candidates: Vec<Candidate> = order
            .iter()
            .filter_map(|&id| candidate(c, id))
            .filter(|k| k.bytes <= self.threshold_bytes)
            .collect();
        if candidates.len() < 2 {
            return None;
        }
        let depends = all_reduce_ancestors(c, &order, &candidates);
        let mut taken = vec![false; candidates.len()];
        for (first, lead) in candidates.iter().enumerate() {
            if taken[first] {
                continue;
            }
            taken[first] = true;
            let mut members = vec![first];
            let (mut bytes, mut count) = (lead.bytes, lead.operands);
            for (i, k) in candidates.iter().enumerate().skip(first + 1) {
                let fits = bytes + k.bytes <= self.threshold_bytes
                    && count + k.operands <= self.threshold_count;
                if taken[i] || !fits || !compatible(m, lead, k) {
                    continue;
                }
                // Members come earlier in post order, so none of them can depend on `k`; `k`
                // must not depend on any of them.
                if members.iter().any(|&j| depends[i].contains(j)) {
                    continue;
                }
                taken[i] = true;
                members.push(i);
                bytes += k.bytes;
                count += k.operands;
            }
            if members.len() >= 2 {
                return Some(members.iter().map(|&i| candidates[i].id).collect());
            }
        }
        None
    }
}

fn candidate(c: &Computation, id: InstrId) -> Option<Candidate> {
    let instr = c.get(id);
    let Op::AllReduce {
        collective,
        to_apply,
    } = &instr.op
    else {
        return None;
    };
    let leaves = instr.shape.leaves();
    let element_type = leaves.first()?.element_type;
    if leaves.iter().any(|a| a.element_type != element_type) {
        return None;
    }
    let bytes = leaves
        .iter()
        .map(|a| a.checked_byte_size())
        .sum::<Option<i64>>()?;
    Some(Candidate {
        id,
        attrs: collective.clone(),
        to_apply: *to_apply,
        element_type,
        bytes,
        operands: instr.operands().len(),
    })
}

fn compatible(m: &Module, a: &Candidate, b: &Candidate) -> bool {
    a.attrs.replica_groups == b.attrs.replica_groups
        && a.attrs.use_global_device_ids == b.attrs.use_global_device_ids
        && a.attrs.channel_id.is_some() == b.attrs.channel_id.is_some()
        && a.element_type == b.element_type
        && same_reducer(m, a.to_apply, b.to_apply)
}

/// Whether two reduction computations compute the same thing: the same one, or the same
/// instructions in the same order on the same operands (JAX gives each all-reduce a region
/// of its own).
fn same_reducer(m: &Module, a: ComputationId, b: ComputationId) -> bool {
    if a == b {
        return true;
    }
    let (ca, cb) = (m.computation(a), m.computation(b));
    let (oa, ob) = (ca.post_order(), cb.post_order());
    if oa.len() != ob.len() || !ca.has_root() || !cb.has_root() {
        return false;
    }
    let mut to_b: HashMap<InstrId, InstrId> = HashMap::new();
    for (&x, &y) in oa.iter().zip(&ob) {
        let (ix, iy) = (ca.get(x), cb.get(y));
        let operands_match = ix.operands().len() == iy.operands().len()
            && ix
                .operands()
                .iter()
                .zip(iy.operands())
                .all(|(p, q)| to_b.get(p) == Some(q));
        if ix.shape != iy.shape || !ops_identical(&ix.op, &iy.op) || !operands_match {
            return false;
        }
        to_b.insert(x, y);
    }
    to_b.get(&ca.root()) == Some(&cb.root())
}

/// A set of candidate indices.
#[derive(Clone)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn contains(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
    fn union(&mut self, other: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }
}

/// For each candidate, the candidates it depends on through any path.
fn all_reduce_ancestors(c: &Computation, order: &[InstrId], candidates: &[Candidate]) -> Vec<Bits> {
    let n = candidates.len();
    let index: HashMap<InstrId, usize> = candidates
        .iter()
        .enumerate()
        .map(|(i, k)| (k.id, i))
        .collect();
    // Below[x]: the candidates at or below instruction x.
    let mut below: Vec<Option<Bits>> = vec![None; c.index_bound()];
    let mut out = vec![Bits::new(n); n];
    for &id in order {
        let mut bits = Bits::new(n);
        for o in c.get(id).operands() {
            if let Some(b) = &below[o.index()] {
                bits.union(b);
            }
        }
        if let Some(&i) = index.get(&id) {
            out[i] = bits.clone();
            bits.insert(i);
        }
        below[id.index()] = Some(bits);
    }
    out
}

/// Replaces the all-reduces `group` (in post order, mutually independent) with one all-reduce
/// of all their operands.
fn combine(m: &mut Module, comp: ComputationId, group: &[InstrId]) -> Result<(), PassError> {
    let c = m.computation(comp);
    let first = c.get(group[0]);
    let (op, metadata) = (first.op.clone(), first.metadata.clone());
    let mut operands = Vec::new();
    let mut leaves = Vec::new();
    for &id in group {
        let instr = c.get(id);
        operands.extend_from_slice(instr.operands());
        leaves.extend(instr.shape.leaves().into_iter().cloned().map(Shape::Array));
    }
    if operands.len() != leaves.len() {
        return Err(PassError::new(
            "all-reduce-combiner",
            format!(
                "{}: {} operands for {} results",
                first.name,
                operands.len(),
                leaves.len()
            ),
        ));
    }
    let combined = add_named(
        m,
        comp,
        "all-reduce",
        op,
        Shape::Tuple(leaves.clone()),
        &operands,
        metadata,
    );
    let mut slot = 0;
    for &old in group {
        let c = m.computation(comp);
        let width = c.get(old).operands().len();
        let was_tuple = c.get(old).shape.is_tuple();
        let elements: Vec<InstrId> = (slot..slot + width)
            .map(|k| {
                let md = m.computation(comp).get(old).metadata.clone();
                add_named(
                    m,
                    comp,
                    "get-tuple-element",
                    Op::GetTupleElement { index: k as i64 },
                    leaves[k].clone(),
                    &[combined],
                    md,
                )
            })
            .collect();
        if was_tuple {
            // Its get-tuple-elements read the combined one's directly; any other use gets a
            // tuple of them.
            let c = m.computation_mut(comp);
            for user in c.users(old) {
                if let Op::GetTupleElement { index } = c.get(user).op {
                    if let Some(&e) = usize::try_from(index).ok().and_then(|i| elements.get(i)) {
                        c.replace_all_uses(user, e);
                        c.remove(user);
                    }
                }
            }
            if !m.computation(comp).users(old).is_empty() || m.computation(comp).root() == old {
                let shape = Shape::Tuple(leaves[slot..slot + width].to_vec());
                let md = m.computation(comp).get(old).metadata.clone();
                let tuple = add_named(m, comp, "tuple", Op::Tuple, shape, &elements, md);
                m.computation_mut(comp).replace_all_uses(old, tuple);
            }
        } else {
            m.computation_mut(comp).replace_all_uses(old, elements[0]);
        }
        m.computation_mut(comp).remove(old);
        slot += width;
    }
    Ok(())
}
