//! Loop fusion: elementwise ops, together with the broadcasts, reshapes, transposes, slices,
//! pads, concatenates, reverses and iotas that feed them, and the reduction that may consume
//! them, become one `fusion` instruction calling a new computation (XLA's
//! `fusion(...), kind=kLoop, calls=fused_computation.N`; `kInput` when a reduce is the root).
//! Then sibling fusions that read the same operand over the same iteration space and do not
//! depend on each other merge into one multi-output fusion whose root is a tuple.
//!
//! A reduce of the leading dimensions of a loop fusion's output joins that fusion as a second
//! output (a bias gradient summed from the ReLU gradient). A select-and-scatter whose windows
//! tile its operand (a max-pool gradient) may join the fusion of its only user like an
//! elementwise producer.
//!
//! Dot and convolution are never fused (they run as library calls), nor are reductions
//! anywhere but at the root of a fusion. A producer joins its consumer's fusion when all its
//! users are in that fusion and none of them was copied into another fusion (a copy reads its
//! operands from outside: Adam's `1 - b1^t` copied into every parameter's update keeps `b1^t`
//! stored); scalar constants, iotas and broadcasts of parameters or
//! constants are cheap enough to be copied into every fusion that reads them.
//!
//! A fusion holds at most [`MAX_FUSION_MEMBERS`] instructions: the JIT evaluates a fusion as
//! one expression, recursively, so an unbounded chain (10,000 elementwise ops in a row) would
//! overflow its stack. A longer chain becomes several fusions, each reading the previous
//! one's output. The bound is far above any fusion of the corpus (the MNIST step's are
//! unchanged).
//!
//! A group whose inputs (on the graph as earlier groups left it) depend on its own members is
//! not fused: its fusion would read its own output. Copies and sibling merges could combine
//! into such a group in the gradient of GELU's erfc expansion (a long chain of cheap
//! elementwise ops shared between the forward and backward passes); it used to fail with
//! "neither fused before it nor an input of its fusion" after an earlier fusion had made a cycle.

use super::fusion_concat;
use super::util::{add_named, code_computations, name_base, pin_roots, remove_if_dead};
use super::{Pass, PassError};
use crate::ir::{Computation, ComputationId, InstrId, Instruction, Metadata, Module, Op, Shape};
use hashbrown::{HashMap, HashSet};

/// Most instructions moved into one fusion (see the module doc).
pub const MAX_FUSION_MEMBERS: usize = 256;

pub struct Fusion {
    /// Merge sibling fusions into multi-output fusions.
    pub multi_output: bool,
}

impl Default for Fusion {
    fn default() -> Fusion {
        Fusion { multi_output: true }
    }
}

impl Pass for Fusion {
    fn name(&self) -> &'static str {
        "fusion"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for cid in code_computations(m) {
            // Instructions added by the fusions made so far. The graph reuses the slots of
            // removed instructions, so a later group's member that was removed (a cheap
            // instruction copied into all its users' fusions) may share its id with one of
            // these: such ids are not the group's any more.
            let mut created: HashSet<InstrId> = HashSet::new();
            let mut groups = form_groups(m.computation(cid));
            if self.multi_output {
                absorb_reduces(m.computation(cid), &mut groups);
                absorb_reduce_groups(m.computation(cid), &mut groups);
                merge_siblings(m.computation(cid), &mut groups);
                absorb_stored_producers(m.computation(cid), &mut groups);
            }
            for mut g in groups {
                // A cheap instruction copied into all its users' fusions is gone by now: a
                // group of its own has nothing left to compute.
                let c = m.computation(cid);
                let present = |x: &InstrId| c.contains(*x) && !created.contains(x);
                g.roots.retain(present);
                g.members.retain(present);
                g.copies.retain(present);
                if g.roots.is_empty() {
                    continue;
                }
                // A group whose inputs depend on its own members would read its own output:
                // fusing it would make a cycle (sibling merges and copies can combine into
                // one after earlier groups are replaced). It stays unfused instead.
                let order = Positions::of(c);
                if depends_on(c, &inputs(c, &g, &order), &g.members) {
                    continue;
                }
                created.extend(materialize(m, cid, g, &order)?);
                changed = true;
            }
        }
        Ok(changed)
    }
}

/// One future fusion: its instructions and its outputs.
struct Group {
    /// Instructions moved into the fusion.
    members: HashSet<InstrId>,
    /// Cheap instructions copied into the fusion (they stay outside for other users).
    copies: HashSet<InstrId>,
    /// Values the fusion produces, in output order (more than one: a multi-output fusion).
    roots: Vec<InstrId>,
}

fn is_scalar_constant(instr: &Instruction) -> bool {
    matches!(instr.op, Op::Constant(_)) && instr.shape.as_array().is_some_and(|a| a.rank() == 0)
}

