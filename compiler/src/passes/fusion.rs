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
use channel_scale_sum::sum_channel_scales_once;
use hashbrown::{HashMap, HashSet};
use merge::{absorb_reduce_groups, absorb_reduces, absorb_stored_producers, merge_siblings};
use relu_mask::read_masks_from_stored_relus;

mod broadcast_reuse;
mod channel_scale_sum;
mod merge;
mod relu_mask;

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
            changed |= sum_channel_scales_once(m, cid);
            changed |= read_masks_from_stored_relus(m.computation_mut(cid));
            // Instructions added by the fusions made so far. The graph reuses the slots of
            // removed instructions, so a later group's member that was removed (a cheap
            // instruction copied into all its users' fusions) may share its id with one of
            // these: such ids are not the group's any more.
            let mut created: HashSet<InstrId> = HashSet::new();
            // The post order before any group is replaced. It stays topological for every
            // group's members and copies, which are instructions of this graph: a
            // replacement rewires only the reads of its own roots.
            let order = Positions::of(m.computation(cid));
            let mut groups = form_groups(m.computation(cid));
            if self.multi_output {
                let c = m.computation(cid);
                absorb_reduces(c, &mut groups);
                absorb_reduce_groups(c, &mut groups, &order);
                merge_siblings(c, &mut groups, &order);
                absorb_stored_producers(c, &mut groups, &order);
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
#[derive(Default)]
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
                || is_computed_scalar_broadcast(c, id)
        }
        // A chain stored anyway is read, not recomputed: copying it would keep its operand
        // stored too (ResNet-20's `relu(y)`, which a convolution reads, and `y`).
        _ => cheap_chain(c, id).is_some() && !is_stored_anyway(c, id),
    }
}

/// Whether `id`'s value is written to memory whatever fusion does: it is the computation's
/// root, or an instruction no fusion takes in (a convolution, a dot, a tuple) reads it.
fn is_stored_anyway(c: &Computation, id: InstrId) -> bool {
    id == c.root()
        || c.users_unordered(id).any(|u| {
            !(is_loop_fusible(&c.get(u).op)
                || is_fusible_reduce(c, u)
                || is_fusible_reduce_window(c, u)
                || is_tiling_select_and_scatter(c, u))
        })
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

/// A broadcast of a computed scalar (Threefry's key words, a decayed learning rate) read by
/// several fusions: each of them loads the scalar, where a kernel of its own would store the
/// broadcast array for all of them to read (8 arrays of 512 KB in the MLP's dropout step).
/// Not a link of a [`cheap_chain`]: copied chains would keep every scalar-keyed op of a
/// Threefry round stored.
fn is_computed_scalar_broadcast(c: &Computation, id: InstrId) -> bool {
    let instr = c.get(id);
    matches!(instr.op, Op::Broadcast { .. })
        && instr.shape.is_array()
        && c.get(instr.operand(0))
            .shape
            .as_array()
            .is_some_and(|a| a.rank() == 0)
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
            // A costly small value spread over the group's elements is computed once outside.
            if broadcast_reuse::keeps_operand_outside(c, x) {
                continue;
            }
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
                if p != root
                    && c.users_unordered(p).all(|u| g.members.contains(&u))
                    && !c.users_unordered(p).any(|u| copied.contains(&u))
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
/// lookups per instruction for every group. Computed once per computation, before any group
/// is replaced (see `docs/passes.md`).
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
