//! What the interpreter needs from the run it is part of, and nothing more: which replica it
//! evaluates as, how to meet the other replicas at a collective, and where `infeed` and
//! `outfeed` go.
//!
//! The compiler only defines the contract. The runtime (`tessel_runtime::replicas`) owns the
//! threads, the rendezvous and the host queues, and implements [`ReplicaLink`] for one replica
//! thread of a run. [`LoneReplica`] is the link of a run of one replica without a host feed:
//! collectives over a group of one are the identity, and `infeed`/`outfeed` are errors.

use super::EvalError;
use crate::ir::{ComputationId, InstrId, Literal, Shape};
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
    /// This replica's id, in `0..replica_count()`.
    fn replica_id(&self) -> usize;

    /// How many replicas run.
    fn replica_count(&self) -> usize;

    /// This replica's partition: one partition per replica, so 0 unless a link says otherwise.
    fn partition_id(&self) -> usize {
        0
    }

    /// Deposits `operands` for this replica at the collective `site` and returns every member's
    /// deposit, in the order of `group` (replica ids; it holds this replica), once all members
    /// have deposited. The n-th call for a site meets the n-th call of every other member.
    /// Fails (instead of waiting forever) when the run was stopped.
    fn exchange(
        &self,
        site: CollectiveSite,
        group: &[usize],
        operands: Vec<Literal>,
    ) -> Result<Vec<Arc<Vec<Literal>>>, EvalError>;

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
    fn replica_id(&self) -> usize {
        0
    }

    fn replica_count(&self) -> usize {
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
