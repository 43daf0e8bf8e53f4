//! Buffer assignment: which memory each value lives in.
//!
//! The rules, exactly:
//!
//! **Timeline.** One position per instruction that runs, in the order the JIT emits them:
//! each computation's instructions in `post_order` (the order `passes/scheduling.rs` set with
//! `set_order`; the JIT's `emit_computation` walks the same `post_order`). A `while` takes
//! two positions, one before its condition (where the state is defined and the initial value
//! is read) and one after its body (where the condition's and body's results are read); the
//! condition, then the body, are spliced in between. A `call`'s callee is spliced in where it
//! is called; a `conditional`'s branches are spliced in one after the other before the
//! conditional's own position, which reads the branch results and defines its value.
//!
//! **Instances.** Every splice is a new [`Instance`] of the computation (a callee called
//! twice is laid out twice, with buffers of its own each time, as the JIT emits it per call
//! site). Instances are numbered in the order the walk meets them: 0 is the entry. Every
//! per-instruction map of the result is keyed by `(instance, instruction)`.
//!
//! **Views.** `tuple`, `get-tuple-element`, `bitcast`, `reshape` (and `copy`, when
//! [`BufferNeeds::copy_is_view`]) and the parameters of called computations (loop state, call
//! arguments, branch operands) define no value: they name the values of their operands.
//! Every other instruction defines one value per array leaf of its shape (named `name`, or
//! `name{leaf}` for a tuple). A value is live from the position that defines it to its last
//! use; the entry's root is used at the end.
//!
//! **Recomputed instructions.** Those [`BufferNeeds::recomputed`] names get no position and no
//! value: the code generator evaluates them inside their users' kernels, so what they read is
//! read at their users' positions.
//!
//! **Written early.** A value [`BufferNeeds::written_at`] names an earlier instruction for is
//! written by that instruction's kernel (a convolution that pools its output in its
//! epilogue), or while it runs (a convolution run beside it on the other core), so it is live
//! from that instruction's position: its buffer overlaps nothing that instruction reads or
//! uses as scratch, and nothing live in between. Its own instruction's scratch is live from
//! there too. Such values are not written in place over anything.
//! [`BufferAssignment::written_early`] lists them.
//!
//! **Side outputs.** A [`BufferNeeds::side_output`] is bytes an instruction's kernel writes
//! besides its value, for one later instruction of the same computation instance to read (a
//! max-pool's window choices, read by its gradient): a value of kind [`BufferKind::Side`],
//! live from where the instruction's value is defined to the reader's position, shared with
//! nothing in place. One whose reader does not come later gets no buffer.
//! [`BufferAssignment::side_outputs`] lists them.
//!
//! **Parameters and constants.** Entry parameters live in the arena, from the start to the
//! end (the caller copies the arguments in). Constants are live throughout; whether they are
//! in the arena is the [`BufferNeeds`]' choice: the compiler's report counts them there, the
//! JIT keeps them in a constant pool outside the arena (`constants_in_arena` is false), and
//! such buffers get offset -1 and count in none of the byte totals.
//!
//! **Scratch.** A [`BufferNeeds`] may ask for scratch space at an instruction (a GEMM
//! operand's permuted copy, Winograd's transformed tiles, the second half of a split
//! reduce): one buffer of kind [`BufferKind::Scratch`] per request, live at that position
//! only, so it overlaps neither the operands nor the result.
//!
//! **Sharing.** Values then share *buffers*, by these rules in this order:
//! - loop state stays in place: each while state element gets one buffer for the whole loop,
//!   taken over from the initial value when that value dies at the loop (and no earlier
//!   element took it);
//! - the body writes its new value of a state element into the element's buffer when the new
//!   value's whole life is inside the body and the old value is no longer read when it is
//!   written (or is read only by the writing instruction, and `may_write_over` allows it);
//! - in place: an instruction writes its result over a value it reads for the last time, of
//!   the same size, when [`BufferNeeds::may_write_over`] allows it (by default: elementwise
//!   ops, fusions that read that operand elementwise, a dynamic-update-slice's target; for
//!   the JIT, kernels that read the buffer only at the index they write), in timeline order,
//!   unless the result already lives in a loop state buffer.
//!
//! **Loop copies.** Where a loop's state copy (initial value in, body result back) has a
//! source buffer that is another element's destination, the copy goes through a temporary: a
//! scratch buffer live at that copy's position ([`BufferAssignment::loop_copy_temps`]).
//!
//! **Placement.** Buffers whose live ranges overlap get disjoint offsets, sizes rounded up to
//! the needs' alignment (16 bytes for the report, 64 for the JIT): the better of two orders
//! (largest first, earliest first), each buffer in the smallest gap that holds it, else on
//! top; `peak_bytes` is the end of the highest buffer.
//!
//! The JIT lays out its arena with exactly this assignment under its needs
//! (`runtime/src/jit/arena_plan.rs`): the dump of the assignment under those needs is the
//! memory that runs.