/// Ops a fused loop nest can compute per output element.
fn is_loop_fusible(op: &Op) -> bool {
    op.is_elementwise()
        || matches!(
            op,
            Op::Broadcast { .. }
                | Op::Reshape
                | Op::Bitcast
                | Op::Transpose { .. }
                | Op::Slice { .. }
                | Op::Pad { .. }
                | Op::Concatenate { .. }
                | Op::Reverse { .. }
                | Op::Iota { .. }
        )
}

/// A select-and-scatter whose windows tile its operand (max-pool gradients: no padding or
/// dilation, stride equal to the window size, the source's windows covering the operand
/// exactly). Each output element is a function of its own window, so it can be computed inside
/// the fusion that reads it (the ReLU gradient after it) instead of being stored and read back.
fn is_tiling_select_and_scatter(c: &Computation, id: InstrId) -> bool {
    let instr = c.get(id);
    let Op::SelectAndScatter { window, .. } = &instr.op else {
        return false;
    };
    let (Some(operand), Some(source)) = (
        c.get(instr.operand(0)).shape.as_array(),
        c.get(instr.operand(1)).shape.as_array(),
    ) else {
        return false;
    };
    window.dims.len() == operand.rank()
        && source.rank() == operand.rank()
        && operand.rank() > 0
        && window
            .dims
            .iter()
            .zip(operand.dims.iter().zip(&source.dims))
            .all(|(d, (&n, &s))| {
                d.size >= 1
                    && d.stride == d.size
                    && d.pad_low == 0
                    && d.pad_high == 0
                    && d.base_dilation == 1
                    && d.window_dilation == 1
                    && s * d.size == n
            })
}

/// A single-output reduce, which may end a fusion.
fn is_fusible_reduce(c: &Computation, id: InstrId) -> bool {
    let instr = c.get(id);
    matches!(instr.op, Op::Reduce { .. }) && instr.shape.is_array() && instr.operands().len() == 2
}

/// Whether a producer is cheap enough to copy into a fusion rather than keep it outside:
/// iota, a broadcast of a parameter or constant (whose copies cannot create a cycle), or a
/// broadcast of a small value computed in the step ([`is_small_computed_broadcast`]).
fn is_cheap_copy(c: &Computation, id: InstrId) -> bool {
    let instr = c.get(id);
    match instr.op {
        Op::Iota { .. } => true,
        Op::Broadcast { .. } => {
            matches!(
                c.get(instr.operand(0)).op,
                Op::Parameter(_) | Op::Constant(_)
            ) || is_small_computed_broadcast(c, id)
        }
        _ => cheap_chain(c, id).is_some(),
    }
}

/// Most elements of a computed value whose broadcast is copied into its readers.
const SMALL_BROADCAST_ELEMENTS: i64 = 4096;

/// A broadcast of a computed value of at most [`SMALL_BROADCAST_ELEMENTS`] elements:
/// batch normalization's per-channel mean and scale, broadcast over `[N, H, W, C]`. Stored,
/// the broadcast costs a write and a read of the whole array (the Fashion-MNIST step stored
/// its `gamma * rsqrt(var + eps)` as 12.8 MB); copied, each reader loads the per-channel
/// vector, which stays in the L1 cache. A variable is not a computed value, whether a
/// parameter, a loop state element (`get-tuple-element`) or a reshape of one: its bias add
/// stays a kernel the convolution routines fold, in the step and in the training loop's body
/// alike. The cycle guard of `run` keeps a group whose inputs would then depend on its
/// members unfused.
fn is_small_computed_broadcast(c: &Computation, id: InstrId) -> bool {
    let instr = c.get(id);
    if !matches!(instr.op, Op::Broadcast { .. }) || !instr.shape.is_array() {
        return false;
    }
    let small = c
        .get(instr.operand(0))
        .shape
        .as_array()
        .is_some_and(|a| a.rank() > 0 && a.element_count() <= SMALL_BROADCAST_ELEMENTS);
    let mut source = c.get(instr.operand(0));
    while matches!(source.op, Op::Reshape | Op::Bitcast) {
        source = c.get(source.operand(0));
    }
    small
        && !matches!(
            source.op,
            Op::Parameter(_) | Op::Constant(_) | Op::GetTupleElement { .. }
        )
}

/// Most ops of a chain copied into its readers ([`cheap_chain`]).
const CHEAP_CHAIN_OPS: usize = 3;

