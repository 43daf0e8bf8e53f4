//! While-loop simplification:
//! - loop-invariant code motion: work in the body that depends only on state elements the
//!   body passes through unchanged (and on constants) is computed once before the loop and
//!   carried in as a new state element;
//! - dead loop state: a state element that neither the condition, the rest of the body nor
//!   any user of the loop's result reads is dropped from the state.
//!
//! Both need the body's root to be a `tuple` and the state to be read only through
//! `get-tuple-element`, and leave loops whose body or condition is shared alone.

use super::dce::remove_dead_instructions;
use super::util::{add_instr, caller_count, pin_roots, remove_if_dead, while_loops};
use super::{Pass, PassError};
use crate::ir::{ComputationId, InstrId, Metadata, Module, Op, Shape};
use hashbrown::{HashMap, HashSet};

#[derive(Default)]
pub struct WhileLoopSimplifier;

impl Pass for WhileLoopSimplifier {
    fn name(&self) -> &'static str {
        "while-loop-simplifier"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for cid in m.computation_ids().collect::<Vec<_>>() {
            for w in while_loops(m, cid) {
                let Some(lp) = Loop::inspect(m, cid, w) else {
                    continue;
                };
                let dead = lp.dead_elements(m);
                if !dead.is_empty() {
                    let keep: Vec<usize> = (0..lp.arity).filter(|i| !dead.contains(i)).collect();
                    rebuild_while(m, &lp, &keep, &[])?;
                    changed = true;
                }
                let Some(lp) = Loop::inspect(m, cid, w) else {
                    continue;
                };
                changed |= hoist_invariants(m, &lp)?;
            }
        }
        Ok(changed)
    }
}

/// A while loop whose state the simplifier can rewrite.
struct Loop {
    comp: ComputationId,
    instr: InstrId,
    cond: ComputationId,
    body: ComputationId,
    arity: usize,
}

impl Loop {
    fn inspect(m: &Module, comp: ComputationId, instr: InstrId) -> Option<Loop> {
        let c = m.computation(comp);
        let Op::While { condition, body } = c.get(instr).op else {
            return None;
        };
        let arity = c.get(instr).shape.as_tuple()?.len();
        if condition == body || caller_count(m, condition) != 1 || caller_count(m, body) != 1 {
            return None;
        }
        for sub in [condition, body] {
            let sc = m.computation(sub);
            let param = sc.parameter(0)?;
            if sc.root() == param
                || !sc
                    .users(param)
                    .iter()
                    .all(|&u| matches!(sc.get(u).op, Op::GetTupleElement { .. }))
            {
                return None;
            }
        }
        let b = m.computation(body);
        if b.get(b.root()).op != Op::Tuple || b.get(b.root()).operands().len() != arity {
            return None;
        }
        Some(Loop {
            comp,
            instr,
            cond: condition,
            body,
            arity,
        })
    }

    /// `get-tuple-element(param, index)` instructions of computation `sub`, by index.
    fn param_reads(m: &Module, sub: ComputationId) -> Vec<(InstrId, usize)> {
        let c = m.computation(sub);
        let param = c.parameter(0).expect("inspected loop has a parameter");
        c.users(param)
            .into_iter()
            .map(|g| match c.get(g).op {
                Op::GetTupleElement { index } => (g, index as usize),
                _ => unreachable!("inspected loop reads its state through get-tuple-element"),
            })
            .collect()
    }

    /// State elements nothing needs: an element is live when the condition reads it, a user
    /// of the loop reads it, a side effect in the body depends on it, or the body's new
    /// value of a live element depends on it. The rest are dead, even if the body keeps
    /// updating them.
    fn dead_elements(&self, m: &Module) -> Vec<usize> {
        let mut live = vec![false; self.arity];
        let cond = m.computation(self.cond);
        for (g, i) in Self::param_reads(m, self.cond) {
            live[i] |= cond.users_unordered(g).next().is_some();
        }
        let outer = m.computation(self.comp);
        if outer.root() == self.instr {
            return vec![];
        }
        for u in outer.users_unordered(self.instr) {
            match outer.get(u).op {
                Op::GetTupleElement { index } => live[index as usize] = true,
                _ => return vec![],
            }
        }
        let body = m.computation(self.body);
        let root = body.root();
        let reads: HashMap<InstrId, usize> = Self::param_reads(m, self.body).into_iter().collect();
        // Marks live the state elements `start` depends on, and queues them. A body value
        // already walked has had its elements marked, so no value is walked twice: one walk
        // per live element made this quadratic in the state's arity (ResNet-20's training
        // loop carries 175 elements through a body of 3,000 instructions).
        let mut walked = vec![false; body.index_bound()];
        let mut mark = |start: InstrId, live: &mut [bool], work: &mut Vec<usize>| {
            let mut stack = vec![start];
            while let Some(x) = stack.pop() {
                if std::mem::replace(&mut walked[x.index()], true) {
                    continue;
                }
                if let Some(&i) = reads.get(&x) {
                    if !live[i] {
                        live[i] = true;
                        work.push(i);
                    }
                }
                stack.extend(body.get(x).operands().iter().copied());
            }
        };
        let mut work: Vec<usize> = (0..self.arity).filter(|&i| live[i]).collect();
        for id in body.post_order() {
            if body.get(id).op.has_side_effect() {
                mark(id, &mut live, &mut work);
            }
        }
        while let Some(j) = work.pop() {
            mark(body.get(root).operand(j), &mut live, &mut work);
        }
        (0..self.arity).filter(|&i| !live[i]).collect()
    }
}

