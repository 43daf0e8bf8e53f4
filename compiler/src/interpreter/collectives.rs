//! Collectives between replicas running in one process, one thread per replica.
//!
//! Every execution of a collective instruction is a rendezvous keyed by (computation,
//! instruction, how many times this replica has executed it, replica group): each member
//! deposits its operands and waits until the whole group has. Each member then computes its
//! own result from the deposits; reductions combine them in increasing replica-id order, so
//! every replica gets bitwise the same sum. A replica that fails poisons the hub, and every
//! replica waiting (or arriving later) at a rendezvous stops with an error instead of
//! deadlocking.
//!
//! The same pieces serve other backends: [`Hub`], [`ReplicaContext`] and [`PoisonOnDrop`] are
//! public, and [`CollectiveStep`] computes one collective instruction for one replica from
//! its operand values, exactly as the interpreter does (the JIT calls it from a host routine),
//! so both backends give bitwise the same results.

use super::plan::{Plan, ScalarFn};
use super::reduce::{array_from_scalars, call_reducer, element_literal, simple_binary};
use super::shape_ops::concatenate;
use super::{elementwise, err, EvalError, EvalResult, Evaluator};
use crate::ir::{
    Array, ArrayData, ArrayShape, BinaryOp, ComputationId, ElementType, InstrId, Literal, Module,
    Op,
};
use hashbrown::HashMap;
use std::cell::{Cell, RefCell};
use std::sync::{Arc, Condvar, Mutex};

pub(crate) const POISON_PREFIX: &str = "stopped because replica ";

/// The rendezvous shared by the replicas of one run.
pub struct Hub {
    replicas: usize,
    state: Mutex<HubState>,
    arrived: Condvar,
}

type SlotKey = (u32, u32, u64, usize);

#[derive(Default)]
struct HubState {
    slots: HashMap<SlotKey, Slot>,
    poisoned: Option<String>,
}

struct Slot {
    parts: Vec<Option<Arc<Vec<Literal>>>>,
    readers_left: usize,
}

impl Hub {
    pub fn new(replicas: usize) -> Hub {
        Hub {
            replicas,
            state: Mutex::new(HubState::default()),
            arrived: Condvar::new(),
        }
    }

    /// Stops the run: every replica waiting at (or later arriving at) a rendezvous fails
    /// with `message`. The first message wins.
    pub fn poison(&self, message: String) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.poisoned.is_none() {
            s.poisoned = Some(message);
        }
        self.arrived.notify_all();
    }

    /// Deposits `data` for member `position` of `group` and returns every member's deposit,
    /// in group order, once all have arrived.
    fn exchange(
        &self,
        key: SlotKey,
        group_len: usize,
        position: usize,
        data: Vec<Literal>,
    ) -> EvalResult<Vec<Arc<Vec<Literal>>>> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = &s.poisoned {
            return Err(EvalError::new(p.clone()));
        }
        let slot = s.slots.entry(key).or_insert_with(|| Slot {
            parts: vec![None; group_len],
            readers_left: group_len,
        });
        slot.parts[position] = Some(Arc::new(data));
        self.arrived.notify_all();
        loop {
            if let Some(p) = &s.poisoned {
                return Err(EvalError::new(p.clone()));
            }
            let slot = s
                .slots
                .get_mut(&key)
                .expect("slot lives until every member read it");
            if slot.parts.iter().all(|p| p.is_some()) {
                let parts = slot.parts.iter().map(|p| p.clone().unwrap()).collect();
                slot.readers_left -= 1;
                if slot.readers_left == 0 {
                    s.slots.remove(&key);
                }
                return Ok(parts);
            }
            s = self.arrived.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Whether an error only says that another replica failed first.
pub fn is_poison_consequence(e: &EvalError) -> bool {
    is_stop_message(&e.message)
}

/// Whether a message only says that another replica failed first (see
/// [`super::stopped_message`]); the message may carry a prefix naming where it surfaced.
pub fn is_stop_message(message: &str) -> bool {
    message.starts_with(POISON_PREFIX) || message.contains(&format!(": {POISON_PREFIX}"))
}

/// Poisons the hub when a replica's thread ends without disarming it (an error or a panic).
pub struct PoisonOnDrop<'h> {
    hub: &'h Hub,
    replica: usize,
    armed: Cell<bool>,
}