/// A chain of at most [`CHEAP_CHAIN_OPS`] adds, subtracts, multiplies, maximums, minimums,
/// negates or abses over a single array, their other operands constants (a ReLU:
/// `maximum(z, broadcast(0))`) or small computed broadcasts ([`is_small_computed_broadcast`]:
/// batch normalization's `x - mean` and `dy * scale`). Copying it into every fusion that reads
/// it costs a few instructions per element there, and saves storing it: in the MNIST step
/// each ReLU is then computed inside the max-pool and inside the max-pool gradient, and never
/// written to memory; batch normalization's variance gradient term `t + t` with
/// `t = c * (x - mean)`, read by the mean's gradient sum and by `dx`, is computed twice from
/// `x` instead of stored and read back. A bias add of a variable (`z + broadcast(bias)`) is
/// no link: it stays a kernel of its own, which the convolution routines fold into their
/// stores. Returns the chain's ops, the last one first.
fn cheap_chain(c: &Computation, id: InstrId) -> Option<Vec<InstrId>> {
    let mut ops = Vec::new();
    let leaf = chain_links(c, id, &mut ops)?;
    (c.get(leaf).shape.dims() == c.get(id).shape.dims()).then_some(ops)
}

/// Adds `id` and the cheap ops below it to `ops` (see [`cheap_chain`]) and returns the one
/// array they read; `None`, leaving `ops` as it was, when they read more than one. An
/// operand that is no link (or would make the chain too long) is the array read.
fn chain_links(c: &Computation, id: InstrId, ops: &mut Vec<InstrId>) -> Option<InstrId> {
    if ops.len() >= CHEAP_CHAIN_OPS || !is_cheap_op_of_chains(c, id) {
        return None;
    }
    let before = ops.len();
    ops.push(id);
    let mut leaf: Option<InstrId> = None;
    for &o in c.get(id).operands() {
        if is_constant_like(c, o) || ops.contains(&o) || leaf == Some(o) {
            continue;
        }
        let mark = ops.len();
        let read = match chain_links(c, o, ops) {
            Some(l) if leaf.is_none() || leaf == Some(l) => l,
            Some(_) => {
                ops.truncate(mark);
                o
            }
            None => o,
        };
        if leaf.is_some_and(|l| l != read) {
            ops.truncate(before);
            return None;
        }
        leaf = Some(read);
    }
    if leaf.is_none() {
        ops.truncate(before);
    }
    leaf
}

/// A scalar constant, a broadcast of one, or a small computed broadcast
/// ([`is_small_computed_broadcast`]): an operand that does not count as an array read.
fn is_constant_like(c: &Computation, o: InstrId) -> bool {
    let oi = c.get(o);
    is_scalar_constant(oi)
        || (matches!(oi.op, Op::Broadcast { .. }) && is_scalar_constant(c.get(oi.operand(0))))
        || is_small_computed_broadcast(c, o)
}

/// A cheap op (one of [`cheap_chain`]'s kinds) whose array operands are all of its own
/// dimensions: a link of [`cheap_chain`] that may read the same value twice (`t + t`).
fn is_cheap_op_of_chains(c: &Computation, id: InstrId) -> bool {
    use crate::ir::{BinaryOp as B, UnaryOp as U};
    let instr = c.get(id);
    matches!(
        instr.op,
        Op::Binary(B::Add | B::Subtract | B::Multiply | B::Maximum | B::Minimum)
            | Op::Unary(U::Negate | U::Abs)
    ) && instr.shape.is_array()
        && instr
            .operands()
            .iter()
            .all(|&o| is_constant_like(c, o) || c.get(o).shape.dims() == instr.shape.dims())
}

/// A single-array reduce-window, which may end a fusion like a reduce (its operand's
/// producers are computed at every window position it reads).
fn is_fusible_reduce_window(c: &Computation, id: InstrId) -> bool {
    let instr = c.get(id);
    matches!(instr.op, Op::ReduceWindow { .. })
        && instr.shape.is_array()
        && instr.operands().len() == 2
}

