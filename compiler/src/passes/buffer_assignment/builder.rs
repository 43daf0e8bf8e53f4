//! The walk over the schedule: one timeline position per instruction, every array value
//! with its definition and last use, and where each loop runs.

use super::{BufferKind, BufferNeeds, Instance};
use crate::ir::{ComputationId, InstrId, Module, Op, Shape};
use hashbrown::HashMap;

/// One array value.
pub(super) struct Value {
    pub(super) name: String,
    pub(super) size: i64,
    pub(super) def: usize,
    pub(super) kind: BufferKind,
    pub(super) last_use: usize,
}

/// Where a loop runs on the timeline.
pub(super) struct LoopSpan {
    pub(super) inst: Instance,
    pub(super) instr: InstrId,
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) body: Instance,
    pub(super) body_range: (usize, usize),
    pub(super) state: Vec<usize>,
}

pub(super) struct Builder<'m> {
    pub(super) m: &'m Module,
    pub(super) needs: &'m dyn BufferNeeds,
    /// Scratch values of each instruction that asked for some.
    pub(super) scratch: HashMap<(Instance, InstrId), Vec<usize>>,
    pub(super) values: Vec<Value>,
    /// Array values of every instruction on the timeline, one per leaf.
    pub(super) leaves: HashMap<(Instance, InstrId), Vec<usize>>,
    /// What each recomputed instruction reads (through other recomputed ones too).
    recomputed_reads: HashMap<(Instance, InstrId), Vec<usize>>,
    /// Instruction at each position.
    pub(super) timeline: Vec<(Instance, InstrId)>,
    /// The values read at each position.
    pub(super) reads: Vec<Vec<usize>>,
    pub(super) loops: Vec<LoopSpan>,
    /// The computation of each instance.
    pub(super) instances: Vec<ComputationId>,
    /// The recomputed instructions of each instance.
    pub(super) recomputed: Vec<hashbrown::HashSet<InstrId>>,
    /// Position of each instruction that has one (a `while`: its first).
    positions: HashMap<(Instance, InstrId), usize>,
    /// See [`super::BufferAssignment::written_early`].
    pub(super) written_early: HashMap<(Instance, InstrId), InstrId>,
    /// Side outputs waiting for their reader: by reader, the writer and the value.
    side_pending: HashMap<(Instance, InstrId), Vec<(InstrId, usize)>>,
    /// Side outputs whose reader came: by writer, the reader and the value.
    pub(super) side: HashMap<(Instance, InstrId), (InstrId, usize)>,
}

impl<'m> Builder<'m> {
    /// Walks the module from its entry, then settles the live ranges the walk leaves open: a
    /// side output whose reader never came is not kept, the entry's result lives to the end,
    /// and parameters and constants live throughout.
    pub(super) fn walk_module(m: &'m Module, needs: &'m dyn BufferNeeds) -> Self {
        let mut b = Builder {
            m,
            needs,
            scratch: HashMap::new(),
            values: Vec::new(),
            leaves: HashMap::new(),
            recomputed_reads: HashMap::new(),
            timeline: Vec::new(),
            reads: Vec::new(),
            loops: Vec::new(),
            instances: Vec::new(),
            recomputed: Vec::new(),
            positions: HashMap::new(),
            written_early: HashMap::new(),
            side_pending: HashMap::new(),
            side: HashMap::new(),
        };
        b.walk(m.entry, None);
        for (_, pending) in std::mem::take(&mut b.side_pending) {
            for (_, v) in pending {
                b.values[v].size = 0;
            }
        }
        let end = b.timeline.len();
        let entry_root = b.leaves_of(0, m.entry().root());
        b.use_values(&entry_root, end);
        for v in &mut b.values {
            if matches!(v.kind, BufferKind::Parameter | BufferKind::Constant) {
                v.def = 0;
                v.last_use = end;
            }
        }
        b
    }

    pub(super) fn new_value(
        &mut self,
        name: String,
        size: i64,
        def: usize,
        kind: BufferKind,
    ) -> usize {
        self.values.push(Value {
            name,
            size,
            def,
            kind,
            last_use: def,
        });
        self.values.len() - 1
    }