impl<'h> PoisonOnDrop<'h> {
    pub fn new(hub: &'h Hub, replica: usize) -> Self {
        PoisonOnDrop {
            hub,
            replica,
            armed: Cell::new(true),
        }
    }

    pub fn disarm(self) {
        self.armed.set(false);
    }

    pub fn poison_with(self, e: &EvalError) {
        self.fail(&e.to_string());
    }

    /// The replica failed with `message`: stop the others, unless it only stopped because
    /// another replica failed first.
    pub fn fail(self, message: &str) {
        if !is_stop_message(message) {
            self.hub
                .poison(format!("{POISON_PREFIX}{} failed: {message}", self.replica));
        }
        self.armed.set(false);
    }
}

impl Drop for PoisonOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed.get() {
            self.hub
                .poison(format!("{POISON_PREFIX}{} panicked", self.replica));
        }
    }
}

/// Which replica this evaluator runs as, and the hub it meets the others at.
pub struct ReplicaContext {
    pub(crate) id: usize,
    pub(crate) count: usize,
    hub: Option<Arc<Hub>>,
    executions: RefCell<HashMap<(u32, u32), u64>>,
}

impl ReplicaContext {
    /// A run of one replica: collectives over a group of one are the identity.
    pub fn single() -> ReplicaContext {
        ReplicaContext {
            id: 0,
            count: 1,
            hub: None,
            executions: RefCell::default(),
        }
    }

    /// Replica `id` of `count`, meeting the others at `hub` (made for `count` replicas).
    pub fn new(id: usize, count: usize, hub: Arc<Hub>) -> ReplicaContext {
        debug_assert_eq!(hub.replicas, count);
        ReplicaContext {
            id,
            count,
            hub: Some(hub),
            executions: RefCell::default(),
        }
    }

    /// The members of this replica's group, in the order the group lists them.
    fn group(&self, groups: &[Vec<i64>]) -> EvalResult<Vec<usize>> {
        if groups.is_empty() {
            return Ok((0..self.count).collect());
        }
        for g in groups {
            if let Some(bad) = g.iter().find(|&&r| r < 0 || r as usize >= self.count) {
                return err(format!(
                    "replica group {g:?} names replica {bad}, but only {} replicas run",
                    self.count
                ));
            }
        }
        groups
            .iter()
            .find(|g| g.contains(&(self.id as i64)))
            .map(|g| g.iter().map(|&r| r as usize).collect())
            .ok_or_else(|| {
                EvalError::new(format!(
                    "replica {} is in no replica group of {groups:?}",
                    self.id
                ))
            })
    }

    /// Exchanges `data` with the members of `group`; returns their deposits in group order.
    fn exchange(
        &self,
        comp: ComputationId,
        id: InstrId,
        group: &[usize],
        data: Vec<Literal>,
    ) -> EvalResult<Vec<Arc<Vec<Literal>>>> {
        let position = group
            .iter()
            .position(|&r| r == self.id)
            .expect("group contains this replica");
        let count = {
            let mut ex = self.executions.borrow_mut();
            let c = ex.entry((comp.0, id.index() as u32)).or_insert(0);
            *c += 1;
            *c
        };
        match &self.hub {
            None if group.len() == 1 => Ok(vec![Arc::new(data)]),
            None => err(format!(
                "a collective over replicas {group:?} needs a replicated run"
            )),
            Some(hub) => hub.exchange(
                (comp.0, id.index() as u32, count, group[0]),
                group.len(),
                position,
                data,
            ),
        }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn count(&self) -> usize {
        self.count
    }
}

/// Reduces operand `k` of the deposits (in the given order) with a collective's `to_apply`.
type Combine<'a> = dyn Fn(ComputationId, &[&[Literal]], usize) -> EvalResult<Array> + 'a;

pub(crate) fn eval_collective(
    ev: &Evaluator,
    comp: ComputationId,
    id: InstrId,
    op: &Op,
    operands: &[&Literal],
) -> EvalResult<Literal> {
    let combine = |to_apply: ComputationId, parts: &[&[Literal]], k: usize| {
        let reduce = |acc: Literal, x: Literal| -> EvalResult<Literal> {
            Ok(call_reducer(ev, to_apply, &[acc], &[x])?.pop().unwrap())
        };
        combine(simple_binary(ev, to_apply), &reduce, parts, k)
    };
    collective(&ev.replica, &combine, comp, id, op, operands)
}

/// One collective instruction of a module, ready to run for any replica outside the
/// interpreter (the JIT's collective routine holds one per instruction).
pub struct CollectiveStep {
    module: Arc<Module>,
    comp: ComputationId,
    id: InstrId,
    op: Op,
    /// The reducer as one binary op, when it is one (then no evaluator is needed).
    simple: Option<(BinaryOp, bool)>,
}

impl CollectiveStep {
    /// The collective `id` of computation `comp`.
    pub fn new(
        module: Arc<Module>,
        comp: ComputationId,
        id: InstrId,
    ) -> Result<CollectiveStep, EvalError> {
        if comp.0 as usize >= module.computations.len() {
            return err(format!("{comp} does not exist in module {}", module.name));
        }
        let op = module.computation(comp).get(id).op.clone();
        let to_apply = match &op {
            Op::AllReduce { to_apply, .. } | Op::ReduceScatter { to_apply, .. } => Some(*to_apply),
            Op::AllGather { .. }
            | Op::CollectivePermute { .. }
            | Op::ReplicaId
            | Op::PartitionId => None,
            other => return err(format!("{} is not a collective", other.opcode_name())),
        };
        let simple = to_apply.and_then(|c| match Plan::new(&module, c).scalar_fn {
            Some(ScalarFn::Binary { op, swapped }) => Some((op, swapped)),
            _ => None,
        });
        Ok(CollectiveStep {
            module,
            comp,
            id,
            op,
            simple,
        })
    }