use super::util::code_computations;
use crate::ir::{ComputationId, InstrId, Module, Op, Shape};
use hashbrown::HashMap;
use std::fmt::Write;

/// Offsets and sizes are kept at this alignment unless the [`BufferNeeds`] ask for more.
pub const ALIGNMENT: i64 = 16;

/// What the code generator that runs the module needs beyond its values' bytes.
pub trait BufferNeeds {
    /// Called once at the start of each assignment, with the module it is for: needs that
    /// keep answers per computation forget those of any earlier module here.
    fn begin(&self, _m: &Module) {}

    /// Alignment of every buffer's offset and size, in bytes (a power of two).
    fn alignment(&self) -> i64 {
        ALIGNMENT
    }

    /// Whether constants live in the arena (else they get no offset and no arena bytes).
    fn constants_in_arena(&self) -> bool {
        true
    }

    /// Scratch space instruction `id` of computation `comp` uses while it runs, one entry
    /// per separate buffer, in bytes.
    fn scratch_bytes(&self, _m: &Module, _comp: ComputationId, _id: InstrId) -> Vec<i64> {
        Vec::new()
    }

    /// Whether `copy` names its operand's buffers instead of defining a new value.
    fn copy_is_view(&self) -> bool {
        false
    }

    /// The instructions of `comp` the code generator recomputes inside their users' kernels:
    /// they get no buffer, and what they read is read where their users run.
    fn recomputed(&self, _m: &Module, _comp: ComputationId) -> Vec<InstrId> {
        Vec::new()
    }

    /// The earlier instruction of `comp` whose kernel writes instruction `id`'s value (for
    /// the code generator that folds `id` into it, or runs `id` beside it), if any: the value
    /// and `id`'s scratch are then live from that instruction's position. Ignored unless that
    /// instruction comes earlier in the schedule.
    fn written_at(&self, _m: &Module, _comp: ComputationId, _id: InstrId) -> Option<InstrId> {
        None
    }

    /// Bytes instruction `id` of `comp` writes besides its value, and the later instruction of
    /// `comp` that reads them (see the module doc, "Side outputs").
    fn side_output(
        &self,
        _m: &Module,
        _comp: ComputationId,
        _id: InstrId,
    ) -> Option<(i64, InstrId)> {
        None
    }

    /// Whether instruction `id` of `comp` may write its array result over a buffer it reads:
    /// `holds(o)` says whether instruction `o` (an operand, or a value the kernel reads through
    /// recomputed instructions) names that buffer; `recomputed(o)` whether `o` is one of
    /// [`Self::recomputed`]'s. The default: every operand holding it is one
    /// the op reads only at the index it writes (elementwise ops, fusions whose paths from
    /// that parameter are elementwise, a dynamic-update-slice's target).
    fn may_write_over(
        &self,
        m: &Module,
        comp: ComputationId,
        id: InstrId,
        _recomputed: &dyn Fn(InstrId) -> bool,
        holds: &dyn Fn(InstrId) -> bool,
    ) -> bool {
        let operands = m.computation(comp).get(id).operands();
        operands.iter().any(|&o| holds(o))
            && operands
                .iter()
                .enumerate()
                .all(|(k, &o)| !holds(o) || writes_in_place(m, comp, id, k))
    }
}

