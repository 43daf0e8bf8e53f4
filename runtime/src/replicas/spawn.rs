//! The reference interpreter on replicas: one thread per replica, each evaluating the entry
//! through its own [`ReplicaContext`], all meeting at one [`Hub`].
//!
//! A replica that fails (an error or a panic) poisons the hub and aborts the host feed, so no
//! other replica is left waiting on a collective or an infeed; the run reports the failure
//! that started it, not the replicas that stopped because of it.

use super::faults::PoisonOnDrop;
use super::placement::hub_for;
use super::rendezvous::ReplicaContext;
use super::{Numbering, Placement};
use crate::feed::{AbortFeedOnDrop, HostFeed};
use crate::stop_message::{is_stop_message, stopped_message};
use tessel_compiler::interpreter::{evaluate_linked, EvalError};
use tessel_compiler::ir::{Literal, Module};

/// Evaluates the entry on `args.len()` replicas, one thread each; `args[r]` are replica r's
/// arguments. Collectives exchange data in-process. If any replica fails, the others stop at
/// their next collective, and the first failure is returned.
pub fn evaluate_replicated(
    module: &Module,
    args: Vec<Vec<Literal>>,
) -> Result<Vec<Literal>, EvalError> {
    run_replicas(module, args, Numbering::Replicas, None, None)
}

/// Evaluates the entry on `args.len()` devices numbered as `numbering` says (a shard_map body
/// runs with [`Numbering::Partitions`]), with an optional host feed; as
/// [`evaluate_replicated`] otherwise.
pub fn evaluate_on_devices(
    module: &Module,
    args: Vec<Vec<Literal>>,
    numbering: Numbering,
    feed: Option<&dyn HostFeed>,
) -> Result<Vec<Literal>, EvalError> {
    run_replicas(module, args, numbering, feed, None)
}

/// [`evaluate_on_devices`] for this host's block `placement` of a run spanning several
/// hosts: `args` are the local devices' arguments, the feed holds only the local devices,
/// and the results are the local devices'.
pub fn evaluate_placed(
    module: &Module,
    args: Vec<Vec<Literal>>,
    numbering: Numbering,
    feed: Option<&dyn HostFeed>,
    placement: Option<Placement>,
) -> Result<Vec<Literal>, EvalError> {
    run_replicas(module, args, numbering, feed, placement)
}

/// [`evaluate_replicated`] with a host feed for `infeed`/`outfeed`. A replica that fails
/// (an error or a panic) aborts the feed as well as the collectives, so no replica is left
/// waiting on either.
pub fn evaluate_replicated_with_feed(
    module: &Module,
    args: Vec<Vec<Literal>>,
    feed: &dyn HostFeed,
) -> Result<Vec<Literal>, EvalError> {
    run_replicas(module, args, Numbering::Replicas, Some(feed), None)
}

/// Evaluates the entry on one replica (replica 0) whose `infeed`/`outfeed` talk to `feed`.
/// A failure aborts the feed, which releases the host threads feeding this replica.
pub fn evaluate_with_feed(
    module: &Module,
    args: &[Literal],
    feed: &dyn HostFeed,
) -> Result<Literal, EvalError> {
    let guard = AbortFeedOnDrop::new(Some(feed), 0);
    let out = evaluate_linked(module, args, &ReplicaContext::single(Some(feed)));
    match &out {
        Ok(_) => guard.disarm(),
        Err(e) => guard.fail(&e.to_string()),
    }
    out
}

fn run_replicas(
    module: &Module,
    args: Vec<Vec<Literal>>,
    numbering: Numbering,
    feed: Option<&dyn HostFeed>,
    placement: Option<Placement>,
) -> Result<Vec<Literal>, EvalError> {
    let n = args.len();
    if n == 0 {
        return Err(EvalError::new(
            "evaluate_replicated needs at least one replica",
        ));
    }
    let (hub, first, devices) = hub_for(placement, n).map_err(EvalError::new)?;
    let results: Vec<Result<Literal, EvalError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = args
            .into_iter()
            .enumerate()
            .map(|(local, replica_args)| {
                let r = first + local;
                let own_hub = hub.clone();
                std::thread::Builder::new()
                    .name(format!("replica-{r}"))
                    .spawn_scoped(scope, move || {
                        let hub = own_hub;
                        // Stop the others if this thread ends without a result (error or panic).
                        let guard = PoisonOnDrop::new(&hub, r);
                        let feed_guard = AbortFeedOnDrop::new(feed, local);
                        let link = ReplicaContext::new(r, devices, numbering, hub.clone(), feed)
                            .with_feed_base(first);
                        let out = evaluate_linked(module, &replica_args, &link);
                        match &out {
                            Ok(_) => {
                                guard.disarm();
                                feed_guard.disarm();
                            }
                            Err(e) => {
                                guard.fail(&with_replica(e.clone(), r).to_string());
                                // The feed names the replica itself.
                                feed_guard.fail(&e.to_string());
                            }
                        }
                        out.map_err(|e| with_replica(e, r))
                    })
                    .map_err(|e| {
                        // The machine has no thread for this replica: an error, not a
                        // panic, and the replicas already started must not wait for it.
                        let message = format!("no thread for the replica: {e}");
                        hub.poison(stopped_message(r, &message));
                        with_replica(EvalError::new(message), r)
                    })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(local, h)| {
                let r = first + local;
                h.and_then(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(with_replica(
                            EvalError::new("the replica's thread panicked"),
                            r,
                        ))
                    })
                })
            })
            .collect()
    });
    // Report the failure that started it, not the replicas that stopped because of it.
    let errors = || results.iter().filter_map(|r| r.as_ref().err());
    if let Some(first) = errors()
        .find(|e| !is_stop_message(&e.message))
        .or_else(|| errors().next())
    {
        return Err(first.clone());
    }
    Ok(results.into_iter().map(|r| r.unwrap()).collect())
}

fn with_replica(mut e: EvalError, replica: usize) -> EvalError {
    e.replica = Some(replica);
    e
}