    fn use_values(&mut self, vs: &[usize], pos: usize) {
        for &v in vs {
            let lu = &mut self.values[v].last_use;
            *lu = (*lu).max(pos);
        }
    }

    /// Adds a position for instruction `id` of `inst` that reads `reads`.
    fn push_position(&mut self, inst: Instance, id: InstrId, reads: Vec<usize>) -> usize {
        let pos = self.timeline.len();
        self.timeline.push((inst, id));
        self.positions.entry((inst, id)).or_insert(pos);
        self.use_values(&reads, pos);
        self.reads.push(reads);
        pos
    }

    pub(super) fn leaves_of(&self, inst: Instance, id: InstrId) -> Vec<usize> {
        self.leaves.get(&(inst, id)).cloned().unwrap_or_default()
    }

    /// The values an instruction reads when it reads operand `o`: its leaves, or what it
    /// reads when it is recomputed.
    fn read_through(&self, inst: Instance, o: InstrId) -> Vec<usize> {
        match self.recomputed_reads.get(&(inst, o)) {
            Some(r) => r.clone(),
            None => self.leaves_of(inst, o),
        }
    }

    fn define_all(
        &mut self,
        c: ComputationId,
        id: InstrId,
        pos: usize,
        kind: BufferKind,
    ) -> Vec<usize> {
        let instr = self.m.computation(c).get(id);
        let shape = instr.shape.clone();
        let name = instr.name.clone();
        let leaves = shape.leaves();
        let many = leaves.len() > 1 || shape.is_tuple();
        leaves
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let n = if many {
                    format!("{name}{{{i}}}")
                } else {
                    name.clone()
                };
                (n, a.byte_size())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|(n, size)| self.new_value(n, size, pos, kind))
            .collect()
    }

    /// Walks one emission of computation `cid` whose parameters are bound to `bound` (the
    /// flattened leaves of its arguments; `None` for the entry). Returns its instance.
    fn walk(&mut self, cid: ComputationId, bound: Option<Vec<usize>>) -> Instance {
        let inst = self.instances.len();
        self.instances.push(cid);
        let c = self.m.computation(cid);
        let recomputed: hashbrown::HashSet<InstrId> =
            self.needs.recomputed(self.m, cid).into_iter().collect();
        self.recomputed.push(recomputed.clone());
        for id in c.post_order() {
            let instr = c.get(id);
            let operand_leaves: Vec<Vec<usize>> = instr
                .operands()
                .iter()
                .map(|&o| self.leaves_of(inst, o))
                .collect();
            let operand_reads = || -> Vec<usize> {
                let mut r: Vec<usize> = Vec::new();
                for &o in instr.operands() {
                    for v in self.read_through(inst, o) {
                        if !r.contains(&v) {
                            r.push(v);
                        }
                    }
                }
                r
            };
            if recomputed.contains(&id) {
                let r = operand_reads();
                self.recomputed_reads.insert((inst, id), r);
                continue;
            }
            let out = match &instr.op {
                Op::Parameter(n) => match &bound {
                    Some(bound) => {
                        let counts = leaf_counts(&Shape::Tuple(param_shapes(self.m, cid)));
                        let start: usize = counts[..*n as usize].iter().sum();
                        bound[start..start + counts[*n as usize]].to_vec()
                    }
                    None => self.define_all(cid, id, 0, BufferKind::Parameter),
                },
                Op::Constant(_) => self.define_all(cid, id, 0, BufferKind::Constant),
                Op::Tuple => operand_leaves.concat(),
                Op::GetTupleElement { index } => {
                    let src = c.get(instr.operand(0)).shape.clone();
                    let counts = leaf_counts(&src);
                    let start: usize = counts[..*index as usize].iter().sum();
                    operand_leaves[0][start..start + counts[*index as usize]].to_vec()
                }
                Op::Bitcast | Op::Reshape => operand_leaves[0].clone(),
                Op::Copy if self.needs.copy_is_view() => operand_leaves[0].clone(),
                Op::While { condition, body } => {
                    let start = self.push_position(inst, id, operand_leaves[0].clone());
                    let state = self.define_all(cid, id, start, BufferKind::Temporary);
                    let cond_inst = self.walk(*condition, Some(state.clone()));
                    let cond_root =
                        self.leaves_of(cond_inst, self.m.computation(*condition).root());
                    let body_start = self.timeline.len();
                    let body_inst = self.walk(*body, Some(state.clone()));
                    let body_end = self.timeline.len().saturating_sub(1).max(body_start);
                    let body_root = self.leaves_of(body_inst, self.m.computation(*body).root());
                    let mut read = cond_root;
                    read.extend(body_root);
                    read.extend(state.iter().copied());
                    let end = self.push_position(inst, id, read);
                    self.loops.push(LoopSpan {
                        inst,
                        instr: id,
                        start,
                        end,
                        body: body_inst,
                        body_range: (body_start, body_end),
                        state: state.clone(),
                    });
                    state
                }
                Op::Call { to_apply } => {
                    let callee = self.walk(*to_apply, Some(operand_leaves.concat()));
                    self.leaves_of(callee, self.m.computation(*to_apply).root())
                }
                Op::Conditional { branches } => {
                    let mut read = operand_leaves[0].clone();
                    for (k, &b) in branches.iter().enumerate() {
                        let bi = self.walk(b, Some(operand_leaves[k + 1].clone()));
                        read.extend(self.leaves_of(bi, self.m.computation(b).root()));
                    }
                    let pos = self.push_position(inst, id, read);
                    self.define_all(cid, id, pos, BufferKind::Temporary)
                }
                _ => {
                    let pos = self.push_position(inst, id, operand_reads());
                    let early = self.needs.written_at(self.m, cid, id).and_then(|w| {
                        let p = *self.positions.get(&(inst, w))?;
                        (p < pos).then_some((w, p))
                    });
                    let def = match early {
                        Some((w, p)) => {
                            self.written_early.insert((inst, id), w);
                            p
                        }
                        None => pos,
                    };
                    // Scratch is live where the instruction's kernel runs: at its position,
                    // and from the writer's when it runs early.
                    let sizes = self.needs.scratch_bytes(self.m, cid, id);
                    if !sizes.is_empty() {
                        let name = &instr.name;
                        let scratch: Vec<usize> = sizes
                            .iter()
                            .enumerate()
                            .map(|(k, &size)| {
                                let n = format!("{name}.scratch{k}");
                                self.new_value(n, size, def, BufferKind::Scratch)
                            })
                            .collect();
                        self.use_values(&scratch, pos);
                        self.scratch.insert((inst, id), scratch);
                    }
                    // Side outputs this instruction reads, and the one it writes.
                    for (writer, v) in self.side_pending.remove(&(inst, id)).unwrap_or_default() {
                        self.use_values(&[v], pos);
                        self.side.insert((inst, writer), (id, v));
                    }
                    if let Some((bytes, reader)) = self.needs.side_output(self.m, cid, id) {
                        let n = format!("{}.side", instr.name);
                        let v = self.new_value(n, bytes, def, BufferKind::Side);
                        self.side_pending
                            .entry((inst, reader))
                            .or_default()
                            .push((id, v));
                    }
                    self.define_all(cid, id, def, BufferKind::Temporary)
                }
            };
            self.leaves.insert((inst, id), out);
        }
        inst
    }
}

fn param_shapes(m: &Module, cid: ComputationId) -> Vec<Shape> {
    let c = m.computation(cid);
    c.parameters()
        .iter()
        .map(|&p| c.get(p).shape.clone())
        .collect()
}

/// Number of array leaves in each element of a tuple shape (or 1 for an array).
fn leaf_counts(s: &Shape) -> Vec<usize> {
    match s {
        Shape::Tuple(t) => t.iter().map(|e| e.leaves().len()).collect(),
        _ => vec![s.leaves().len()],
    }
}
