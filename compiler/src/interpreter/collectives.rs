//! The math of each collective instruction, given the operands its replica group deposited.
//!
//! Every execution of a collective meets the other members of the replica group through the
//! run's [`ReplicaLink`] (the runtime owns the rendezvous and the threads): each member
//! deposits its operands and gets every member's deposit back. Each member then computes its
//! own result from the deposits here; reductions combine them in increasing device-id order,
//! so every replica gets bitwise the same sum. Which devices a group holds follows XLA's group
//! modes (see `GroupMode` and `replica_link`'s numbering).
//!
//! [`CollectiveStep`] computes one collective instruction for one replica from its operand
//! values, exactly as the interpreter does (the JIT calls it from a host routine), so both
//! backends give bitwise the same results.

use super::plan::{Plan, ScalarFn};
use super::reduce::{array_from_scalars, call_reducer, element_literal, simple_binary};
use super::replica_link::{CollectiveSite, LoneReplica, ReplicaLink};
use super::shape_ops::concatenate;
use super::{elementwise, err, EvalError, EvalResult, Evaluator};
use crate::ir::{
    Array, ArrayData, ArrayShape, BinaryOp, CollectiveAttrs, ComputationId, ElementType, InstrId,
    Literal, Module, Op,
};
use std::sync::Arc;

/// How a collective's `replica_groups` (or `source_target_pairs`) name devices: XLA's
/// `CollectiveOpGroupMode`, from whether it has a `channel_id` and `use_global_device_ids`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupMode {
    /// No channel: replica ids; each partition meets the same partition of the other replicas.
    CrossReplica,
    /// A channel on an op without `use_global_device_ids` (collective-permute): partition ids
    /// within this device's replica.
    CrossPartition,
    /// A channel without `use_global_device_ids`: replica ids, every partition of each.
    CrossReplicaAndPartition,
    /// `use_global_device_ids=true`: global device ids (replica * partitions + partition).
    FlattenedIds,
}

impl GroupMode {
    fn of(c: &CollectiveAttrs) -> EvalResult<GroupMode> {
        match (c.channel_id.is_some(), c.use_global_device_ids) {
            (false, true) => err("use_global_device_ids=true needs a channel_id"),
            (false, false) => Ok(GroupMode::CrossReplica),
            (true, false) => Ok(GroupMode::CrossReplicaAndPartition),
            (true, true) => Ok(GroupMode::FlattenedIds),
        }
    }

    /// What the ids of a group name, for messages.
    fn unit(self) -> &'static str {
        match self {
            GroupMode::CrossPartition => "partition",
            GroupMode::FlattenedIds => "device",
            _ => "replica",
        }
    }
}

/// The id the calling device has in `mode`'s numbering, and how many such ids exist.
fn own_id(link: &dyn ReplicaLink, mode: GroupMode) -> (usize, usize) {
    match mode {
        GroupMode::CrossReplica | GroupMode::CrossReplicaAndPartition => {
            (link.replica_id(), link.replica_count())
        }
        GroupMode::CrossPartition => (link.partition_id(), link.partition_count()),
        GroupMode::FlattenedIds => (link.device_id(), link.device_count()),
    }
}

/// The global device ids the ids of `group` (in `mode`'s numbering) stand for, in XLA's
/// participant order.
fn devices_of(link: &dyn ReplicaLink, mode: GroupMode, group: &[usize]) -> Vec<usize> {
    let parts = link.partition_count().max(1);
    match mode {
        GroupMode::CrossReplica => group
            .iter()
            .map(|&r| r * parts + link.partition_id())
            .collect(),
        GroupMode::CrossPartition => group
            .iter()
            .map(|&p| link.replica_id() * parts + p)
            .collect(),
        // Partition-major, as XLA's GetParticipatingDevices lists them.
        GroupMode::CrossReplicaAndPartition => (0..parts)
            .flat_map(|p| group.iter().map(move |&r| r * parts + p))
            .collect(),
        GroupMode::FlattenedIds => group.to_vec(),
    }
}