fn form_groups(c: &Computation) -> Vec<Group> {
    let order = c.post_order();
    let root = c.root();
    let mut grouped: HashSet<InstrId> = HashSet::new();
    // Instructions copied into a group formed so far: every copy reads its operands from
    // outside its fusion, so those operands must stay outside any fusion.
    let mut copied: HashSet<InstrId> = HashSet::new();
    let mut groups = Vec::new();
    for &start in order.iter().rev() {
        let instr = c.get(start);
        if grouped.contains(&start)
            || !instr.shape.is_array()
            || !(is_loop_fusible(&instr.op)
                || is_fusible_reduce(c, start)
                || is_fusible_reduce_window(c, start))
            || matches!(instr.op, Op::Iota { .. })
        {
            continue;
        }
        // An expensive operand of a concatenate is stored, together with the concatenate's
        // other expensive operands (`fusion_concat.rs`).
        let eligible = |o: InstrId| {
            !grouped.contains(&o)
                && o != root
                && is_loop_fusible(&c.get(o).op)
                && c.get(o).shape.is_array()
                && !matches!(c.get(o).op, Op::Iota { .. })
        };
        let mut roots = fusion_concat::stored_siblings(c, start, &eligible);
        if roots.is_empty() {
            roots.push(start);
        }
        let mut g = Group {
            members: HashSet::from_iter(roots.iter().copied()),
            copies: HashSet::new(),
            roots: roots.clone(),
        };
        let mut work = roots;
        while let Some(x) = work.pop() {
            let concat = matches!(c.get(x).op, Op::Concatenate { .. });
            for &p in c.get(x).operands() {
                if g.members.contains(&p) || g.copies.contains(&p) || grouped.contains(&p) {
                    continue;
                }
                if concat && fusion_concat::is_expensive_operand(c, p) {
                    continue;
                }
                let pi = c.get(p);
                if is_scalar_constant(pi) {
                    g.copies.insert(p);
                    continue;
                }
                if !(is_loop_fusible(&pi.op) || is_tiling_select_and_scatter(c, p))
                    || !pi.shape.is_array()
                    || g.members.len() >= MAX_FUSION_MEMBERS
                {
                    continue;
                }
                let users = c.users(p);
                if p != root
                    && users.iter().all(|u| g.members.contains(u))
                    && !users.iter().any(|u| copied.contains(u))
                {
                    g.members.insert(p);
                    work.push(p);
                } else if is_cheap_copy(c, p) {
                    g.copies.insert(p);
                    // A broadcast integer constant comes along: the JIT then sees its value
                    // (Threefry's rotations: a shift by a constant needs no test for amounts
                    // past the width). Float constants stay inputs.
                    if matches!(pi.op, Op::Broadcast { .. })
                        && is_scalar_constant(c.get(pi.operand(0)))
                        && pi.shape.element_type().is_some_and(|t| t.is_integer())
                    {
                        g.copies.insert(pi.operand(0));
                    }
                    // A chain's ops come along, and their constant operands (a ReLU's
                    // broadcast zero).
                    for x in cheap_chain(c, p).unwrap_or_default() {
                        g.copies.insert(x);
                        for &q in c.get(x).operands() {
                            let qi = c.get(q);
                            if is_scalar_constant(qi) {
                                g.copies.insert(q);
                            } else if matches!(qi.op, Op::Broadcast { .. }) && is_cheap_copy(c, q) {
                                g.copies.insert(q);
                                if is_scalar_constant(c.get(qi.operand(0))) {
                                    g.copies.insert(qi.operand(0));
                                }
                            }
                        }
                    }
                }
            }
        }
        // Worth a kernel only if it joins at least two ops that would each run as one.
        let is_view = |x: &InstrId| matches!(c.get(*x).op, Op::Reshape | Op::Bitcast);
        let work_members = g.members.iter().filter(|x| !is_view(x)).count();
        let work_copies = g
            .copies
            .iter()
            .filter(|&&x| !is_scalar_constant(c.get(x)))
            .count();
        if work_members == 0 || work_members + work_copies < 2 {
            continue;
        }
        grouped.extend(g.members.iter().copied());
        copied.extend(g.copies.iter().copied());
        groups.push(g);
    }
    groups
}

/// Values the group reads from outside, in first-use order.
fn inputs(c: &Computation, g: &Group, order: &Positions) -> Vec<InstrId> {
    let mut out = Vec::new();
    for x in order.sorted(g.members.iter().chain(&g.copies).copied()) {
        for &o in c.get(x).operands() {
            if !g.members.contains(&o) && !g.copies.contains(&o) && !out.contains(&o) {
                out.push(o);
            }
        }
    }
    out
}

/// Each instruction's place in a computation's post order, so that a group's instructions
/// are put in that order by sorting them, not by a walk over the whole order with two set
/// lookups per instruction for every group. The post order itself is still computed once
/// per group: see `docs/passes.md`.
struct Positions {
    /// By `InstrId::index()`: the place in the post order, `usize::MAX` for none.
    place: Vec<usize>,
}

impl Positions {
    fn of(c: &Computation) -> Positions {
        let mut place = vec![usize::MAX; c.index_bound()];
        for (i, x) in c.post_order().into_iter().enumerate() {
            place[x.index()] = i;
        }
        Positions { place }
    }

    fn place(&self, x: InstrId) -> usize {
        self.place.get(x.index()).copied().unwrap_or(usize::MAX)
    }

    /// Those of `ids` still in the computation, in post order, each once.
    fn sorted(&self, ids: impl Iterator<Item = InstrId>) -> Vec<InstrId> {
        let mut v: Vec<InstrId> = ids.filter(|&x| self.place(x) != usize::MAX).collect();
        v.sort_by_key(|&x| self.place(x));
        v.dedup();
        v
    }
}