    /// Computes the instruction's value on replica `ctx` from its operand values; blocks at
    /// the group's rendezvous until every member has arrived (or the run was stopped).
    pub fn run(&self, ctx: &ReplicaContext, operands: &[&Literal]) -> Result<Literal, EvalError> {
        // A reducer that is not one binary op is evaluated by the interpreter, per element.
        let evaluator = std::cell::OnceCell::new();
        let combine = |to_apply: ComputationId, parts: &[&[Literal]], k: usize| {
            let reduce = |acc: Literal, x: Literal| -> EvalResult<Literal> {
                let ev = evaluator
                    .get_or_init(|| Evaluator::new(&self.module, ReplicaContext::single()));
                Ok(call_reducer(ev, to_apply, &[acc], &[x])?.pop().unwrap())
            };
            combine(self.simple, &reduce, parts, k)
        };
        collective(ctx, &combine, self.comp, self.id, &self.op, operands)
    }
}

fn collective(
    ctx: &ReplicaContext,
    combine: &Combine,
    comp: ComputationId,
    id: InstrId,
    op: &Op,
    operands: &[&Literal],
) -> EvalResult<Literal> {
    let arrays = super::arrays(operands)?;
    let owned: Vec<Literal> = operands.iter().map(|l| (*l).clone()).collect();
    let tuple_or_single = |mut v: Vec<Literal>| {
        if v.len() == 1 {
            v.pop().unwrap()
        } else {
            Literal::Tuple(v)
        }
    };
    match op {
        Op::ReplicaId => Ok(u32_scalar(ctx.id as u32)),
        // One partition per replica: every program is partition 0.
        Op::PartitionId => Ok(u32_scalar(0)),
        Op::AllReduce {
            collective,
            to_apply,
        } => {
            let group = ctx.group(&collective.replica_groups)?;
            let parts = ctx.exchange(comp, id, &group, owned)?;
            let ordered = in_replica_order(&group, &parts);
            let out = (0..arrays.len())
                .map(|k| combine(*to_apply, &ordered, k).map(Literal::Array))
                .collect::<EvalResult<Vec<_>>>()?;
            Ok(tuple_or_single(out))
        }
        Op::AllGather {
            collective,
            dimension,
        } => {
            let group = ctx.group(&collective.replica_groups)?;
            let parts = ctx.exchange(comp, id, &group, owned)?;
            let out = (0..arrays.len())
                .map(|k| {
                    let pieces: Vec<&Array> = parts
                        .iter()
                        .map(|p| leaf(p, k))
                        .collect::<EvalResult<_>>()?;
                    concatenate(&pieces, *dimension).map(Literal::Array)
                })
                .collect::<EvalResult<Vec<_>>>()?;
            Ok(tuple_or_single(out))
        }
        Op::ReduceScatter {
            collective,
            dimension,
            to_apply,
        } => {
            let group = ctx.group(&collective.replica_groups)?;
            let position = group.iter().position(|&r| r == ctx.id).unwrap();
            let parts = ctx.exchange(comp, id, &group, owned)?;
            let ordered = in_replica_order(&group, &parts);
            let out = (0..arrays.len())
                .map(|k| {
                    let total = combine(*to_apply, &ordered, k)?;
                    let d = *dimension as usize;
                    if d >= total.shape.rank() || total.shape.dims[d] % group.len() as i64 != 0 {
                        return err(format!(
                            "reduce-scatter: dimension {dimension} of {} does not split {} ways",
                            total.shape,
                            group.len()
                        ));
                    }
                    let chunk = total.shape.dims[d] / group.len() as i64;
                    let dims: Vec<crate::ir::SliceDim> = total
                        .shape
                        .dims
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| crate::ir::SliceDim {
                            start: if i == d { chunk * position as i64 } else { 0 },
                            limit: if i == d {
                                chunk * (position as i64 + 1)
                            } else {
                                n
                            },
                            stride: 1,
                        })
                        .collect();
                    super::shape_ops::slice(&total, &dims).map(Literal::Array)
                })
                .collect::<EvalResult<Vec<_>>>()?;
            Ok(tuple_or_single(out))
        }
        Op::CollectivePermute {
            source_target_pairs,
            ..
        } => {
            let all: Vec<usize> = (0..ctx.count).collect();
            for &(s, t) in source_target_pairs {
                if s < 0 || t < 0 || s as usize >= ctx.count || t as usize >= ctx.count {
                    return err(format!(
                        "collective-permute pair ({s}, {t}) names a replica that does not run"
                    ));
                }
            }
            let parts = ctx.exchange(comp, id, &all, owned)?;
            let source = source_target_pairs
                .iter()
                .find(|&&(_, t)| t as usize == ctx.id)
                .map(|&(s, _)| s as usize);
            let x = arrays
                .first()
                .ok_or_else(|| EvalError::new("collective-permute needs an operand"))?;
            Ok(match source {
                Some(s) => Literal::Array(leaf(&parts[s], 0)?.clone()),
                // A replica nobody sends to receives zeros.
                None => Literal::Array(Array::zeros(x.shape.clone())),
            })
        }
        other => err(format!("{} is not a collective", other.opcode_name())),
    }
}