/// Element `i` of the loop's initial state, as an instruction of the outer computation.
fn init_element(m: &mut Module, lp: &Loop, i: usize) -> InstrId {
    let c = m.computation(lp.comp);
    let init = c.get(lp.instr).operand(0);
    if c.get(init).op == Op::Tuple {
        return c.get(init).operand(i);
    }
    let shape = c.get(init).shape.as_tuple().expect("tuple state")[i].clone();
    add_instr(
        m,
        lp.comp,
        Op::GetTupleElement { index: i as i64 },
        shape,
        &[init],
        Metadata::default(),
    )
}

/// Rebuilds the loop's state as the elements `keep` (old indices, in order) followed by new
/// elements initialised to `extra` (instructions of the outer computation). The new elements
/// pass through the body unchanged. Returns their indices.
fn rebuild_while(
    m: &mut Module,
    lp: &Loop,
    keep: &[usize],
    extra: &[InstrId],
) -> Result<Vec<usize>, PassError> {
    let err = |msg: String| PassError::new("while-loop-simplifier", msg);
    let outer = m.computation(lp.comp);
    let old_shapes: Vec<Shape> = outer.get(lp.instr).shape.as_tuple().unwrap().to_vec();
    let mut new_index: HashMap<usize, usize> = HashMap::new();
    let mut shapes = Vec::new();
    for (k, &i) in keep.iter().enumerate() {
        new_index.insert(i, k);
        shapes.push(old_shapes[i].clone());
    }
    for &e in extra {
        shapes.push(m.computation(lp.comp).get(e).shape.clone());
    }
    let state_shape = Shape::Tuple(shapes);
    let extra_indices: Vec<usize> = (keep.len()..keep.len() + extra.len()).collect();

    // The new initial state.
    let old_init = m.computation(lp.comp).get(lp.instr).operand(0);
    let mut elems: Vec<InstrId> = keep.iter().map(|&i| init_element(m, lp, i)).collect();
    elems.extend_from_slice(extra);
    let metadata = m.computation(lp.comp).get(old_init).metadata.clone();
    let init = add_instr(m, lp.comp, Op::Tuple, state_shape.clone(), &elems, metadata);

    // Condition and body read the new state.
    for sub in [lp.cond, lp.body] {
        let reads = Loop::param_reads(m, sub);
        let param = m.computation(sub).parameter(0).unwrap();
        m.computation_mut(sub).get_mut(param).shape = state_shape.clone();
        if sub == lp.body {
            let c = m.computation(sub);
            let old_root = c.root();
            let mut outs: Vec<InstrId> = keep.iter().map(|&i| c.get(old_root).operand(i)).collect();
            let root_metadata = c.get(old_root).metadata.clone();
            for &e in &extra_indices {
                let shape = state_shape.as_tuple().unwrap()[e].clone();
                let g = add_instr(
                    m,
                    sub,
                    Op::GetTupleElement { index: e as i64 },
                    shape,
                    &[param],
                    Metadata::default(),
                );
                outs.push(g);
            }
            let root = add_instr(m, sub, Op::Tuple, state_shape.clone(), &outs, root_metadata);
            let c = m.computation_mut(sub);
            c.set_root(root);
            remove_if_dead(c, old_root);
        }
        let c = m.computation_mut(sub);
        // Whatever only fed dropped elements is dead now.
        remove_dead_instructions(c);
        for (g, i) in reads {
            if !c.contains(g) {
                continue;
            }
            match new_index.get(&i) {
                Some(&k) => c.get_mut(g).op = Op::GetTupleElement { index: k as i64 },
                None => {
                    if remove_if_dead(c, g) == 0 {
                        return Err(err(format!(
                            "state element {i} of {} is still read",
                            c.name
                        )));
                    }
                }
            }
        }
    }

    // The loop itself and its users.
    let outer = m.computation_mut(lp.comp);
    outer.get_mut(lp.instr).shape = state_shape;
    outer.set_operand(lp.instr, 0, init);
    remove_if_dead(outer, old_init);
    let users = outer.users(lp.instr);
    let mut other_users = Vec::new();
    for u in users {
        match outer.get(u).op {
            Op::GetTupleElement { index } => {
                let k = *new_index
                    .get(&(index as usize))
                    .ok_or_else(|| err(format!("removed state element {index} is used")))?;
                outer.get_mut(u).op = Op::GetTupleElement { index: k as i64 };
            }
            _ => other_users.push(u),
        }
    }
    let is_root = outer.root() == lp.instr;
    if !other_users.is_empty() || is_root {
        if keep.len() != old_shapes.len() {
            return Err(err("a loop whose whole result is used lost state".into()));
        }
        // Users of the whole state see the old tuple: rebuild it from the new state.
        let mut gtes = Vec::new();
        for (i, s) in old_shapes.iter().enumerate() {
            gtes.push(add_instr(
                m,
                lp.comp,
                Op::GetTupleElement { index: i as i64 },
                s.clone(),
                &[lp.instr],
                Metadata::default(),
            ));
        }
        let restore = add_instr(
            m,
            lp.comp,
            Op::Tuple,
            Shape::Tuple(old_shapes),
            &gtes,
            Metadata::default(),
        );
        let outer = m.computation_mut(lp.comp);
        for u in other_users {
            let n = outer.get(u).operands().len();
            for slot in 0..n {
                if outer.get(u).operand(slot) == lp.instr {
                    outer.set_operand(u, slot, restore);
                }
            }
        }
        if is_root {
            outer.set_root(restore);
        }
    }
    Ok(extra_indices)
}

