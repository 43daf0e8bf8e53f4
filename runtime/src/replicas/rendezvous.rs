//! The in-process rendezvous of one replicated run, and each replica's link to it.
//!
//! Every execution of a collective instruction is a rendezvous keyed by (collective site, how
//! many times this replica has executed it, the group's first member): each member deposits
//! its operands and waits until the whole group has, then every member reads all deposits
//! and computes its own result (`tessel_compiler::interpreter::CollectiveStep`). A replica
//! that fails poisons the hub, and every replica waiting (or arriving later) at a rendezvous
//! stops with an error instead of deadlocking.
//!
//! When a run's replicas are split over several processes (hosts), each hub holds this
//! process's block of replicas and a [`RemoteHosts`] link: once every local member of a group
//! has deposited, the local deposits go to the hosts holding the other members, and theirs
//! arrive through [`Hub::deliver`]. Every member then reads all deposits in group order and
//! computes its result with the same code as in one process, so results stay bitwise equal.

use super::pool::SparePool;
use super::unordered_sum::partial_sums;
use super::Numbering;
use crate::feed::HostFeed;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex};
use tessel_compiler::interpreter::{CollectiveSite, EvalError, ReplicaLink};
use tessel_compiler::ir::{Array, ArrayShape, Literal, Shape};

/// The rendezvous shared by the replicas of one run.
pub struct Hub {
    replicas: usize,
    /// The replicas this process runs (all of them unless the run spans several hosts).
    local: Range<usize>,
    remote: Option<Arc<dyn RemoteHosts>>,
    state: Mutex<HubState>,
    arrived: Condvar,
    /// The arrays the run's collectives are done with, reused by the next step's.
    pub(crate) pool: SparePool,
    /// Whether all-reduce sums over every host go through the transport's own all-reduce
    /// (`--fast-allreduce`), in an order it chooses.
    unordered_sums: bool,
}

/// (site, execution count on each member, the group's first member).
pub(crate) type SlotKey = (CollectiveSite, u64, usize);

/// The other processes of a run that spans several hosts, as a hub reaches them.
pub(crate) trait RemoteHosts: Send + Sync {
    /// Hands this process's deposits `(position in group, operands)` for slot `key` to the
    /// hosts holding the group's other members.
    fn send(&self, key: &SlotKey, group: &[usize], parts: Vec<(usize, Arc<Vec<Literal>>)>);
    /// Stops every other host's run with `message`.
    fn abort(&self, message: &str);
    /// Hands this host's partial sums for slot `key` (its members' operands added in
    /// replica-id order, packed in one 1-D array) to the job's all-reduce; the total over
    /// every host comes back through [`Hub::deliver_sum`].
    fn sum(&self, key: &SlotKey, partial: Array);
    /// A local member starts (`true`) or stops (`false`) waiting for other hosts' operands:
    /// while any does, the transport looks for them often.
    fn awaiting(&self, on: bool);
}

/// Tells the transport that a member waits for other hosts' operands, for as long as it lives.
struct AwaitingRemote<'a>(&'a dyn RemoteHosts);

impl<'a> AwaitingRemote<'a> {
    fn new(remote: &'a dyn RemoteHosts) -> Self {
        remote.awaiting(true);
        AwaitingRemote(remote)
    }
}

impl Drop for AwaitingRemote<'_> {
    fn drop(&mut self) {
        self.0.awaiting(false);
    }
}

#[derive(Default)]
struct HubState {
    slots: HashMap<SlotKey, Slot>,
    poisoned: Option<String>,
}

struct Slot {
    parts: Vec<Option<Arc<Vec<Literal>>>>,
    /// Local callers still to read the slot (known once the first local caller arrives).
    readers_left: Option<usize>,
    /// Whether this process's deposits (or their partial sum) went to the other hosts.
    sent: bool,
    /// The sum over every host (an unordered sum), once it arrived.
    total: Option<Arc<Array>>,
}

impl Slot {
    fn new(group_len: usize) -> Slot {
        Slot {
            parts: vec![None; group_len],
            readers_left: None,
            sent: false,
            total: None,
        }
    }
}