/// Whether any of `from` depends (through operands) on an instruction in `targets`.
fn depends_on(c: &Computation, from: &[InstrId], targets: &HashSet<InstrId>) -> bool {
    let mut seen = vec![false; c.index_bound()];
    let mut stack: Vec<InstrId> = from.to_vec();
    while let Some(x) = stack.pop() {
        if targets.contains(&x) {
            return true;
        }
        if !seen[x.index()] {
            seen[x.index()] = true;
            stack.extend(c.get(x).operands().iter().copied());
        }
    }
    false
}

/// Adds a reduce of leading dimensions that reads the output of a single-output loop fusion,
/// and is in no fusion of its own, to that fusion as a second output (a `kInput` fusion): the loop that stores the
/// value also folds it into the reduce, instead of a second pass over it (in the MNIST step, a
/// ReLU gradient and the bias gradient summed from it).
fn absorb_reduces(c: &Computation, groups: &mut [Group]) {
    let grouped: HashSet<InstrId> = groups.iter().flat_map(|g| g.members.clone()).collect();
    for r in c.post_order() {
        if grouped.contains(&r) || !is_fusible_reduce(c, r) || !reduces_leading_dims(c, r) {
            continue;
        }
        let (x, init) = (c.get(r).operand(0), c.get(r).operand(1));
        let Some(g) = groups
            .iter_mut()
            .find(|g| g.roots == [x] && is_loop_fusible(&c.get(x).op))
        else {
            continue;
        };
        if is_scalar_constant(c.get(init)) {
            g.copies.insert(init);
        } else if depends_on(c, &[init], &g.members) {
            continue;
        }
        g.members.insert(r);
        g.roots.push(r);
    }
}

/// Moves a fused reduce of leading dimensions that reads the first output of a loop fusion
/// into that fusion, as one more output: batch normalization's gradient sums `dy` (absorbed
/// by [`absorb_reduces`]), `dy * (x - mean)` and `-(dy * scale)` in the loop that computes
/// `dy`, instead of passes that read `dy` back. The reduce's group may read that output
/// through a copied cheap op (`dy * scale` is copied into the gradient's other readers too). The reduce's group must reduce the same dimensions as
/// the fusion's reduces, of an operand of the same dimensions, and neither group may depend
/// on the other but through that output.
fn absorb_reduce_groups(c: &Computation, groups: &mut Vec<Group>) {
    let order = Positions::of(c);
    let mut g = 0;
    while g < groups.len() {
        let Some(&x) = groups[g].roots.first() else {
            g += 1;
            continue;
        };
        let x_dims = c.get(x).shape.dims().to_vec();
        let reduced = |r: InstrId| match &c.get(r).op {
            Op::Reduce { dimensions, .. } => Some(dimensions.clone()),
            _ => None,
        };
        let fits = |r: InstrId| {
            is_fusible_reduce(c, r)
                && reduces_leading_dims(c, r)
                && c.get(c.get(r).operand(0)).shape.dims() == x_dims.as_slice()
        };
        let own: Vec<InstrId> = groups[g].roots[1..].to_vec();
        // A fusion reading a max-pool gradient loops over its windows, which the JIT does for
        // one reduce only: a second one would make it evaluate the gradient point by point.
        let reads_pool_gradient = groups[g]
            .members
            .iter()
            .any(|&y| matches!(c.get(y).op, Op::SelectAndScatter { .. }));
        if !is_loop_fusible(&c.get(x).op) || reads_pool_gradient || !own.iter().all(|&r| fits(r)) {
            g += 1;
            continue;
        }
        let mut dims = own.first().and_then(|&r| reduced(r));
        let mut k = 0;
        while k < groups.len() {
            let candidate = &groups[k];
            let [r] = candidate.roots[..] else {
                k += 1;
                continue;
            };
            let same_dims = dims.is_none() || reduced(r) == dims;
            let target = &groups[g];
            let mergeable = k != g
                && fits(r)
                && same_dims
                && candidate
                    .members
                    .iter()
                    .chain(&candidate.copies)
                    .any(|&y| c.get(y).operands().contains(&x))
                && !candidate.members.contains(&x)
                && !candidate.copies.iter().any(|y| target.members.contains(y))
                && !target.copies.iter().any(|y| candidate.members.contains(y))
                && {
                    let others: Vec<InstrId> = inputs(c, candidate, &order)
                        .into_iter()
                        .filter(|i| *i != x)
                        .collect();
                    !depends_on(c, &others, &target.members)
                        && !depends_on(c, &inputs(c, target, &order), &candidate.members)
                };
            if !mergeable {
                k += 1;
                continue;
            }
            let taken = groups.remove(k);
            if k < g {
                g -= 1;
            }
            let target = &mut groups[g];
            target.members.extend(taken.members);
            target.copies.extend(taken.copies);
            target.roots.push(r);
            dims = reduced(r);
            if k < g {
                // The merged group takes the earlier place: a group of a cheap instruction
                // copied into the reduce's group comes after it, and is dropped only if every
                // reader has its copy by then (`x - mean` would be stored otherwise).
                let merged = groups.remove(g);
                groups.insert(k, merged);
                g = k;
                k += 1;
            }
        }
        g += 1;
    }
}