fn u32_scalar(v: u32) -> Literal {
    Literal::Array(Array::new(
        ArrayShape::scalar(ElementType::U32),
        ArrayData::U32(vec![v]),
    ))
}

fn leaf(part: &[Literal], k: usize) -> EvalResult<&Array> {
    part.get(k)
        .and_then(|l| l.as_array())
        .ok_or_else(|| EvalError::new(format!("collective operand {k} is not an array")))
}

/// The deposits sorted by replica id (the deterministic reduction order).
fn in_replica_order<'a>(group: &[usize], parts: &'a [Arc<Vec<Literal>>]) -> Vec<&'a [Literal]> {
    let mut order: Vec<(usize, &[Literal])> = group
        .iter()
        .copied()
        .zip(parts.iter().map(|p| p.as_slice()))
        .collect();
    order.sort_by_key(|(r, _)| *r);
    order.into_iter().map(|(_, p)| p).collect()
}

/// Reduces operand `k` of every deposit elementwise, in the given order: with `simple`'s op
/// when the reducer is one binary op, else with `reduce` per element.
fn combine(
    simple: Option<(BinaryOp, bool)>,
    reduce: &dyn Fn(Literal, Literal) -> EvalResult<Literal>,
    parts: &[&[Literal]],
    k: usize,
) -> EvalResult<Array> {
    let first = leaf(parts[0], k)?;
    for p in &parts[1..] {
        let x = leaf(p, k)?;
        if x.shape != first.shape {
            return err(format!(
                "replicas contribute {} and {} to one collective",
                first.shape, x.shape
            ));
        }
    }
    if let Some((op, swapped)) = simple {
        let mut acc = first.clone();
        for p in &parts[1..] {
            let x = leaf(p, k)?;
            acc = if swapped {
                elementwise::binary(op, x, &acc)?
            } else {
                elementwise::binary(op, &acc, x)?
            };
        }
        return Ok(acc);
    }
    let mut out = Vec::with_capacity(first.len());
    for i in 0..first.len() {
        let mut acc = element_literal(first, i);
        for p in &parts[1..] {
            let x = element_literal(leaf(p, k)?, i);
            acc = reduce(acc, x)?;
        }
        out.push(acc);
    }
    array_from_scalars(first.element_type(), &first.shape.dims, &out)
}
