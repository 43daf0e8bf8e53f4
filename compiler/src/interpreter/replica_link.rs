//! What the interpreter needs from the run it is part of, and nothing more: which device it
//! evaluates as, how to meet the other devices at a collective, and where `infeed` and
//! `outfeed` go.
//!
//! Devices are numbered as XLA numbers them: a run has `replica_count` replicas of
//! `partition_count` partitions each, and device `d` is replica `d / partition_count`,
//! partition `d % partition_count` (XLA's global device id). A per-replica module (collectives
//! in the entry, `pmap`'s form) runs with one partition per replica; a shard_map body (SPMD)
//! runs as one replica of as many partitions as the mesh has devices, so there `partition-id`
//! is the device's index in the mesh and `replica-id` is 0.
//!
//! The compiler only defines the contract. The runtime (`tessel_runtime::replicas`) owns the
//! threads, the rendezvous and the host queues, and implements [`ReplicaLink`] for one replica
//! thread of a run. [`LoneReplica`] is the link of a run of one replica without a host feed:
//! collectives over a group of one are the identity, and `infeed`/`outfeed` are errors.

use super::EvalError;
use crate::ir::{Array, ArrayShape, ComputationId, InstrId, Literal, Shape};
use std::sync::Arc;

/// One collective instruction of a module: what a rendezvous is keyed by, together with how
/// many times the calling replica has reached it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CollectiveSite {
    pub computation: ComputationId,
    pub instruction: InstrId,
}

/// The interpreter's (and the JIT's collective routines') view of one replica of a run.
pub trait ReplicaLink {
    /// This device's global id, in `0..device_count()`.
    fn device_id(&self) -> usize;

    /// How many devices run (replicas times partitions).
    fn device_count(&self) -> usize;

    /// How many partitions each replica has: 1 unless the run is SPMD-partitioned.
    fn partition_count(&self) -> usize {
        1
    }

    /// This device's replica, in `0..replica_count()`.
    fn replica_id(&self) -> usize {
        self.device_id() / self.partition_count().max(1)
    }

    /// This device's partition, in `0..partition_count()`.
    fn partition_id(&self) -> usize {
        self.device_id() % self.partition_count().max(1)
    }

    /// How many replicas run.
    fn replica_count(&self) -> usize {
        self.device_count() / self.partition_count().max(1)
    }

    /// Deposits `operands` for this device at the collective `site` and returns every member's
    /// deposit, in the order of `group` (global device ids; it holds this device), once all
    /// members have deposited. The n-th call for a site meets the n-th call of every other member.
    /// Fails (instead of waiting forever) when the run was stopped.
    fn exchange(
        &self,
        site: CollectiveSite,
        group: &[usize],
        operands: Vec<Literal>,
    ) -> Result<Vec<Arc<Vec<Literal>>>, EvalError>;

    /// Whether this run sums the floating-point operands of an all-reduce over `group` in
    /// an order of its own ([`exchange_sum`](Self::exchange_sum)) rather than in replica-id
    /// order: faster across hosts, not bitwise reproducible (tessel's `--fast-allreduce`).
    /// Every member of the group must get the same answer.
    fn sums_unordered(&self, _group: &[usize]) -> bool {
        false
    }

    /// The element-wise sums over every member of `group` of `operands` (f32 arrays, or f64
    /// arrays), in an order the run chooses; only called when
    /// [`sums_unordered`](Self::sums_unordered) said so.
    fn exchange_sum(
        &self,
        _site: CollectiveSite,
        group: &[usize],
        _operands: Vec<Literal>,
    ) -> Result<Vec<Literal>, EvalError> {
        Err(EvalError::new(format!(
            "this run has no unordered sum over replicas {group:?}"
        )))
    }

    /// An array of `shape` whose storage the run no longer uses (its elements are whatever
    /// they were), for a collective to write its result into; `None`: allocate a new one.
    /// Together with [`recycle`](Self::recycle) this lets a run keep a collective's buffers
    /// from one step to the next instead of allocating them every time.
    fn spare(&self, _shape: &ArrayShape) -> Option<Array> {
        None
    }

    /// Hands back the deposits an [`exchange`](Self::exchange) returned, once this device is
    /// done with them: the last member to hand a deposit back makes its storage a spare.
    fn recycle(&self, _deposits: Vec<Arc<Vec<Literal>>>) {}

    /// The next infeed value for this replica; `shape` is the data the instruction reads
    /// (without its token). Blocks until the host has a value.
    fn infeed(&self, shape: &Shape) -> Result<Literal, EvalError>;

    /// Hands one outfeed value of this replica to the host.
    fn outfeed(&self, value: Literal) -> Result<(), EvalError>;
}

/// Replica 0 of a run of one, with no host feed.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoneReplica;

impl ReplicaLink for LoneReplica {
    fn device_id(&self) -> usize {
        0
    }

    fn device_count(&self) -> usize {
        1
    }

    fn exchange(
        &self,
        _site: CollectiveSite,
        group: &[usize],
        operands: Vec<Literal>,
    ) -> Result<Vec<Arc<Vec<Literal>>>, EvalError> {
        if group.len() == 1 {
            return Ok(vec![Arc::new(operands)]);
        }
        Err(EvalError::new(format!(
            "a collective over replicas {group:?} needs a replicated run"
        )))
    }

    fn infeed(&self, _shape: &Shape) -> Result<Literal, EvalError> {
        Err(EvalError::new(
            "infeed needs a host feed: run the module with one (evaluate_with_feed)",
        ))
    }

    fn outfeed(&self, _value: Literal) -> Result<(), EvalError> {
        Err(EvalError::new(
            "outfeed needs a host feed: run the module with one (evaluate_with_feed)",
        ))
    }
}