/// One emission of a computation on the timeline: instance 0 is the entry, then each loop
/// condition and body, callee (once per call site) and branch, numbered in the order the walk
/// meets them (the order in which the JIT emits them).
pub type Instance = usize;

/// The two copies of a `while`'s state that may need temporaries (a permutation of buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoopCopy {
    /// The initial value into the state, before the loop.
    Enter,
    /// The body's result into the state, after each iteration.
    Back,
}

/// The needs the compiler's own report assumes: [`ALIGNMENT`], constants in the arena, no
/// scratch.
pub struct ReportNeeds;

impl BufferNeeds for ReportNeeds {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferKind {
    /// An argument of the entry: owned by the caller, live throughout.
    Parameter,
    /// A constant: live throughout.
    Constant,
    /// A value computed by the module.
    Temporary,
    /// Space an instruction uses only while it runs (see [`BufferNeeds::scratch_bytes`]).
    Scratch,
    /// Bytes an instruction writes besides its value for a later one to read (see
    /// [`BufferNeeds::side_output`]).
    Side,
}

#[derive(Clone, Debug)]
pub struct Buffer {
    pub size: i64,
    pub offset: i64,
    /// First and last timeline positions at which the buffer holds a needed value.
    pub live_range: (usize, usize),
    /// The values stored in this buffer, in definition order (`name` or `name{leaf}`).
    pub values: Vec<String>,
    pub kind: BufferKind,
}

#[derive(Clone, Debug, Default)]
pub struct BufferAssignment {
    pub buffers: Vec<Buffer>,
    /// Bytes needed with the assigned offsets (the end of the highest buffer).
    pub peak_bytes: i64,
    /// Bytes needed if no two buffers shared memory (sizes rounded up to [`ALIGNMENT`]).
    pub total_bytes: i64,
    /// Largest total size of buffers live at one position: no offset assignment of these
    /// buffers can need less.
    pub lower_bound_bytes: i64,
    /// Bytes needed if every value had a buffer of its own (no in-place sharing).
    pub unshared_values_bytes: i64,
    /// The timeline: `computation/instruction` at each position.
    pub timeline: Vec<String>,
    /// Alignment of offsets and sizes.
    pub alignment: i64,
    /// The computation of each [`Instance`].
    pub instances: Vec<ComputationId>,
    /// The buffer (index in `buffers`) of each array leaf of each instruction's value, views
    /// included; zero-sized leaves and recomputed instructions have none.
    pub value_buffers: HashMap<(Instance, InstrId), Vec<Option<usize>>>,
    /// The scratch buffers of each instruction that asked for some, in request order
    /// (zero-sized requests get none).
    pub scratch_buffers: HashMap<(Instance, InstrId), Vec<usize>>,
    /// Temporaries of a loop's state copies, one per element whose source buffer is another
    /// element's destination (copied through a temporary first), in element order.
    pub loop_copy_temps: HashMap<(Instance, InstrId, LoopCopy), Vec<usize>>,
    /// The values written early ([`BufferNeeds::written_at`]): each instruction's value, with
    /// the instruction whose position it is live from.
    pub written_early: HashMap<(Instance, InstrId), InstrId>,
    /// The side outputs ([`BufferNeeds::side_output`]) by writing instruction: the reader and
    /// the buffer.
    pub side_outputs: HashMap<(Instance, InstrId), (InstrId, usize)>,
}

fn align_to(n: i64, alignment: i64) -> i64 {
    (n + alignment - 1) / alignment * alignment
}

/// Whether a buffer takes arena bytes.
fn in_arena(b: &Buffer) -> bool {
    b.offset >= 0
}

/// One array value.
struct Value {
    name: String,
    size: i64,
    def: usize,
    kind: BufferKind,
    last_use: usize,
}

/// Where a loop runs on the timeline.
struct LoopSpan {
    inst: Instance,
    instr: InstrId,
    start: usize,
    end: usize,
    body: Instance,
    body_range: (usize, usize),
    state: Vec<usize>,
}

struct Builder<'m> {
    m: &'m Module,
    needs: &'m dyn BufferNeeds,
    /// Scratch values of each instruction that asked for some.
    scratch: HashMap<(Instance, InstrId), Vec<usize>>,
    values: Vec<Value>,
    /// Array values of every instruction on the timeline, one per leaf.
    leaves: HashMap<(Instance, InstrId), Vec<usize>>,
    /// What each recomputed instruction reads (through other recomputed ones too).
    recomputed_reads: HashMap<(Instance, InstrId), Vec<usize>>,
    /// Instruction at each position.
    timeline: Vec<(Instance, InstrId)>,
    /// The values read at each position.
    reads: Vec<Vec<usize>>,
    loops: Vec<LoopSpan>,
    /// The computation of each instance.
    instances: Vec<ComputationId>,
    /// The recomputed instructions of each instance.
    recomputed: Vec<hashbrown::HashSet<InstrId>>,
    /// Position of each instruction that has one (a `while`: its first).
    positions: HashMap<(Instance, InstrId), usize>,
    /// See [`BufferAssignment::written_early`].
    written_early: HashMap<(Instance, InstrId), InstrId>,
    /// Side outputs waiting for their reader: by reader, the writer and the value.
    side_pending: HashMap<(Instance, InstrId), Vec<(InstrId, usize)>>,
    /// Side outputs whose reader came: by writer, the reader and the value.
    side: HashMap<(Instance, InstrId), (InstrId, usize)>,
}

