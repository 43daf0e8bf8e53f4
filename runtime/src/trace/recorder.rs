//! [`TraceRecorder`]: the event buffers of one compiled program — one per replica for its
//! kernels and routines (the infeed dequeues and outfeed enqueues among them), and one for the
//! host's input work — and the switch that starts and stops recording.
//!
//! The profile marks the program calls after every kernel (`jit/host/profile.rs`) append to
//! the buffer of the replica the calling thread runs ([`enter_replica`]). Appending is one
//! relaxed load of the switch when recording is off, and a lock-free, allocation-free store
//! into a preallocated slot when it is on.

use super::buffer::{EventBuffer, RawEvent};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// How a device records traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceOptions {
    /// Events each replica (and the host's input) can hold between two takes; more are
    /// dropped and counted ([`super::Trace::dropped`]).
    pub events_per_track: usize,
}

impl Default for TraceOptions {
    /// 262144 events per track (6 MiB each): about 80 steps of a 3000-kernel step.
    fn default() -> Self {
        TraceOptions {
            events_per_track: 1 << 18,
        }
    }
}

/// Nanoseconds on the process's monotonic clock (the profile and the trace share it).
#[inline]
pub(crate) fn now_nanos() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

thread_local! {
    static REPLICA: Cell<u32> = const { Cell::new(0) };
}

/// Restores the thread's previous replica number when dropped.
pub(crate) struct ReplicaScope(u32);

impl Drop for ReplicaScope {
    fn drop(&mut self) {
        REPLICA.with(|r| r.set(self.0));
    }
}

/// Marks the current thread as running `replica` until the returned scope is dropped (a
/// thread that never says is replica 0).
pub(crate) fn enter_replica(replica: usize) -> ReplicaScope {
    let r = u32::try_from(replica).unwrap_or(u32::MAX);
    ReplicaScope(REPLICA.with(|c| c.replace(r)))
}

/// The id of a host input event in the host buffer.
pub(crate) const HOST_INPUT: u32 = 1;
/// The id of a whole run of the program in a replica's buffer (kernels are slot + 1).
pub(crate) const PROGRAM_RUN: u32 = u32::MAX;

/// The trace buffers of one program.
pub struct TraceRecorder {
    recording: AtomicBool,
    /// When recording last started: the trace's time zero.
    origin_ns: AtomicU64,
    replicas: Vec<EventBuffer>,
    host_input: EventBuffer,
}

impl std::fmt::Debug for TraceRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceRecorder")
            .field("replicas", &self.replicas.len())
            .field("recording", &self.is_recording())
            .finish()
    }
}

/// What [`TraceRecorder::take_raw`] returns: per-replica events, the host's, and the drops.
pub(crate) struct RawTrace {
    pub replicas: Vec<Vec<RawEvent>>,
    pub host_input: Vec<RawEvent>,
    pub dropped: u64,
    pub origin_ns: u64,
}

impl TraceRecorder {
    /// Buffers for `replicas` replicas and the host, allocated now; not recording.
    pub(crate) fn new(replicas: usize, options: TraceOptions) -> TraceRecorder {
        TraceRecorder {
            recording: AtomicBool::new(false),
            origin_ns: AtomicU64::new(0),
            replicas: (0..replicas.max(1))
                .map(|_| EventBuffer::new(options.events_per_track))
                .collect(),
            host_input: EventBuffer::new(options.events_per_track),
        }
    }

    /// Empties the buffers and starts recording; the trace's time zero is now.
    pub fn start(&self) {
        for b in &self.replicas {
            b.clear();
        }
        self.host_input.clear();
        self.origin_ns.store(now_nanos(), Ordering::Relaxed);
        self.recording.store(true, Ordering::Release);
    }

    /// Stops recording; what was recorded stays until taken or restarted.
    pub fn stop(&self) {
        self.recording.store(false, Ordering::Release);
    }

    #[inline]
    pub fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    /// Records a kernel or routine (profile slot `slot`) on the calling thread's replica.
    #[inline]
    pub(crate) fn record_slot(&self, slot: u64, start_ns: u64, end_ns: u64) {
        if !self.is_recording() {
            return;
        }
        let id = u32::try_from(slot.saturating_add(1))
            .unwrap_or(PROGRAM_RUN - 1)
            .min(PROGRAM_RUN - 1);
        self.record_on_replica(id, start_ns, end_ns);
    }

    /// Records a whole run of the program, first mark to last, on the calling thread's replica.
    #[inline]
    pub(crate) fn record_program(&self, start_ns: u64, end_ns: u64) {
        if self.is_recording() {
            self.record_on_replica(PROGRAM_RUN, start_ns, end_ns);
        }
    }

    #[inline]
    fn record_on_replica(&self, id: u32, start_ns: u64, end_ns: u64) {
        let replica = REPLICA.with(|r| r.get()) as usize;
        match self.replicas.get(replica) {
            Some(b) => b.push(id, 0, start_ns, end_ns.saturating_sub(start_ns)),
            // More replicas than the device was made for: count it, like a full buffer.
            None => self.replicas[0].push_dropped(),
        }
    }

    /// Records the host's input work that made `replica`'s next batch.
    pub(crate) fn record_host_input(&self, replica: usize, start_ns: u64, end_ns: u64) {
        if self.is_recording() {
            let arg = u32::try_from(replica).unwrap_or(u32::MAX);
            self.host_input
                .push(HOST_INPUT, arg, start_ns, end_ns.saturating_sub(start_ns));
        }
    }

    /// Takes every event recorded so far (the buffers are empty afterwards).
    pub(crate) fn take_raw(&self) -> RawTrace {
        let mut dropped = 0;
        let replicas = self
            .replicas
            .iter()
            .map(|b| {
                let (events, d) = b.take();
                dropped += d;
                events
            })
            .collect();
        let (host_input, d) = self.host_input.take();
        RawTrace {
            replicas,
            host_input,
            dropped: dropped + d,
            origin_ns: self.origin_ns.load(Ordering::Relaxed),
        }
    }
}