/// Whether reduce `r` reduces some leading dimensions of its operand and keeps the rest (a
/// bias gradient): then one loop over the operand can store it and fold it at once. Reduces
/// of trailing dimensions (softmax's row sums) stay separate, since that loop would have to
/// compute the fused value twice.
fn reduces_leading_dims(c: &Computation, r: InstrId) -> bool {
    let Op::Reduce { dimensions, .. } = &c.get(r).op else {
        return false;
    };
    let rank = c.get(c.get(r).operand(0)).shape.dims().len();
    let n = dimensions.len();
    n >= 1 && n < rank && (0..n).all(|d| dimensions.contains(&(d as i64)))
}

/// Merges loop fusions with the same output dimensions that read a common array operand
/// and are independent of each other.
///
/// Each candidate pair needs two dependency checks. Walking the graph for every pair made the
/// pass O(groups^2 x instructions): an elementwise chain of 64,000 ops reading one parameter
/// (250 groups of [`MAX_FUSION_MEMBERS`], every pair sharing that parameter) took 37 s. So
/// each group's inputs are computed once, and for the group being merged into, what depends
/// on it and what it depends on are marked once ([`Reach`]); a pair check is then a lookup
/// per input or member of the other group. The decisions are the same as the walks'.
fn merge_siblings(c: &Computation, groups: &mut Vec<Group>) {
    let order = Positions::of(c);
    let mut ins: Vec<Vec<InstrId>> = groups.iter().map(|g| inputs(c, g, &order)).collect();
    let mut i = 0;
    while i < groups.len() {
        // Built when a pair first passes the cheap checks, and again after each merge.
        let mut reach: Option<Reach> = None;
        let mut j = i + 1;
        while j < groups.len() {
            let (a, b) = (
                (&groups[i], ins[i].as_slice()),
                (&groups[j], ins[j].as_slice()),
            );
            let merge = may_merge(c, a, b) && {
                let r = reach.get_or_insert_with(|| Reach::of(c, a.0, a.1));
                !r.a_reads_from(b.0) && !r.reads_from_a(b.1)
            };
            if merge {
                let g = groups.remove(j);
                ins.remove(j);
                let a = &mut groups[i];
                a.members.extend(g.members);
                a.copies.extend(g.copies);
                a.roots.extend(g.roots);
                ins[i] = inputs(c, &groups[i], &order);
                reach = None;
            } else {
                j += 1;
            }
        }
        i += 1;
    }
}

/// Moves a loop group whose outputs are all results of the computation into a loop group of
/// the same dimensions that reads one of them, as more outputs of one fusion: Adam's new
/// moments `m` and `v` are stored as results, and the parameter's update that reads them
/// then computes them in the same loop instead of reading them back (one pass over
/// `g, m, v, p` per variable instead of two). Only when the merged group reads nothing that
/// depends on its own members.
fn absorb_stored_producers(c: &Computation, groups: &mut Vec<Group>) {
    let root = c.root();
    let order = Positions::of(c);
    let loop_kind = |g: &Group| {
        g.roots
            .iter()
            .all(|&r| !is_fusible_reduce(c, r) && !is_fusible_reduce_window(c, r) && r != root)
    };
    let mut p = 0;
    while p < groups.len() {
        let stored =
            loop_kind(&groups[p]) && groups[p].roots.iter().all(|&r| c.users(r).contains(&root));
        let dims = c.get(groups[p].roots[0]).shape.dims().to_vec();
        let same_dims = |g: &Group| g.roots.iter().all(|&r| c.get(r).shape.dims() == dims);
        let consumer = stored.then(|| {
            (0..groups.len()).find(|&q| {
                let (gp, gq) = (&groups[p], &groups[q]);
                q != p
                    && loop_kind(gq)
                    && same_dims(gp)
                    && same_dims(gq)
                    && gp.members.len() + gq.members.len() <= MAX_FUSION_MEMBERS
                    && inputs(c, gq, &order).iter().any(|x| gp.roots.contains(x))
                    && {
                        let merged = Group {
                            members: gp.members.union(&gq.members).copied().collect(),
                            copies: gp.copies.union(&gq.copies).copied().collect(),
                            roots: gq.roots.iter().chain(&gp.roots).copied().collect(),
                        };
                        !depends_on(c, &inputs(c, &merged, &order), &merged.members)
                    }
            })
        });
        let Some(Some(q)) = consumer else {
            p += 1;
            continue;
        };
        let g = groups.remove(p);
        let q = if q > p { q - 1 } else { q };
        let target = &mut groups[q];
        target.members.extend(g.members);
        target.copies.extend(g.copies);
        target.roots.extend(g.roots);
        // The merged group may itself be a stored producer of another: look again from the
        // start of the list.
        p = 0;
    }
}