/// The devices of the calling device's group, in the order the group lists them (global
/// device ids).
fn group_of(
    link: &dyn ReplicaLink,
    mode: GroupMode,
    groups: &[Vec<i64>],
) -> EvalResult<Vec<usize>> {
    let (id, count) = own_id(link, mode);
    if groups.is_empty() {
        return Ok(devices_of(link, mode, &(0..count).collect::<Vec<_>>()));
    }
    let unit = mode.unit();
    for g in groups {
        if let Some(bad) = g.iter().find(|&&r| r < 0 || r as usize >= count) {
            return err(format!(
                "replica group {g:?} names {unit} {bad}, but only {count} {unit}s run"
            ));
        }
    }
    let group: Vec<usize> = groups
        .iter()
        .find(|g| g.contains(&(id as i64)))
        .map(|g| g.iter().map(|&r| r as usize).collect())
        .ok_or_else(|| {
            EvalError::new(format!("{unit} {id} is in no replica group of {groups:?}"))
        })?;
    Ok(devices_of(link, mode, &group))
}

/// Reduces operand `k` of the deposits (in the given order) with a collective's `to_apply`,
/// into the spare array when one is given and fits.
type Combine<'a> =
    dyn Fn(ComputationId, &[&[Literal]], usize, Option<Array>) -> EvalResult<Array> + 'a;

pub(crate) fn eval_collective(
    ev: &Evaluator,
    comp: ComputationId,
    id: InstrId,
    op: &Op,
    operands: &[&Literal],
) -> EvalResult<Literal> {
    let combine = |to_apply: ComputationId, parts: &[&[Literal]], k: usize, spare| {
        let reduce = |acc: Literal, x: Literal| -> EvalResult<Literal> {
            Ok(call_reducer(ev, to_apply, &[acc], &[x])?.pop().unwrap())
        };
        combine(simple_binary(ev, to_apply), &reduce, parts, k, spare)
    };
    let adds = |to_apply| matches!(simple_binary(ev, to_apply), Some((BinaryOp::Add, _)));
    collective(
        ev.link,
        &combine,
        &adds,
        CollectiveSite {
            computation: comp,
            instruction: id,
        },
        op,
        operands.iter().map(|l| (*l).clone()).collect(),
    )
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
            | Op::AllToAll { .. }
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

    /// Computes the instruction's value on the replica `link` stands for, from its operand
    /// values; blocks in [`ReplicaLink::exchange`] until every member of its group has arrived
    /// (or the run was stopped).
    pub fn run(&self, link: &dyn ReplicaLink, operands: &[&Literal]) -> Result<Literal, EvalError> {
        self.run_owned(link, operands.iter().map(|l| (*l).clone()).collect())
    }

    /// [`run`](Self::run) on operands the caller hands over: they become this device's deposit
    /// as they are, without a copy.
    pub fn run_owned(
        &self,
        link: &dyn ReplicaLink,
        operands: Vec<Literal>,
    ) -> Result<Literal, EvalError> {
        // A reducer that is not one binary op is evaluated by the interpreter, per element.
        let evaluator = std::cell::OnceCell::new();
        let combine = |to_apply: ComputationId, parts: &[&[Literal]], k: usize, spare| {
            let reduce = |acc: Literal, x: Literal| -> EvalResult<Literal> {
                let ev = evaluator.get_or_init(|| Evaluator::new(&self.module, &LoneReplica));
                Ok(call_reducer(ev, to_apply, &[acc], &[x])?.pop().unwrap())
            };
            combine(self.simple, &reduce, parts, k, spare)
        };
        let site = CollectiveSite {
            computation: self.comp,
            instruction: self.id,
        };
        let adds = |_| matches!(self.simple, Some((BinaryOp::Add, _)));
        collective(link, &combine, &adds, site, &self.op, operands)
    }
}

