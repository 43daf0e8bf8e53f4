//! The runs of this process that span hosts, as the communication thread finds them: every
//! process numbers its replicated runs in the order it starts them (all hosts run the same
//! program, so run k is the same run everywhere), and operands that arrive for a run this
//! process has not started yet wait here until its hub is made.

use super::comm::Outgoing;
use super::wire::Writer;
use crate::replicas::rendezvous::{Hub, RemoteHosts, SlotKey};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, Weak};
use tessel_compiler::ir::{Array, Literal};

/// Operands from another host for one slot of one run.
pub(crate) struct Delivery {
    pub(crate) key: SlotKey,
    pub(crate) group_len: usize,
    pub(crate) parts: Vec<(usize, Vec<Literal>)>,
}

#[derive(Default)]
struct State {
    next_run: u64,
    hubs: HashMap<u64, Weak<Hub>>,
    pending: HashMap<u64, Vec<Delivery>>,
    /// Set once the job is stopped (a failure here or on another host, or a silent host).
    stopped: Option<String>,
    /// Replicas per host of the latest run: what names a host's replicas in an error.
    per_host: usize,
}

/// The hubs of this process's runs, keyed by run number.
pub(crate) struct Registry {
    rank: usize,
    size: usize,
    state: Mutex<State>,
    /// How many local replicas wait for other hosts' operands right now.
    awaiting: Arc<AtomicUsize>,
}

