//! How fusion groups merge once formed: a reduce joins the loop that computes its operand,
//! reduce groups join the loop fusion they read, siblings over one iteration space merge, and
//! a loop group whose outputs are all results joins the same-shaped group that reads them.

use super::*;

/// Adds a reduce of leading dimensions that reads the output of a single-output loop fusion,
/// and is in no fusion of its own, to that fusion as a second output (a `kInput` fusion): the loop that stores the
/// value also folds it into the reduce, instead of a second pass over it (in the MNIST step, a
/// ReLU gradient and the bias gradient summed from it).
pub(super) fn absorb_reduces(c: &Computation, groups: &mut [Group]) {
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
pub(super) fn absorb_reduce_groups(c: &Computation, groups: &mut Vec<Group>, order: &Positions) {
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
                    let others: Vec<InstrId> = inputs(c, candidate, order)
                        .into_iter()
                        .filter(|i| *i != x)
                        .collect();
                    !depends_on(c, &others, &target.members)
                        && !depends_on(c, &inputs(c, target, order), &candidate.members)
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
pub(super) fn merge_siblings(c: &Computation, groups: &mut Vec<Group>, order: &Positions) {
    let mut ins: Vec<Vec<InstrId>> = groups.iter().map(|g| inputs(c, g, order)).collect();
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
                ins[i] = inputs(c, &groups[i], order);
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
///
/// After each merge the search starts again from the first group, since the grown group may
/// now read another stored producer. A group absorbed keeps its place as an empty slot until
/// the end, so places stay stable, and a table from each member and copy to the groups that
/// hold it finds a producer's readers without a scan of every group (scanning every group
/// for every producer after each merge took 9-15 ms of ResNet-20's training loop).
pub(super) fn absorb_stored_producers(c: &Computation, groups: &mut Vec<Group>, order: &Positions) {
    let root = c.root();
    let loop_kind = |g: &Group| {
        g.roots
            .iter()
            .all(|&r| !is_fusible_reduce(c, r) && !is_fusible_reduce_window(c, r) && r != root)
    };
    let mut holders: HashMap<InstrId, Vec<usize>> = HashMap::new();
    for (q, g) in groups.iter().enumerate() {
        for &x in g.members.iter().chain(&g.copies) {
            holders.entry(x).or_default().push(q);
        }
    }
    let mut absorbed = vec![false; groups.len()];
    let mut p = 0;
    while p < groups.len() {
        let stored = !absorbed[p]
            && loop_kind(&groups[p])
            && groups[p]
                .roots
                .iter()
                .all(|&r| c.users_unordered(r).any(|u| u == root));
        let consumer = stored.then(|| {
            let dims = c.get(groups[p].roots[0]).shape.dims();
            let same_dims = |g: &Group| g.roots.iter().all(|&r| c.get(r).shape.dims() == dims);
            // A group can read a root only through a member or copy that uses it: those
            // groups are the candidates, tried in list order.
            let mut candidates: Vec<usize> = groups[p]
                .roots
                .iter()
                .flat_map(|&r| c.users_unordered(r))
                .flat_map(|u| holders.get(&u).into_iter().flatten().copied())
                .filter(|&q| q != p && !absorbed[q])
                .collect();
            candidates.sort_unstable();
            candidates.dedup();
            candidates.into_iter().find(|&q| {
                let (gp, gq) = (&groups[p], &groups[q]);
                loop_kind(gq)
                    && same_dims(gp)
                    && same_dims(gq)
                    && gp.members.len() + gq.members.len() <= MAX_FUSION_MEMBERS
                    && inputs(c, gq, order).iter().any(|x| gp.roots.contains(x))
                    && {
                        let merged = Group {
                            members: gp.members.union(&gq.members).copied().collect(),
                            copies: gp.copies.union(&gq.copies).copied().collect(),
                            roots: gq.roots.iter().chain(&gp.roots).copied().collect(),
                        };
                        !depends_on(c, &inputs(c, &merged, order), &merged.members)
                    }
            })
        });
        let Some(Some(q)) = consumer else {
            p += 1;
            continue;
        };
        let g = std::mem::take(&mut groups[p]);
        absorbed[p] = true;
        for &x in g.members.iter().chain(&g.copies) {
            let held = holders.entry(x).or_default();
            held.retain(|&h| h != p);
            if !held.contains(&q) {
                held.push(q);
            }
        }
        let target = &mut groups[q];
        target.members.extend(g.members);
        target.copies.extend(g.copies);
        target.roots.extend(g.roots);
        p = 0;
    }
    let mut absorbed = absorbed.into_iter();
    groups.retain(|_| !absorbed.next().unwrap_or(false));
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