/// Ops that are not worth a state element of their own (cheap to recompute, or views).
fn is_cheap(op: &Op) -> bool {
    matches!(
        op,
        Op::Constant(_)
            | Op::Parameter(_)
            | Op::GetTupleElement { .. }
            | Op::Tuple
            | Op::Broadcast { .. }
            | Op::Iota { .. }
            | Op::Reshape
            | Op::Bitcast
    )
}

/// Ops that may move out of a loop: pure and not communicating.
fn is_movable(op: &Op) -> bool {
    !op.has_side_effect()
        && !op.is_collective()
        && !matches!(
            op,
            Op::Parameter(_)
                | Op::While { .. }
                | Op::Call { .. }
                | Op::Conditional { .. }
                | Op::Infeed { .. }
                | Op::Outfeed { .. }
                | Op::AfterAll
                | Op::CustomCall { .. }
                | Op::ReplicaId
                | Op::PartitionId
        )
}

fn hoist_invariants(m: &mut Module, lp: &Loop) -> Result<bool, PassError> {
    let body = m.computation(lp.body);
    let root = body.root();
    // Invariant state: slots whose new value is the old value.
    let mut invariant: HashSet<InstrId> = HashSet::new();
    for (g, i) in Loop::param_reads(m, lp.body) {
        if body.get(root).operand(i) == g {
            invariant.insert(g);
        }
    }
    let order = body.post_order();
    for &id in &order {
        let instr = body.get(id);
        if invariant.contains(&id) || !is_movable(&instr.op) || id == root {
            continue;
        }
        if instr.operands().iter().all(|o| invariant.contains(o)) {
            invariant.insert(id);
        }
    }
    // Hoist the invariant, non-cheap array values that something variant uses.
    let frontier: Vec<InstrId> = order
        .iter()
        .copied()
        .filter(|&id| {
            let instr = body.get(id);
            invariant.contains(&id)
                && !is_cheap(&instr.op)
                && instr.shape.is_array()
                && body.users_unordered(id).any(|u| !invariant.contains(&u))
        })
        .collect();
    if frontier.is_empty() {
        return Ok(false);
    }
    // Copy each frontier value's invariant operands out of the loop.
    let mut outside: HashMap<InstrId, InstrId> = HashMap::new();
    let mut outer_values = Vec::new();
    for &f in &frontier {
        outer_values.push(copy_out(m, lp, f, &mut outside));
    }
    let indices = rebuild_while(m, lp, &(0..lp.arity).collect::<Vec<_>>(), &outer_values)?;
    let param = m.computation(lp.body).parameter(0).unwrap();
    for (&f, &k) in frontier.iter().zip(&indices) {
        let c = m.computation(lp.body);
        let (shape, name) = (c.get(f).shape.clone(), c.get(f).metadata.clone());
        let g = add_instr(
            m,
            lp.body,
            Op::GetTupleElement { index: k as i64 },
            shape,
            &[param],
            name,
        );
        let c = m.computation_mut(lp.body);
        c.replace_all_uses(f, g);
        remove_if_dead(c, f);
    }
    Ok(true)
}

/// Copies the invariant body instruction `id` (and what it needs) into the outer computation.
fn copy_out(
    m: &mut Module,
    lp: &Loop,
    id: InstrId,
    outside: &mut HashMap<InstrId, InstrId>,
) -> InstrId {
    if let Some(&o) = outside.get(&id) {
        return o;
    }
    let instr = m.computation(lp.body).get(id).clone();
    let param = m.computation(lp.body).parameter(0);
    let new = match instr.op {
        Op::GetTupleElement { index } if Some(instr.operand(0)) == param => {
            init_element(m, lp, index as usize)
        }
        _ => {
            let operands: Vec<InstrId> = instr
                .operands()
                .iter()
                .map(|&o| copy_out(m, lp, o, outside))
                .collect();
            add_instr(m, lp.comp, instr.op, instr.shape, &operands, instr.metadata)
        }
    };
    outside.insert(id, new);
    new
}