impl Registry {
    pub(crate) fn new(rank: usize, size: usize) -> Registry {
        Registry {
            rank,
            size,
            state: Mutex::default(),
            awaiting: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hub of the next run: `devices` replicas, `local` of them here.
    pub(crate) fn start_run(
        self: &Arc<Self>,
        devices: usize,
        local: Range<usize>,
        to_comm: Sender<Outgoing>,
        unordered_sums: bool,
    ) -> Arc<Hub> {
        let mut s = self.lock();
        let run = s.next_run;
        s.next_run += 1;
        s.per_host = local.len();
        let link = RunLink {
            run,
            per_host: local.len(),
            rank: self.rank,
            size: self.size,
            to_comm: Mutex::new(to_comm),
            registry: Arc::downgrade(self),
            awaiting: self.awaiting.clone(),
        };
        let hub = Arc::new(
            Hub::spanning(devices, local, Arc::new(link)).summing_unordered(unordered_sums),
        );
        s.hubs.retain(|_, h| h.strong_count() > 0);
        s.hubs.insert(run, Arc::downgrade(&hub));
        let early = s.pending.remove(&run).unwrap_or_default();
        let stopped = s.stopped.clone();
        drop(s);
        for d in early {
            hub.deliver(d.key, d.group_len, d.parts);
        }
        if let Some(message) = stopped {
            hub.stop_from_remote(message);
        }
        hub
    }

    /// The hub of run `run`, while it is under way here.
    pub(crate) fn hub(&self, run: u64) -> Option<Arc<Hub>> {
        self.lock().hubs.get(&run).and_then(Weak::upgrade)
    }

    /// Hands another host's operands to run `run`'s hub, or keeps them until it starts.
    pub(crate) fn deliver(&self, run: u64, d: Delivery) {
        let mut s = self.lock();
        match s.hubs.get(&run).and_then(Weak::upgrade) {
            Some(hub) => {
                drop(s);
                hub.deliver(d.key, d.group_len, d.parts);
            }
            // Runs are numbered in order; one that is over here gets nothing more.
            None if run < s.next_run => {}
            None => s.pending.entry(run).or_default().push(d),
        }
    }

    /// Stops every run of this process, now and later, with `message`.
    pub(crate) fn stop(&self, message: String) {
        let mut s = self.lock();
        if s.stopped.is_none() {
            s.stopped = Some(message.clone());
        }
        let hubs: Vec<Arc<Hub>> = s.hubs.values().filter_map(Weak::upgrade).collect();
        drop(s);
        for hub in hubs {
            hub.stop_from_remote(message.clone());
        }
    }

    /// Whether a local replica waits for other hosts' operands.
    pub(crate) fn awaited(&self) -> bool {
        self.awaiting.load(Ordering::Acquire) > 0
    }

    /// Why the job stopped, if it did.
    pub(crate) fn stopped(&self) -> Option<String> {
        self.lock().stopped.clone()
    }

    /// "host h (replicas a..b)" for the latest run's split.
    pub(crate) fn host_name(&self, host: usize) -> String {
        let per_host = self.lock().per_host;
        if per_host == 0 {
            return format!("host {host}");
        }
        let first = host * per_host;
        match per_host {
            1 => format!("host {host} (replica {first})"),
            _ => format!("host {host} (replicas {first}..{})", first + per_host - 1),
        }
    }
}

/// Frame kinds (the MPI tag of the message).
pub(crate) mod tag {
    pub(crate) const DATA: i32 = 1;
    pub(crate) const ABORT: i32 = 2;
    pub(crate) const HEARTBEAT: i32 = 3;
    pub(crate) const BYE: i32 = 4;
}

/// One run's hub's way to the other hosts: frames through the communication thread.
struct RunLink {
    run: u64,
    per_host: usize,
    rank: usize,
    size: usize,
    to_comm: Mutex<Sender<Outgoing>>,
    registry: Weak<Registry>,
    awaiting: Arc<AtomicUsize>,
}

impl RunLink {
    fn post(&self, message: Outgoing) {
        let sent = self
            .to_comm
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(message);
        if sent.is_err() {
            // The communication thread is gone: nothing will arrive, so stop here.
            if let Some(r) = self.registry.upgrade() {
                r.stop("the MPI communication thread has stopped".into());
            }
        }
    }
}

/// The frame of `parts` of slot `key` of `run`.
pub(crate) fn data_frame(
    run: u64,
    key: &SlotKey,
    group_len: usize,
    parts: &[(usize, Arc<Vec<Literal>>)],
) -> Vec<u8> {
    let size = 8 * 7
        + parts
            .iter()
            .map(|(_, operands)| 8 + Writer::literals_size(operands))
            .sum::<usize>();
    let mut w = Writer::with_capacity(size);
    let (site, count, first) = key;
    w.u64(run);
    w.u64(u64::from(site.computation.0));
    w.u64(site.instruction.index() as u64);
    w.u64(*count);
    w.u64(*first as u64);
    w.u64(group_len as u64);
    w.u64(parts.len() as u64);
    for (position, operands) in parts {
        w.u64(*position as u64);
        w.literals(operands);
    }
    w.bytes
}

impl RemoteHosts for RunLink {
    fn send(&self, key: &SlotKey, group: &[usize], parts: Vec<(usize, Arc<Vec<Literal>>)>) {
        let mut hosts: Vec<usize> = group
            .iter()
            .map(|r| r / self.per_host.max(1))
            .filter(|&h| h != self.rank && h < self.size)
            .collect();
        hosts.sort_unstable();
        hosts.dedup();
        let bytes = data_frame(self.run, key, group.len(), &parts);
        self.post(Outgoing::Frame {
            hosts,
            tag: tag::DATA,
            bytes: Arc::new(bytes),
        });
    }

    fn sum(&self, key: &SlotKey, partial: Array) {
        self.post(Outgoing::Sum {
            run: self.run,
            key: *key,
            partial,
        });
    }

    fn awaiting(&self, on: bool) {
        if on {
            self.awaiting.fetch_add(1, Ordering::AcqRel);
        } else {
            self.awaiting.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn abort(&self, message: &str) {
        if let Some(r) = self.registry.upgrade() {
            r.stop(message.to_string());
        }
        let mut w = Writer::default();
        w.str(message);
        let hosts = (0..self.size).filter(|&h| h != self.rank).collect();
        self.post(Outgoing::Frame {
            hosts,
            tag: tag::ABORT,
            bytes: Arc::new(w.bytes),
        });
    }
}