impl Hub {
    pub fn new(replicas: usize) -> Hub {
        Hub {
            replicas,
            local: 0..replicas,
            remote: None,
            state: Mutex::new(HubState::default()),
            arrived: Condvar::new(),
            pool: SparePool::default(),
            unordered_sums: false,
        }
    }

    // Used by the MPI transport (`mpi` feature) and the in-process tests of spanning hubs.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    /// The hub of this process's replicas `local` of a run of `replicas` spanning several
    /// hosts, reaching the others through `remote`.
    pub(crate) fn spanning(
        replicas: usize,
        local: Range<usize>,
        remote: Arc<dyn RemoteHosts>,
    ) -> Hub {
        Hub {
            local,
            remote: Some(remote),
            ..Hub::new(replicas)
        }
    }

    /// The same hub, whose all-reduce sums over every host go through the transport's own
    /// all-reduce when `on` (`--fast-allreduce`).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn summing_unordered(self, on: bool) -> Hub {
        Hub {
            unordered_sums: on,
            ..self
        }
    }

    /// Whether an all-reduce sum over `group` goes through the transport's all-reduce: the
    /// option is on and the group is every device of a run spanning hosts.
    fn sums_unordered(&self, group: &[usize]) -> bool {
        self.unordered_sums
            && self.remote.is_some()
            && group.len() == self.replicas
            && group.iter().any(|r| !self.local.contains(r))
    }

    /// The total over every host of slot `key`'s unordered sum.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn deliver_sum(&self, key: SlotKey, total: Array) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match s.slots.get_mut(&key) {
            Some(slot) => slot.total = Some(Arc::new(total)),
            None => {
                drop(s);
                self.poison(
                    "another host's all-reduce arrived for a collective this host has not \
                     reached (the hosts must run the same program)"
                        .into(),
                );
                return;
            }
        }
        self.arrived.notify_all();
    }

    /// Deposits `mine` (this member's f32 or f64 operands, at `position` of `group`) at slot
    /// `key`; once every local member has, adds the local deposits up in replica-id order and
    /// hands the partial sums to the other hosts' all-reduce. Returns the total over every
    /// host, in arrays of `mine`'s shapes.
    pub(crate) fn meet_sum(
        &self,
        key: SlotKey,
        group: &[usize],
        callers: usize,
        position: usize,
        mine: Vec<Literal>,
    ) -> Result<Vec<Literal>, EvalError> {
        let shapes: Vec<ArrayShape> = mine
            .iter()
            .map(|l| l.as_array().map(|a| a.shape.clone()))
            .collect::<Option<_>>()
            .ok_or_else(|| EvalError::new("an unordered sum takes arrays only"))?;
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = &s.poisoned {
            return Err(EvalError::new(p.clone()));
        }
        let slot = s.slots.entry(key).or_insert_with(|| Slot::new(group.len()));
        slot.readers_left.get_or_insert(callers);
        slot.parts[position] = Some(Arc::new(mine));
        let mut local: Vec<(usize, usize)> = group
            .iter()
            .enumerate()
            .filter(|(_, r)| self.local.contains(r))
            .map(|(p, &r)| (r, p))
            .collect();
        let mut outgoing = None;
        if !slot.sent && local.iter().all(|&(_, p)| slot.parts[p].is_some()) {
            slot.sent = true;
            local.sort_unstable();
            let parts: Vec<Arc<Vec<Literal>>> = local
                .iter()
                .filter_map(|&(_, p)| slot.parts[p].clone())
                .collect();
            outgoing = Some(parts);
        }
        if let Some(parts) = outgoing {
            // Added up and sent without the lock: the other members wait meanwhile.
            drop(s);
            let spare = |shape: &ArrayShape| self.pool.take(shape);
            match (partial_sums(&parts, &spare), &self.remote) {
                (Ok(partial), Some(remote)) => remote.sum(&key, partial),
                (Err(e), _) => {
                    self.poison(e.clone());
                    return Err(EvalError::new(e));
                }
                (Ok(_), None) => return Err(EvalError::new("an unordered sum needs other hosts")),
            }
            drop(parts);
            s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        }
        loop {
            if let Some(p) = &s.poisoned {
                return Err(EvalError::new(p.clone()));
            }
            let slot = s
                .slots
                .get_mut(&key)
                .expect("slot lives until every member read it");
            if let Some(total) = slot.total.clone() {
                let left = slot.readers_left.get_or_insert(1);
                *left -= 1;
                let finished = (*left == 0).then(|| s.slots.remove(&key)).flatten();
                drop(s);
                if let Some(slot) = finished {
                    self.pool
                        .recycle(slot.parts.into_iter().flatten().collect());
                }
                let out = super::unordered_sum::unpack(&total, &shapes, &self.pool);
                if let Some(t) = Arc::into_inner(total) {
                    self.pool.put(t);
                }
                return out.map_err(EvalError::new);
            }
            s = self.arrived.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Stops the run: every replica waiting at (or later arriving at) a rendezvous fails
    /// with `message`. The first message wins, and it stops the other hosts too.
    pub fn poison(&self, message: String) {
        if let Some(first) = self.set_poison(message) {
            if let Some(remote) = &self.remote {
                remote.abort(&first);
            }
        }
    }

    // Used by the MPI transport (`mpi` feature) and the in-process tests of spanning hubs.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    /// Stops the run because another host said so (nothing is sent back).
    pub(crate) fn stop_from_remote(&self, message: String) {
        self.set_poison(message);
    }

    /// Records the first poison; returns it when this call set it.
    fn set_poison(&self, message: String) -> Option<String> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let first = s.poisoned.is_none().then(|| message.clone());
        if first.is_some() {
            s.poisoned = Some(message);
        }
        self.arrived.notify_all();
        first
    }

    // Used by the MPI transport (`mpi` feature) and the in-process tests of spanning hubs.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    /// Deposits another host's operands `(position, operands)` for slot `key` of a group of
    /// `group_len`. Deposits that do not fit the group stop the run.
    pub(crate) fn deliver(
        &self,
        key: SlotKey,
        group_len: usize,
        parts: Vec<(usize, Vec<Literal>)>,
    ) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let slot = s.slots.entry(key).or_insert_with(|| Slot::new(group_len));
        if slot.parts.len() != group_len || parts.iter().any(|(p, _)| *p >= group_len) {
            drop(s);
            self.poison(format!(
                "another host sent operands for a group of {group_len} that does not match \
                 this host's (the hosts must run the same program)"
            ));
            return;
        }
        for (position, data) in parts {
            slot.parts[position] = Some(Arc::new(data));
        }
        self.arrived.notify_all();
    }

    /// Deposits `mine` (`(position in group, operands)`, every deposit of one caller) at slot
    /// `key` of `group` and returns every member's deposit, in group order, once all have
    /// arrived. `callers` is how many local calls meet at the slot.
    pub(crate) fn meet(
        &self,
        key: SlotKey,
        group: &[usize],
        callers: usize,
        mine: Vec<(usize, Vec<Literal>)>,
    ) -> Result<Vec<Arc<Vec<Literal>>>, EvalError> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = &s.poisoned {
            return Err(EvalError::new(p.clone()));
        }
        let slot = s.slots.entry(key).or_insert_with(|| Slot::new(group.len()));
        slot.readers_left.get_or_insert(callers);
        for (position, data) in mine {
            slot.parts[position] = Some(Arc::new(data));
        }
        let mut outgoing = None;
        if let Some(remote) = &self.remote {
            let local = |&(_, r): &(usize, &usize)| self.local.contains(r);
            let spans = group.iter().any(|r| !self.local.contains(r));
            let positions = || group.iter().enumerate().filter(local).map(|(p, _)| p);
            if spans && !slot.sent && positions().all(|p| slot.parts[p].is_some()) {
                slot.sent = true;
                let parts: Vec<_> = positions()
                    .map(|p| (p, slot.parts[p].clone().expect("checked above")))
                    .collect();
                outgoing = Some((remote, parts));
            }
        }
        self.arrived.notify_all();
        if let Some((remote, parts)) = outgoing {
            // Sent without the lock: the other side may take its own hub's lock.
            drop(s);
            remote.send(&key, group, parts);
            s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        }
        let spans = group.iter().any(|r| !self.local.contains(r));
        let mut awaiting = None;
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
                let left = slot.readers_left.get_or_insert(1);
                *left -= 1;
                if *left == 0 {
                    s.slots.remove(&key);
                }
                return Ok(parts);
            }
            if let (None, Some(remote), true) = (&awaiting, &self.remote, spans) {
                awaiting = Some(AwaitingRemote::new(remote.as_ref()));
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
    /// The first device of this process: the host feed counts this process's devices from it.
    feed_base: usize,
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
            feed_base: 0,
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
            feed_base: 0,
            count,
            partitions: numbering.partitions(count),
            hub: Some(hub),
            feed,
            executions: RefCell::default(),
        }
    }

    /// The same device, whose host feed holds only this process's devices from `first` on
    /// (a run spanning several hosts).
    pub(crate) fn with_feed_base(self, first: usize) -> ReplicaContext<'f> {
        ReplicaContext {
            feed_base: first,
            ..self
        }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// This device's position in `group`, and how many times it has now reached `site`.
    fn arrive(&self, site: CollectiveSite, group: &[usize]) -> Result<(usize, u64), EvalError> {
        let position = group.iter().position(|&r| r == self.id).ok_or_else(|| {
            EvalError::new(format!("device {} is not in its group {group:?}", self.id))
        })?;
        let mut ex = self.executions.borrow_mut();
        let c = ex.entry(site).or_insert(0);
        *c += 1;
        Ok((position, *c))
    }

    /// The spare arrays of this device's run (`None`: a run of one replica, which keeps none).
    pub(crate) fn pool(&self) -> Option<&SparePool> {
        self.hub.as_deref().map(|h| &h.pool)
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
        let (position, count) = self.arrive(site, group)?;
        match &self.hub {
            None if group.len() == 1 => Ok(vec![Arc::new(operands)]),
            None => Err(EvalError::new(format!(
                "a collective over replicas {group:?} needs a replicated run"
            ))),
            Some(hub) => {
                let callers = group.iter().filter(|r| hub.local.contains(r)).count();
                hub.meet(
                    (site, count, group[0]),
                    group,
                    callers,
                    vec![(position, operands)],
                )
            }
        }
    }

    fn sums_unordered(&self, group: &[usize]) -> bool {
        self.hub.as_ref().is_some_and(|h| h.sums_unordered(group))
    }

    fn exchange_sum(
        &self,
        site: CollectiveSite,
        group: &[usize],
        operands: Vec<Literal>,
    ) -> Result<Vec<Literal>, EvalError> {
        let (position, count) = self.arrive(site, group)?;
        let hub = self.hub.as_ref().ok_or_else(|| {
            EvalError::new(format!(
                "a collective over replicas {group:?} needs a replicated run"
            ))
        })?;
        let callers = group.iter().filter(|r| hub.local.contains(r)).count();
        hub.meet_sum((site, count, group[0]), group, callers, position, operands)
    }

    fn spare(&self, shape: &ArrayShape) -> Option<Array> {
        self.pool()?.take(shape)
    }

    fn recycle(&self, deposits: Vec<Arc<Vec<Literal>>>) {
        if let Some(pool) = self.pool() {
            pool.recycle(deposits);
        }
    }

    fn infeed(&self, shape: &Shape) -> Result<Literal, EvalError> {
        match self.feed {
            Some(feed) => feed
                .infeed(self.id - self.feed_base, shape)
                .map_err(EvalError::new),
            None => Err(EvalError::new(
                "infeed needs a host feed: run the module with one (evaluate_with_feed)",
            )),
        }
    }

    fn outfeed(&self, value: Literal) -> Result<(), EvalError> {
        match self.feed {
            Some(feed) => feed
                .outfeed(self.id - self.feed_base, value)
                .map_err(EvalError::new),
            None => Err(EvalError::new(
                "outfeed needs a host feed: run the module with one (evaluate_with_feed)",
            )),
        }
    }
}
