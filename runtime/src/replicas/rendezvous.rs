//! The in-process rendezvous of one replicated run, and each replica's link to it.
//!
//! Every execution of a collective instruction is a rendezvous keyed by (collective site, how
//! many times this replica has executed it, the group's first member): each member deposits
//! its operands and waits until the whole group has, then every member reads all deposits
//! and computes its own result (`tessel_compiler::interpreter::CollectiveStep`). A replica
//! that fails poisons the hub, and every replica waiting (or arriving later) at a rendezvous
//! stops with an error instead of deadlocking.

use super::Numbering;
use crate::feed::HostFeed;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use tessel_compiler::interpreter::{CollectiveSite, EvalError, ReplicaLink};
use tessel_compiler::ir::{Literal, Shape};

/// The rendezvous shared by the replicas of one run.
pub struct Hub {
    replicas: usize,
    state: Mutex<HubState>,
    arrived: Condvar,
}

/// (site, execution count on each member, the group's first member).
type SlotKey = (CollectiveSite, u64, usize);

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

    /// Deposits `data` for member `position` of a group of `group_len` and returns every
    /// member's deposit, in group order, once all have arrived.
    fn exchange(
        &self,
        key: SlotKey,
        group_len: usize,
        position: usize,
        data: Vec<Literal>,
    ) -> Result<Vec<Arc<Vec<Literal>>>, EvalError> {
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

/// One device of a run: its global id, how the run's devices split into replicas and
/// partitions, the hub it meets the others at, and the host feed its
/// `infeed`/`outfeed` use (when the interpreter runs it; compiled programs reach the feed
/// through `jit::host::infeed_outfeed`).
pub struct ReplicaContext<'f> {
    /// The global device id (the thread's index in the run).
    id: usize,
    count: usize,
    /// Partitions per replica: 1, or `count` for a shard_map body.
    partitions: usize,
    hub: Option<Arc<Hub>>,
    feed: Option<&'f dyn HostFeed>,
    /// How many times this replica has reached each collective site.
    executions: RefCell<HashMap<CollectiveSite, u64>>,
}

impl<'f> ReplicaContext<'f> {
    /// A run of one replica: collectives over a group of one are the identity.
    pub fn single(feed: Option<&'f dyn HostFeed>) -> ReplicaContext<'f> {
        ReplicaContext {
            id: 0,
            count: 1,
            partitions: 1,
            hub: None,
            feed,
            executions: RefCell::default(),
        }
    }

    /// Device `id` of `count`, numbered as `numbering` says, meeting the others at `hub`
    /// (made for `count` devices).
    pub fn new(
        id: usize,
        count: usize,
        numbering: Numbering,
        hub: Arc<Hub>,
        feed: Option<&'f dyn HostFeed>,
    ) -> ReplicaContext<'f> {
        debug_assert_eq!(hub.replicas, count);
        ReplicaContext {
            id,
            count,
            partitions: numbering.partitions(count),
            hub: Some(hub),
            feed,
            executions: RefCell::default(),
        }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn count(&self) -> usize {
        self.count
    }
}

impl ReplicaLink for ReplicaContext<'_> {
    fn device_id(&self) -> usize {
        self.id
    }

    fn device_count(&self) -> usize {
        self.count
    }

    fn partition_count(&self) -> usize {
        self.partitions
    }

    fn exchange(
        &self,
        site: CollectiveSite,
        group: &[usize],
        operands: Vec<Literal>,
    ) -> Result<Vec<Arc<Vec<Literal>>>, EvalError> {
        let position = group.iter().position(|&r| r == self.id).ok_or_else(|| {
            EvalError::new(format!("device {} is not in its group {group:?}", self.id))
        })?;
        let count = {
            let mut ex = self.executions.borrow_mut();
            let c = ex.entry(site).or_insert(0);
            *c += 1;
            *c
        };
        match &self.hub {
            None if group.len() == 1 => Ok(vec![Arc::new(operands)]),
            None => Err(EvalError::new(format!(
                "a collective over replicas {group:?} needs a replicated run"
            ))),
            Some(hub) => hub.exchange((site, count, group[0]), group.len(), position, operands),
        }
    }

    fn infeed(&self, shape: &Shape) -> Result<Literal, EvalError> {
        match self.feed {
            Some(feed) => feed.infeed(self.id, shape).map_err(EvalError::new),
            None => Err(EvalError::new(
                "infeed needs a host feed: run the module with one (evaluate_with_feed)",
            )),
        }
    }

    fn outfeed(&self, value: Literal) -> Result<(), EvalError> {
        match self.feed {
            Some(feed) => feed.outfeed(self.id, value).map_err(EvalError::new),
            None => Err(EvalError::new(
                "outfeed needs a host feed: run the module with one (evaluate_with_feed)",
            )),
        }
    }
}