impl<'m> Builder<'m> {
    fn new_value(&mut self, name: String, size: i64, def: usize, kind: BufferKind) -> usize {
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

    fn leaves_of(&self, inst: Instance, id: InstrId) -> Vec<usize> {
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

/// Union-find over values.
struct Sets {
    parent: Vec<usize>,
}

impl Sets {
    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }
}

/// Whether `id` may write its result over operand `k`: it reads element i of that operand
/// only to compute element i of its result.
fn writes_in_place(m: &Module, cid: ComputationId, id: InstrId, k: usize) -> bool {
    let c = m.computation(cid);
    let instr = c.get(id);
    match &instr.op {
        op if op.is_elementwise() => true,
        Op::DynamicUpdateSlice => k == 0,
        Op::Fusion { calls, .. } => {
            let f = m.computation(*calls);
            let Some(p) = f.parameter(k as u32) else {
                return false;
            };
            // Every path from the parameter to the root must be elementwise.
            let mut stack = vec![p];
            while let Some(x) = stack.pop() {
                if x == f.root() {
                    continue;
                }
                for u in f.users(x) {
                    if !f.get(u).op.is_elementwise() {
                        return false;
                    }
                    stack.push(u);
                }
            }
            true
        }
        _ => false,
    }
}

/// Assigns buffers to every value of the module, following its current schedule, with the
/// compiler's report's needs ([`ReportNeeds`]).
pub fn assign_buffers(m: &Module) -> BufferAssignment {
    assign_buffers_with(m, &ReportNeeds)
}

/// Assigns buffers to every value of the module, following its current schedule, with the
/// alignment, constants and scratch space `needs` asks for.
pub fn assign_buffers_with(m: &Module, needs: &dyn BufferNeeds) -> BufferAssignment {
    needs.begin(m);
    let alignment = needs.alignment();
    let align = |n: i64| align_to(n, alignment);
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
    // A side output whose reader never came is not kept.
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
    let mut sets = Sets {
        parent: (0..b.values.len()).collect(),
    };
    // Range of each set (start, end), kept at its root.
    let mut range: Vec<(usize, usize)> = b.values.iter().map(|v| (v.def, v.last_use)).collect();
    let union = |sets: &mut Sets, range: &mut Vec<(usize, usize)>, keep: usize, other: usize| {
        let (a, o) = (sets.find(keep), sets.find(other));
        if a != o {
            sets.parent[o] = a;
            range[a] = (range[a].0.min(range[o].0), range[a].1.max(range[o].1));
        }
    };
    // Whether the instruction at position `p` may write its result over value `v`.
    let may_write_over = |b: &Builder, p: usize, v: usize| {
        let (inst, id) = b.timeline[p];
        let holds = |o: InstrId| b.leaves_of(inst, o).contains(&v);
        let recomputed = |o: InstrId| b.recomputed[inst].contains(&o);
        needs.may_write_over(m, b.instances[inst], id, &recomputed, &holds)
    };

    // Loop state takes over the initial value's buffer when that value dies at the loop.
    for lp in &b.loops {
        let c = m.computation(b.instances[lp.inst]);
        let init = c.get(lp.instr).operand(0);
        let init_leaves = b.leaves_of(lp.inst, init);
        let mut taken = Vec::new();
        for (j, &w) in lp.state.iter().enumerate() {
            let v = init_leaves[j];
            let r = sets.find(v);
            if b.values[v].kind == BufferKind::Temporary
                && range[r].1 == lp.start
                && b.values[v].size == b.values[w].size
                && !taken.contains(&r)
            {
                taken.push(r);
                union(&mut sets, &mut range, r, w);
            }
        }
    }

    // The body writes each new state element over the old one when the old one is dead
    // (before other in-place writes: this one saves a copy per iteration).
    for lp in &b.loops {
        let body = m.computation(b.instances[lp.body]);
        let root_leaves = b.leaves_of(lp.body, body.root());
        for (j, &w) in lp.state.iter().enumerate() {
            let r_val = root_leaves[j];
            let (rw, rr) = (sets.find(w), sets.find(r_val));
            if rw == rr || b.values[r_val].kind != BufferKind::Temporary {
                continue;
            }
            let (body_start, body_end) = lp.body_range;
            // The new value's whole buffer lives inside the body...
            if range[rr].0 < body_start || b.values[r_val].def > body_end {
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
            let def = range[rr].0;
            let ok = match old_last_read {
                None => true,
                Some(q) if q < def => true,
                Some(q) if q == def => may_write_over(&b, def, w),
                Some(_) => false,
            };
            if ok {
                union(&mut sets, &mut range, rw, rr);
            }
        }
    }

    // In-place writes, in timeline order: over a value read here for the last time.
    for p in 0..b.timeline.len() {
        let (inst, id) = b.timeline[p];
        let instr = m.computation(b.instances[inst]).get(id);
        if !instr.shape.is_array() {
            continue;
        }
        let out = b.leaves_of(inst, id);
        let [out] = out[..] else { continue };
        // Not when the result already lives in a loop state buffer.
        if b.values[out].def != p || range[sets.find(out)].0 != p {
            continue;
        }
        for &v in &b.reads[p] {
            let r = sets.find(v);
            if b.values[v].kind == BufferKind::Temporary
                && range[r].1 == p
                && b.values[v].size == b.values[out].size
                && may_write_over(&b, p, v)
            {
                union(&mut sets, &mut range, r, out);
                break;
            }
        }
    }

    // A state copy whose source buffer is another element's destination goes through a
    // temporary (what the code generator's copy does), live at the copy only.
    let mut copy_temps: Vec<((Instance, InstrId, LoopCopy), Vec<usize>)> = Vec::new();
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
                    sets.parent.push(t);
                    range.push((pos, pos));
                    temps.push(t);
                }
            }
            if !temps.is_empty() {
                copy_temps.push(((lp_inst, lp_instr, copy), temps));
            }
        }
    }

    // Collect buffers.
    let mut index: HashMap<usize, usize> = HashMap::new();
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut buffer_of_value = Vec::with_capacity(b.values.len());
    for v in 0..b.values.len() {
        let r = sets.find(v);
        let bi = *index.entry(r).or_insert_with(|| {
            buffers.push(Buffer {
                size: 0,
                offset: 0,
                live_range: range[r],
                values: Vec::new(),
                kind: b.values[v].kind,
            });
            buffers.len() - 1
        });
        let buf = &mut buffers[bi];
        buf.size = buf.size.max(b.values[v].size);
        buf.values.push(b.values[v].name.clone());
        buffer_of_value.push(bi);
    }
    // Drop empty buffers, keeping the value -> buffer map in step.
    let mut renumber = vec![None; buffers.len()];
    let mut kept = 0;
    for (i, buf) in buffers.iter().enumerate() {
        if buf.size > 0 {
            renumber[i] = Some(kept);
            kept += 1;
        }
    }
    buffers.retain(|buf| buf.size > 0);
    let buffer_of = |v: usize| renumber[buffer_of_value[v]];
    let value_buffers = b
        .leaves
        .iter()
        .map(|(&key, vs)| (key, vs.iter().map(|&v| buffer_of(v)).collect()))
        .collect();
    let scratch_buffers = b
        .scratch
        .iter()
        .map(|(&key, vs)| (key, vs.iter().filter_map(|&v| buffer_of(v)).collect()))
        .collect();
    let side_outputs = b
        .side
        .iter()
        .filter_map(|(&key, &(reader, v))| Some((key, (reader, buffer_of(v)?))))
        .collect();
    let loop_copy_temps = copy_temps
        .iter()
        .map(|(key, vs)| (*key, vs.iter().filter_map(|&v| buffer_of(v)).collect()))
        .collect();
    let arena_constants = needs.constants_in_arena();
    let placed = |buf: &Buffer| arena_constants || buf.kind != BufferKind::Constant;
    let peak_bytes = place(&mut buffers, alignment, placed);
    let total_bytes = buffers
        .iter()
        .filter(|b| in_arena(b))
        .map(|b| align(b.size))
        .sum();
    let lower_bound_bytes = max_live(
        buffers
            .iter()
            .filter(|b| in_arena(b))
            .map(|b| (b.live_range, align(b.size))),
        end,
    );
    let unshared_values_bytes = max_live(
        b.values
            .iter()
            .filter(|v| v.size > 0 && (arena_constants || v.kind != BufferKind::Constant))
            .map(|v| ((v.def, v.last_use), align(v.size))),
        end,
    );
    let timeline = b
        .timeline
        .iter()
        .map(|&(inst, id)| {
            let c = m.computation(b.instances[inst]);
            format!("{}/{}", c.name, c.get(id).name)
        })
        .collect();
    let _ = code_computations;
    BufferAssignment {
        buffers,
        peak_bytes,
        total_bytes,
        lower_bound_bytes,
        unshared_values_bytes,
        timeline,
        alignment,
        instances: b.instances,
        value_buffers,
        scratch_buffers,
        loop_copy_temps,
        written_early: b.written_early,
        side_outputs,
    }
}