/// For one group `a`: which instructions depend on its members (the members included), and
/// which its inputs depend on (the inputs included), as tables indexed by `InstrId::index()`.
struct Reach {
    after: Vec<bool>,
    before: Vec<bool>,
}

impl Reach {
    fn of(c: &Computation, a: &Group, a_inputs: &[InstrId]) -> Reach {
        Reach {
            after: Self::closure(c, a.members.iter().copied(), |x| c.users_unordered(x)),
            before: Self::closure(c, a_inputs.iter().copied(), |x| {
                c.get(x).operands().iter().copied()
            }),
        }
    }

    /// `start` and everything reached from it through `next`, marked by `InstrId::index()`.
    fn closure<I: Iterator<Item = InstrId>>(
        c: &Computation,
        start: impl Iterator<Item = InstrId>,
        next: impl Fn(InstrId) -> I,
    ) -> Vec<bool> {
        let mut marked = vec![false; c.index_bound()];
        let mut stack: Vec<InstrId> = start.collect();
        while let Some(x) = stack.pop() {
            if !std::mem::replace(&mut marked[x.index()], true) {
                stack.extend(next(x));
            }
        }
        marked
    }

    /// Whether any of `b`'s inputs depends on `a` (`depends_on(c, b_inputs, &a.members)`).
    fn reads_from_a(&self, b_inputs: &[InstrId]) -> bool {
        b_inputs.iter().any(|x| self.after[x.index()])
    }

    /// Whether `a`'s inputs depend on a member of `b` (`depends_on(c, a_inputs, &b.members)`).
    fn a_reads_from(&self, b: &Group) -> bool {
        b.members.iter().any(|x| self.before[x.index()])
    }
}

/// The checks of a sibling merge short of dependencies: both loop fusions (no reduce or
/// reduce-window root), every root with the same dimensions, and an array input in common;
/// or both reduce fusions ([`reduce_siblings`]). Each group comes with its inputs.
fn may_merge(
    c: &Computation,
    (a, ia): (&Group, &[InstrId]),
    (b, ib): (&Group, &[InstrId]),
) -> bool {
    if let Some(dims) = reduce_siblings(c, a, b) {
        return ia
            .iter()
            .any(|x| ib.contains(x) && c.get(*x).shape.dims() == dims.as_slice());
    }
    let loop_kind = |g: &Group| {
        g.roots
            .iter()
            .all(|&r| !is_fusible_reduce(c, r) && !is_fusible_reduce_window(c, r))
    };
    if !loop_kind(a) || !loop_kind(b) {
        return false;
    }
    let dims = c.get(a.roots[0]).shape.dims().to_vec();
    if b.roots
        .iter()
        .chain(&a.roots)
        .any(|&r| c.get(r).shape.dims() != dims.as_slice())
    {
        return false;
    }
    ia.iter()
        .any(|x| ib.contains(x) && c.get(*x).shape.rank() > 0)
}

/// When every root of both groups is a reduce of the same leading dimensions of an operand of
/// the same dimensions, those dimensions: the two fusions may become one pass folding all
/// the reduces (batch normalization's gradient sums `sum(dy * (x - mean))` and
/// `sum(-(dy * scale))` where `dy` is a max-pool gradient, whose own fusion keeps its one
/// reduce). A group reading a max-pool gradient is left alone for the same reason.
fn reduce_siblings(c: &Computation, a: &Group, b: &Group) -> Option<Vec<i64>> {
    let first = *a.roots.first()?;
    let Op::Reduce { dimensions, .. } = &c.get(first).op else {
        return None;
    };
    let dims = c.get(c.get(first).operand(0)).shape.dims().to_vec();
    let fits = |r: InstrId| {
        is_fusible_reduce(c, r)
            && reduces_leading_dims(c, r)
            && matches!(&c.get(r).op, Op::Reduce { dimensions: d, .. } if d == dimensions)
            && c.get(c.get(r).operand(0)).shape.dims() == dims.as_slice()
    };
    let reads_pool_gradient = |g: &Group| {
        g.members
            .iter()
            .any(|&y| matches!(c.get(y).op, Op::SelectAndScatter { .. }))
    };
    let both = [a, b];
    (both.iter().all(|g| g.roots.iter().all(|&r| fits(r)))
        && !both.iter().any(|g| reads_pool_gradient(g)))
    .then_some(dims)
}

