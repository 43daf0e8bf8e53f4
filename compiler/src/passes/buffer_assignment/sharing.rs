//! Which values share a buffer: loop state with its initial value and with the body's result,
//! in-place writes, and the temporaries of state copies that permute buffers.

use super::builder::Builder;
use super::{BufferKind, Instance, LoopCopy};
use crate::ir::InstrId;

/// The temporaries of each loop's state copies, by loop and copy, as values.
pub(super) type CopyTemps = Vec<((Instance, InstrId, LoopCopy), Vec<usize>)>;

/// Union-find over values, with the live range of each set.
pub(super) struct Sets {
    parent: Vec<usize>,
    /// Range of each set (start, end), kept at its root.
    range: Vec<(usize, usize)>,
}

impl Sets {
    /// Every value in a set of its own.
    pub(super) fn new(b: &Builder) -> Self {
        Sets {
            parent: (0..b.values.len()).collect(),
            range: b.values.iter().map(|v| (v.def, v.last_use)).collect(),
        }
    }

    pub(super) fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    /// The live range of the set whose root is `root`.
    pub(super) fn range(&self, root: usize) -> (usize, usize) {
        self.range[root]
    }

    /// Merges `other`'s set into `keep`'s.
    fn union(&mut self, keep: usize, other: usize) {
        let (a, o) = (self.find(keep), self.find(other));
        if a != o {
            self.parent[o] = a;
            let (ra, ro) = (self.range[a], self.range[o]);
            self.range[a] = (ra.0.min(ro.0), ra.1.max(ro.1));
        }
    }

    /// A set for value `v`, just added, live over `range`.
    fn push(&mut self, v: usize, range: (usize, usize)) {
        self.parent.push(v);
        self.range.push(range);
    }
}

/// Whether the instruction at position `p` may write its result over value `v`.
fn may_write_over(b: &Builder, p: usize, v: usize) -> bool {
    let (inst, id) = b.timeline[p];
    let holds = |o: InstrId| b.leaves_of(inst, o).contains(&v);
    let recomputed = |o: InstrId| b.recomputed[inst].contains(&o);
    b.needs
        .may_write_over(b.m, b.instances[inst], id, &recomputed, &holds)
}

/// Loop state takes over the initial value's buffer when that value dies at the loop (a
/// donated parameter: when nothing after the loop reads it).
pub(super) fn state_takes_initial_values(b: &Builder, sets: &mut Sets) {
    let donated = b.needs.parameters_donated();
    for lp in &b.loops {
        let c = b.m.computation(b.instances[lp.inst]);
        let init = c.get(lp.instr).operand(0);
        let init_leaves = b.leaves_of(lp.inst, init);
        let mut taken = Vec::new();
        for (j, &w) in lp.state.iter().enumerate() {
            let v = init_leaves[j];
            let r = sets.find(v);
            let dies_here = match b.values[v].kind {
                BufferKind::Temporary => sets.range(r).1 == lp.start,
                BufferKind::Parameter => donated && r == v && last_read(b, v) == lp.start,
                _ => false,
            };
            if dies_here && b.values[v].size == b.values[w].size && !taken.contains(&r) {
                taken.push(r);
                sets.union(r, w);
            }
        }
    }
}

/// The last position that reads value `v`, the end of the timeline for the entry's result
/// (a parameter's range spans the whole timeline whatever reads it).
fn last_read(b: &Builder, v: usize) -> usize {
    if b.leaves_of(0, b.m.entry().root()).contains(&v) {
        return b.timeline.len();
    }
    (0..b.reads.len())
        .rev()
        .find(|&p| b.reads[p].contains(&v))
        .unwrap_or(0)
}

/// The body writes each new state element over the old one when the old one is dead
/// (before other in-place writes: this one saves a copy per iteration).
pub(super) fn body_writes_over_state(b: &Builder, sets: &mut Sets) {
    for lp in &b.loops {
        let body = b.m.computation(b.instances[lp.body]);
        let root_leaves = b.leaves_of(lp.body, body.root());
        for (j, &w) in lp.state.iter().enumerate() {
            let r_val = root_leaves[j];
            let (rw, rr) = (sets.find(w), sets.find(r_val));
            if rw == rr || b.values[r_val].kind != BufferKind::Temporary {
                continue;
            }
            let (body_start, body_end) = lp.body_range;
            // The new value's whole buffer lives inside the body...
            if sets.range(rr).0 < body_start || b.values[r_val].def > body_end {
                continue;
            }
            // ...the old value is not passed through to another element (the copy back
            // reads it after the body)...
            if root_leaves.contains(&w) {
                continue;
            }
            // ...and the old value is no longer read when it is written.
            let old_last_read = (body_start..=body_end)
                .filter(|&p| p < b.reads.len() && b.reads[p].contains(&w))
                .max();
            let def = sets.range(rr).0;
            let ok = match old_last_read {
                None => true,
                Some(q) if q < def => true,
                Some(q) if q == def => may_write_over(b, def, w),
                Some(_) => false,
            };
            if ok {
                sets.union(rw, rr);
            }
        }
    }
}

/// In-place writes, in timeline order: over a value read here for the last time.
pub(super) fn write_in_place(b: &Builder, sets: &mut Sets) {
    for p in 0..b.timeline.len() {
        let (inst, id) = b.timeline[p];
        let instr = b.m.computation(b.instances[inst]).get(id);
        if !instr.shape.is_array() {
            continue;
        }
        let out = b.leaves_of(inst, id);
        let [out] = out[..] else { continue };
        // Not when the result already lives in a loop state buffer.
        let out_root = sets.find(out);
        if b.values[out].def != p || sets.range(out_root).0 != p {
            continue;
        }
        for &v in &b.reads[p] {
            let r = sets.find(v);
            if b.values[v].kind == BufferKind::Temporary
                && sets.range(r).1 == p
                && b.values[v].size == b.values[out].size
                && may_write_over(b, p, v)
            {
                sets.union(r, out);
                break;
            }
        }
    }
}

/// A state copy whose source buffer is another element's destination goes through a
/// temporary (what the code generator's copy does), live at the copy only.
pub(super) fn loop_copy_temps(b: &mut Builder, sets: &mut Sets) -> CopyTemps {
    let m = b.m;
    let mut copy_temps: CopyTemps = Vec::new();
    for l in 0..b.loops.len() {
        let lp = &b.loops[l];
        let (lp_inst, lp_instr, lp_start, lp_end) = (lp.inst, lp.instr, lp.start, lp.end);
        let state = lp.state.clone();
        let c = m.computation(b.instances[lp.inst]);
        let init = b.leaves_of(lp.inst, c.get(lp.instr).operand(0));
        let body = m.computation(b.instances[lp.body]);
        let result = b.leaves_of(lp.body, body.root());
        for (copy, src, pos) in [
            (LoopCopy::Enter, init, lp_start),
            (LoopCopy::Back, result, lp_end),
        ] {
            let dst: Vec<usize> = state.iter().map(|&w| sets.find(w)).collect();
            let mut temps = Vec::new();
            for (k, &v) in src.iter().enumerate() {
                let s = sets.find(v);
                if b.values[v].size > 0 && s != dst[k] && dst.contains(&s) {
                    let name = format!("{}.copy_temp{k}", c.get(lp_instr).name);
                    let t = b.new_value(name, b.values[v].size, pos, BufferKind::Scratch);
                    sets.push(t, (pos, pos));
                    temps.push(t);
                }
            }
            if !temps.is_empty() {
                copy_temps.push(((lp_inst, lp_instr, copy), temps));
            }
        }
    }
    copy_temps
}