/// Largest sum of sizes live at one position.
fn max_live(items: impl Iterator<Item = ((usize, usize), i64)>, end: usize) -> i64 {
    let mut delta = vec![0i64; end + 3];
    for ((s, e), size) in items {
        delta[s] += size;
        delta[e + 1] -= size;
    }
    let (mut live, mut peak) = (0i64, 0i64);
    for d in delta {
        live += d;
        peak = peak.max(live);
    }
    peak
}

/// Gives every buffer an offset so that buffers live at the same time do not overlap; tries
/// two orders (largest first, earliest first) and keeps the smaller result. Buffers that are
/// not `placed` in the arena get offset -1. Returns the peak.
fn place(buffers: &mut [Buffer], alignment: i64, in_arena: impl Fn(&Buffer) -> bool) -> i64 {
    let align = |n: i64| align_to(n, alignment);
    let overlaps = |a: (usize, usize), b: (usize, usize)| a.0 <= b.1 && b.0 <= a.1;
    let try_order = |order: &[usize], buffers: &[Buffer]| -> (Vec<i64>, i64) {
        let mut offsets = vec![-1i64; buffers.len()];
        let mut placed: Vec<usize> = Vec::new();
        let mut peak = 0;
        for &i in order {
            let size = align(buffers[i].size);
            let mut busy: Vec<(i64, i64)> = placed
                .iter()
                .filter(|&&j| overlaps(buffers[i].live_range, buffers[j].live_range))
                .map(|&j| (offsets[j], offsets[j] + align(buffers[j].size)))
                .collect();
            busy.sort();
            // Best fit: the smallest gap that holds the buffer, else the top.
            let mut best: Option<(i64, i64)> = None;
            let mut cursor = 0;
            for &(s, e) in &busy {
                if s > cursor && s - cursor >= size {
                    let gap = s - cursor;
                    if best.is_none_or(|(g, _)| gap < g) {
                        best = Some((gap, cursor));
                    }
                }
                cursor = cursor.max(e);
            }
            let offset = best.map(|(_, o)| o).unwrap_or(cursor);
            offsets[i] = offset;
            peak = peak.max(offset + size);
            placed.push(i);
        }
        (offsets, peak)
    };
    let arena: Vec<usize> = (0..buffers.len())
        .filter(|&i| in_arena(&buffers[i]))
        .collect();
    let mut by_size = arena.clone();
    by_size.sort_by_key(|&i| (-buffers[i].size, buffers[i].live_range.0));
    let mut by_start = arena;
    by_start.sort_by_key(|&i| (buffers[i].live_range.0, -buffers[i].size));
    let a = try_order(&by_size, buffers);
    let b = try_order(&by_start, buffers);
    let (offsets, peak) = if b.1 < a.1 { b } else { a };
    for (buf, o) in buffers.iter_mut().zip(offsets) {
        buf.offset = o;
    }
    peak
}