/// Replaces group `g` of computation `cid` by a fusion; `order` is the computation's post
/// order as it is now. Returns the instructions it added (the fusion, and its
/// `get-tuple-element`s).
fn materialize(
    m: &mut Module,
    cid: ComputationId,
    g: Group,
    order: &Positions,
) -> Result<Vec<InstrId>, PassError> {
    let err = |msg: String| PassError::new("fusion", msg);
    let params = inputs(m.computation(cid), &g, order);
    let inside = order.sorted(g.members.iter().chain(&g.copies).copied());

    // The fused computation.
    let fused_name = m.unique_name("fused_computation");
    let mut fused = Computation::new(fused_name);
    let mut map: HashMap<InstrId, InstrId> = HashMap::new();
    for (k, &p) in params.iter().enumerate() {
        let shape = m.computation(cid).get(p).shape.clone();
        let name = m.unique_name(&format!("param_{k}"));
        map.insert(
            p,
            fused.add(Instruction::new(name, Op::Parameter(k as u32), shape), &[]),
        );
    }
    for &x in &inside {
        let orig = m.computation(cid).get(x).clone();
        let name = if g.copies.contains(&x) {
            m.unique_name(name_base(&orig.name))
        } else {
            orig.name.clone()
        };
        // An operand that is neither an input nor fused before its user is a grouping bug:
        // an error, not a panic.
        let operands: Vec<InstrId> = orig
            .operands()
            .iter()
            .map(|o| {
                map.get(o).copied().ok_or_else(|| {
                    err(format!(
                        "{} reads {}, which is neither fused before it nor an input of its fusion",
                        orig.name,
                        m.computation(cid).get(*o).name
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        let mut copy = Instruction::new(name, orig.op, orig.shape);
        copy.metadata = orig.metadata;
        copy.extra_attrs = orig.extra_attrs;
        map.insert(x, fused.add(copy, &operands));
    }
    let root_shapes: Vec<Shape> = g
        .roots
        .iter()
        .map(|&r| m.computation(cid).get(r).shape.clone())
        .collect();
    let fusion_shape = if g.roots.len() == 1 {
        fused.set_root(map[&g.roots[0]]);
        root_shapes[0].clone()
    } else {
        let shape = Shape::Tuple(root_shapes.clone());
        let outs: Vec<InstrId> = g.roots.iter().map(|r| map[r]).collect();
        let name = m.unique_name("tuple");
        let t = fused.add(Instruction::new(name, Op::Tuple, shape.clone()), &outs);
        fused.set_root(t);
        shape
    };
    let kind = if g
        .roots
        .iter()
        .any(|&r| is_fusible_reduce(m.computation(cid), r))
    {
        "kInput"
    } else {
        "kLoop"
    };
    let calls = m.add_computation(fused);

    // The fusion instruction replaces the group.
    let metadata = m
        .computation(cid)
        .get(*g.roots.last().unwrap())
        .metadata
        .clone();
    let fusion = add_named(
        m,
        cid,
        "fusion",
        Op::Fusion {
            kind: kind.to_string(),
            calls,
        },
        fusion_shape,
        &params,
        metadata,
    );
    let mut added = vec![fusion];
    if g.roots.len() == 1 {
        m.computation_mut(cid).replace_all_uses(g.roots[0], fusion);
    } else {
        for (i, (&r, s)) in g.roots.iter().zip(root_shapes).enumerate() {
            let gte = add_named(
                m,
                cid,
                "get-tuple-element",
                Op::GetTupleElement { index: i as i64 },
                s,
                &[fusion],
                Metadata::default(),
            );
            added.push(gte);
            m.computation_mut(cid).replace_all_uses(r, gte);
        }
    }
    let c = m.computation_mut(cid);
    // The fusion's uses replace the roots', so a member may only be read by other members.
    let members: Vec<InstrId> = inside
        .iter()
        .copied()
        .filter(|x| g.members.contains(x))
        .collect();
    if let Some(&x) = members
        .iter()
        .find(|&&x| c.users_unordered(x).any(|u| !g.members.contains(&u)))
    {
        return Err(err(format!(
            "{} is still used outside its fusion",
            c.get(x).name
        )));
    }
    c.remove_all(&members);
    for &x in &inside {
        if g.copies.contains(&x) {
            remove_if_dead(c, x);
        }
    }
    Ok(added)
}
