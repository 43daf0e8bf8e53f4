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
//!   element took it). An entry parameter counts as dying at the loop only when the needs
//!   say the parameters are donated ([`BufferNeeds::parameters_donated`]) and nothing after
//!   the loop reads it, the entry's result included: a training loop's variables then stay
//!   in the buffers the caller wrote them to, and the loop's result is read from there;
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

mod builder;
mod layout;
mod sharing;
mod text;

use crate::ir::{ComputationId, InstrId, Module, Op};
use builder::Builder;
use hashbrown::HashMap;
use sharing::{CopyTemps, Sets};

/// Offsets and sizes are kept at this alignment unless the [`BufferNeeds`] ask for more.
pub(crate) const ALIGNMENT: i64 = 16;

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

    /// Whether the entry's parameters are the program's to overwrite once read for the last
    /// time (XLA's donated arguments): a loop's state then takes over a parameter's buffer
    /// instead of copying it in (see the module doc, "Sharing").
    fn parameters_donated(&self) -> bool {
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
    let mut b = Builder::walk_module(m, needs);
    // Which values share a buffer, in this order: each phase sees the sets of the ones before.
    let mut sets = Sets::new(&b);
    sharing::state_takes_initial_values(&b, &mut sets);
    sharing::body_writes_over_state(&b, &mut sets);
    sharing::write_in_place(&b, &mut sets);
    let copy_temps = sharing::loop_copy_temps(&mut b, &mut sets);
    let (buffers, buffer_of) = layout::collect_buffers(&b, &mut sets);
    finish(b, buffers, &buffer_of, copy_temps)
}

/// Places the buffers and builds the assignment: the per-instruction maps from values to
/// buffers, and the byte counts of the report.
fn finish(
    b: Builder,
    mut buffers: Vec<Buffer>,
    buffer_of: &[Option<usize>],
    copy_temps: CopyTemps,
) -> BufferAssignment {
    let (m, needs) = (b.m, b.needs);
    let alignment = needs.alignment();
    let align = |n: i64| align_to(n, alignment);
    let end = b.timeline.len();
    let value_buffers = b
        .leaves
        .iter()
        .map(|(&key, vs)| (key, vs.iter().map(|&v| buffer_of[v]).collect()))
        .collect();
    let scratch_buffers = b
        .scratch
        .iter()
        .map(|(&key, vs)| (key, vs.iter().filter_map(|&v| buffer_of[v]).collect()))
        .collect();
    let side_outputs = b
        .side
        .iter()
        .filter_map(|(&key, &(reader, v))| Some((key, (reader, buffer_of[v]?))))
        .collect();
    let loop_copy_temps = copy_temps
        .iter()
        .map(|(key, vs)| (*key, vs.iter().filter_map(|&v| buffer_of[v]).collect()))
        .collect();
    let arena_constants = needs.constants_in_arena();
    let placed = |buf: &Buffer| arena_constants || buf.kind != BufferKind::Constant;
    let peak_bytes = layout::place(&mut buffers, alignment, placed);
    let total_bytes = buffers
        .iter()
        .filter(|b| in_arena(b))
        .map(|b| align(b.size))
        .sum();
    let lower_bound_bytes = layout::max_live(
        buffers
            .iter()
            .filter(|b| in_arena(b))
            .map(|b| (b.live_range, align(b.size))),
        end,
    );
    let unshared_values_bytes = layout::max_live(
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