impl BufferAssignment {
    /// The text of `module_NNNN.NAME.buffer-assignment.txt`.
    /// The timeline position where the most bytes are live, and the buffers live there.
    pub fn peak_position(&self) -> (usize, Vec<usize>) {
        let end = self.timeline.len();
        let mut best = (0usize, -1i64);
        for t in 0..=end {
            let live: i64 = self
                .buffers
                .iter()
                .filter(|b| in_arena(b) && b.live_range.0 <= t && t <= b.live_range.1)
                .map(|b| align_to(b.size, self.alignment))
                .sum();
            if live > best.1 {
                best = (t, live);
            }
        }
        let live = (0..self.buffers.len())
            .filter(|&i| {
                let r = self.buffers[i].live_range;
                in_arena(&self.buffers[i]) && r.0 <= best.0 && best.0 <= r.1
            })
            .collect();
        (best.0, live)
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "buffers_total_bytes: {}", self.total_bytes);
        let _ = writeln!(s, "buffers_peak_bytes: {}", self.peak_bytes);
        let _ = writeln!(s, "buffers_lower_bound_bytes: {}", self.lower_bound_bytes);
        let _ = writeln!(
            s,
            "values_unshared_peak_bytes: {}",
            self.unshared_values_bytes
        );
        let _ = writeln!(s, "buffers: {}", self.buffers.len());
        let (at, live) = self.peak_position();
        let _ = writeln!(
            s,
            "most bytes live at position {at}: buffers {}",
            live.iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(s);
        for (i, b) in self.buffers.iter().enumerate() {
            let kind = match b.kind {
                BufferKind::Parameter => "parameter",
                BufferKind::Constant => "constant",
                BufferKind::Temporary => "temporary",
                BufferKind::Scratch => "scratch",
                BufferKind::Side => "side",
            };
            let _ = writeln!(
                s,
                "buffer {i}: size={} offset={} live=[{},{}] kind={kind} values: {}",
                b.size,
                b.offset,
                b.live_range.0,
                b.live_range.1,
                b.values.join(", ")
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "timeline:");
        for (p, t) in self.timeline.iter().enumerate() {
            let _ = writeln!(s, "{p:5} {t}");
        }
        s
    }
}