fn collective(
    link: &dyn ReplicaLink,
    combine: &Combine,
    adds: &dyn Fn(ComputationId) -> bool,
    site: CollectiveSite,
    op: &Op,
    owned: Vec<Literal>,
) -> EvalResult<Literal> {
    // What the results need of the operands, taken before they become the deposit.
    let (count, first_shape) = {
        let refs: Vec<&Literal> = owned.iter().collect();
        let arrays = super::arrays(&refs)?;
        (arrays.len(), arrays.first().map(|a| a.shape.clone()))
    };
    let tuple_or_single = |mut v: Vec<Literal>| {
        if v.len() == 1 {
            v.pop().unwrap()
        } else {
            Literal::Tuple(v)
        }
    };
    match op {
        Op::ReplicaId => Ok(u32_scalar(link.replica_id() as u32)),
        Op::PartitionId => Ok(u32_scalar(link.partition_id() as u32)),
        Op::AllReduce {
            collective,
            to_apply,
        } => {
            let group = group_of(link, GroupMode::of(collective)?, &collective.replica_groups)?;
            if adds(*to_apply) && one_float_type(&owned) && link.sums_unordered(&group) {
                return Ok(tuple_or_single(link.exchange_sum(site, &group, owned)?));
            }
            let parts = link.exchange(site, &group, owned)?;
            let ordered = in_replica_order(&group, &parts);
            let out = (0..count)
                .map(|k| {
                    let spare = leaf(ordered[0], k).ok().and_then(|a| link.spare(&a.shape));
                    combine(*to_apply, &ordered, k, spare).map(Literal::Array)
                })
                .collect::<EvalResult<Vec<_>>>();
            drop(ordered);
            link.recycle(parts);
            Ok(tuple_or_single(out?))
        }
        Op::AllGather {
            collective,
            dimension,
        } => {
            let group = group_of(link, GroupMode::of(collective)?, &collective.replica_groups)?;
            let parts = link.exchange(site, &group, owned)?;
            let out = (0..count)
                .map(|k| {
                    let pieces: Vec<&Array> = parts
                        .iter()
                        .map(|p| leaf(p, k))
                        .collect::<EvalResult<_>>()?;
                    concatenate(&pieces, *dimension).map(Literal::Array)
                })
                .collect::<EvalResult<Vec<_>>>();
            link.recycle(parts);
            Ok(tuple_or_single(out?))
        }
        Op::ReduceScatter {
            collective,
            dimension,
            to_apply,
        } => {
            let group = group_of(link, GroupMode::of(collective)?, &collective.replica_groups)?;
            let position = group
                .iter()
                .position(|&d| d == link.device_id())
                .ok_or_else(|| EvalError::new("reduce-scatter: this device is not in its group"))?;
            let parts = link.exchange(site, &group, owned)?;
            let ordered = in_replica_order(&group, &parts);
            let out = (0..count)
                .map(|k| {
                    let total = combine(*to_apply, &ordered, k, None)?;
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
            channel_id,
        } => {
            // With a channel the pairs name partitions of this replica, else replicas of this
            // partition (XLA's cross-partition and cross-replica modes).
            let mode = if channel_id.is_some() {
                GroupMode::CrossPartition
            } else {
                GroupMode::CrossReplica
            };
            let (own, count) = own_id(link, mode);
            let unit = mode.unit();
            for &(s, t) in source_target_pairs {
                if s < 0 || t < 0 || s as usize >= count || t as usize >= count {
                    return err(format!(
                        "collective-permute pair ({s}, {t}) names a {unit} that does not run \
                         ({count} {unit}s run)"
                    ));
                }
            }
            let all: Vec<usize> = (0..count).collect();
            let parts = link.exchange(site, &devices_of(link, mode, &all), owned)?;
            let source = source_target_pairs
                .iter()
                .find(|&&(_, t)| t as usize == own)
                .map(|&(s, _)| s as usize);
            let shape =
                first_shape.ok_or_else(|| EvalError::new("collective-permute needs an operand"))?;
            let out = match source {
                Some(s) => Literal::Array(leaf(&parts[s], 0)?.clone()),
                // A device nobody sends to receives zeros.
                None => Literal::Array(Array::zeros(shape)),
            };
            link.recycle(parts);
            Ok(out)
        }
        Op::AllToAll {
            collective,
            dimension,
        } => {
            // XLA's modes for all-to-all: a channel makes the ids partitions, else replicas.
            let mode = if collective.use_global_device_ids {
                return err("all-to-all has no use_global_device_ids");
            } else if collective.channel_id.is_some() {
                GroupMode::CrossPartition
            } else {
                GroupMode::CrossReplica
            };
            let group = group_of(link, mode, &collective.replica_groups)?;
            let position = group
                .iter()
                .position(|&d| d == link.device_id())
                .ok_or_else(|| EvalError::new("all-to-all: this device is not in its group"))?;
            let parts = link.exchange(site, &group, owned)?;
            let out = all_to_all(*dimension, position, &parts);
            link.recycle(parts);
            out
        }
        other => err(format!("{} is not a collective", other.opcode_name())),
    }
}

/// The all-to-all result of the member at `position` of its group, from every member's
/// operands (`parts`, in group order): chunk `position` of each member's operand along
/// `dimension`, concatenated in group order (the array form), or operand `position` of each
/// member as a tuple (the tuple form).
fn all_to_all(
    dimension: Option<i64>,
    position: usize,
    parts: &[Arc<Vec<Literal>>],
) -> EvalResult<Literal> {
    let n = parts.len();
    let Some(dimension) = dimension else {
        let out = parts
            .iter()
            .map(|p| {
                if p.len() != n {
                    return err(format!(
                        "all-to-all: the tuple form needs one operand per group member ({n}), \
                         found {}",
                        p.len()
                    ));
                }
                leaf(p, position).map(|a| Literal::Array(a.clone()))
            })
            .collect::<EvalResult<Vec<_>>>()?;
        return Ok(Literal::Tuple(out));
    };
    let d = dimension as usize;
    let pieces = parts
        .iter()
        .map(|p| {
            let x = leaf(p, 0)?;
            if dimension < 0 || d >= x.shape.rank() || x.shape.dims[d] % n as i64 != 0 {
                return err(format!(
                    "all-to-all: dimension {dimension} of {} does not split {n} ways",
                    x.shape
                ));
            }
            let chunk = x.shape.dims[d] / n as i64;
            let dims: Vec<crate::ir::SliceDim> = x
                .shape
                .dims
                .iter()
                .enumerate()
                .map(|(i, &size)| crate::ir::SliceDim {
                    start: if i == d { chunk * position as i64 } else { 0 },
                    limit: if i == d {
                        chunk * (position as i64 + 1)
                    } else {
                        size
                    },
                    stride: 1,
                })
                .collect();
            super::shape_ops::slice(x, &dims)
        })
        .collect::<EvalResult<Vec<_>>>()?;
    let refs: Vec<&Array> = pieces.iter().collect();
    concatenate(&refs, dimension).map(Literal::Array)
}

/// Whether `values` are arrays, all f32 or all f64 (what an unordered sum takes).
fn one_float_type(values: &[Literal]) -> bool {
    let ty = |l: &Literal| l.as_array().map(|a| a.element_type());
    match values.first().and_then(ty) {
        Some(t @ (ElementType::F32 | ElementType::F64)) => values.iter().all(|l| ty(l) == Some(t)),
        _ => false,
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

/// The deposits sorted by global device id (the deterministic reduction order).
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
    spare: Option<Array>,
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
        // The running value, in the spare's storage when it fits (bitwise the same values).
        let mut acc = match spare {
            Some(mut s) if s.shape == first.shape => {
                elementwise::copy_into(&mut s, first)?;
                s
            }
            _ => first.clone(),
        };
        for p in &parts[1..] {
            elementwise::binary_assign(op, &mut acc, leaf(p, k)?, swapped)?;
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
