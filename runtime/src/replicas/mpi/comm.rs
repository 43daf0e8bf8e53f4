//! The communication thread: the only thread of the process that calls MPI (so MPI needs no
//! more than `MPI_THREAD_FUNNELED`). It initialises MPI, sends what the hubs post, receives
//! other hosts' frames without ever blocking (`MPI_Improbe`, `MPI_Isend` and `MPI_Test` in a
//! loop), sends a heartbeat, and stops every local run when another host reports a failure or
//! stays silent longer than the timeout. At the end it says goodbye to every host and either
//! finalises MPI (success) or ends the job with `MPI_Abort` (failure), so no host waits on a
//! dead one.

use super::registry::{tag, Delivery, Registry};
use super::wire::{Reader, Writer};
use crate::replicas::rendezvous::SlotKey;
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::datatype::Equivalence;
use mpi::point_to_point::{Destination, Source};
use mpi::request::{Request, StaticScope};
use mpi::topology::Communicator;
use mpi::Threading;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessel_compiler::interpreter::CollectiveSite;
use tessel_compiler::ir::{Array, ArrayData, ComputationId, InstrId};

/// What the rest of the process asks of the communication thread.
pub(crate) enum Outgoing {
    /// `bytes` to each of `hosts`, with `tag`.
    Frame {
        hosts: Vec<usize>,
        tag: i32,
        bytes: Arc<Vec<u8>>,
    },
    /// This host's partial sums for slot `key` of run `run`, to add up with every other
    /// host's (`MPI_Iallreduce`); the total goes to the run's hub.
    Sum {
        run: u64,
        key: SlotKey,
        partial: Array,
    },
    /// The process is done (`failure`: with that error, which every other host is told);
    /// `done` is told when MPI is finalised (a failure ends the job in `MPI_Abort` instead).
    Finish {
        failure: Option<String>,
        done: Sender<()>,
    },
}

/// How often the thread looks for frames while nothing is under way here: no send or sum in
/// flight, no local replica waiting for another host. A post wakes it at once, and a replica
/// posts its own operands before it waits for the other hosts', so this bounds only how soon
/// an abort or a heartbeat is seen. Waking rarely matters when hosts share cores: every
/// wake-up preempts a replica.
const POLL_IDLE: Duration = Duration::from_millis(2);

/// How often it looks, and drives MPI, while something is under way (MPI progresses a
/// non-blocking send or collective only inside its calls).
const POLL_BUSY: Duration = Duration::from_micros(20);

/// How long a failing host waits for the others to report their own error before it ends
/// the job.
const GRACE: Duration = Duration::from_secs(2);

/// A send in flight and the frame it reads (shared by the sends of one frame to several
/// hosts, without a copy; released once the send completes).
struct InFlight {
    request: Request<'static, [u8], StaticScope>,
    buffer: Arc<Vec<u8>>,
}

impl InFlight {
    fn start(
        world: &mpi::topology::SimpleCommunicator,
        host: usize,
        tag: i32,
        buffer: Arc<Vec<u8>>,
    ) -> Self {
        // SAFETY: the frame's bytes do not move or change while an `Arc` of them is held,
        // and this send holds one until the request completes (see `try_complete`).
        let data: &'static [u8] =
            unsafe { std::slice::from_raw_parts(buffer.as_ptr(), buffer.len()) };
        let request =
            world
                .process_at_rank(host as i32)
                .immediate_send_with_tag(StaticScope, data, tag);
        InFlight { request, buffer }
    }

    /// The send is done (its frame released), or still in flight.
    fn try_complete(self) -> Result<(), InFlight> {
        match self.request.test() {
            Ok(_) => Ok(()),
            Err(request) => Err(InFlight {
                request,
                buffer: self.buffer,
            }),
        }
    }
}

/// An all-reduce of this host's partial sums in flight (`--fast-allreduce`), with the
/// buffers it reads and writes (their storage stays put while they are held here).
struct SumInFlight {
    request: SumRequest,
    partial: Array,
    total: Array,
    run: u64,
    key: SlotKey,
}

enum SumRequest {
    F32(Request<'static, [f32], StaticScope>),
    F64(Request<'static, [f64], StaticScope>),
}

impl SumInFlight {
    /// Starts `MPI_Iallreduce(partial -> total, MPI_SUM)` over every host. Every host starts
    /// these in the same order: a host posts a sum over all devices only once its replicas
    /// have the previous one's result, and the replicas run the same program.
    fn start(
        world: &mpi::topology::SimpleCommunicator,
        run: u64,
        key: SlotKey,
        partial: Array,
        mut total: Array,
    ) -> Result<Self, String> {
        // SAFETY (both arms): the vectors' storage does not move or change while `partial`
        // and `total` are held in the returned value, which keeps them until the request
        // completes (see `try_complete`); MPI writes only `total`'s.
        let request = match (&partial.data, &mut total.data) {
            (ArrayData::F32(s), ArrayData::F32(r)) if s.len() == r.len() => {
                let (s, r) = unsafe {
                    (
                        std::slice::from_raw_parts(s.as_ptr(), s.len()),
                        std::slice::from_raw_parts_mut(r.as_mut_ptr(), r.len()),
                    )
                };
                SumRequest::F32(world.immediate_all_reduce_into(
                    StaticScope,
                    s,
                    r,
                    SystemOperation::sum(),
                ))
            }
            (ArrayData::F64(s), ArrayData::F64(r)) if s.len() == r.len() => {
                let (s, r) = unsafe {
                    (
                        std::slice::from_raw_parts(s.as_ptr(), s.len()),
                        std::slice::from_raw_parts_mut(r.as_mut_ptr(), r.len()),
                    )
                };
                SumRequest::F64(world.immediate_all_reduce_into(
                    StaticScope,
                    s,
                    r,
                    SystemOperation::sum(),
                ))
            }
            _ => {
                return Err(format!(
                    "an unordered sum of {} values of {:?} into {} of {:?}",
                    partial.len(),
                    partial.element_type(),
                    total.len(),
                    total.element_type()
                ))
            }
        };
        Ok(SumInFlight {
            request,
            partial,
            total,
            run,
            key,
        })
    }

    /// The finished sum (its buffers back), or the request still in flight.
    fn try_complete(self: Box<Self>) -> Result<FinishedSum, Box<SumInFlight>> {
        let this = *self;
        let request = match this.request {
            SumRequest::F32(r) => r.test().map(drop).map_err(SumRequest::F32),
            SumRequest::F64(r) => r.test().map(drop).map_err(SumRequest::F64),
        };
        match request {
            Ok(()) => Ok(FinishedSum {
                partial: this.partial,
                total: this.total,
                run: this.run,
                key: this.key,
            }),
            Err(request) => Err(Box::new(SumInFlight { request, ..this })),
        }
    }
}

/// A completed all-reduce of partial sums.
struct FinishedSum {
    partial: Array,
    total: Array,
    run: u64,
    key: SlotKey,
}

/// The thread's state: who was heard when, who said goodbye.
struct Peers {
    rank: usize,
    last_heard: Vec<Instant>,
    gone: Vec<bool>,
}

impl Peers {
    fn others(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.last_heard.len()).filter(move |&h| h != self.rank)
    }
}

/// Runs the communication thread: initialises MPI, reports `(rank, size)` on `started`, then
/// serves `posts` until told to finish.
pub(crate) fn serve(
    started: Sender<Result<(usize, usize), String>>,
    registry_out: Sender<Arc<Registry>>,
    posts: Receiver<Outgoing>,
    timeout: Duration,
) {
    let Some((universe, _threading)) = mpi::initialize_with_threading(Threading::Funneled) else {
        let _ = started.send(Err("MPI was already initialised in this process".into()));
        return;
    };
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let registry = Arc::new(Registry::new(rank, size));
    let _ = registry_out.send(registry.clone());
    let _ = started.send(Ok((rank, size)));
    let now = Instant::now();
    let mut peers = Peers {
        rank,
        last_heard: vec![now; size],
        gone: vec![false; size],
    };
    let mut in_flight: Vec<InFlight> = Vec::new();
    let mut received: Vec<u8> = Vec::new();
    let mut sums: Vec<Box<SumInFlight>> = Vec::new();
    let beat_every = (timeout / 10).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut last_beat = now - beat_every;
    let mut finishing: Option<(bool, Sender<()>, Instant)> = None;
    loop {
        // Posts: wait a little for one when idle, then take all that are queued.
        let first = if finishing.is_some() {
            std::thread::sleep(POLL_BUSY);
            None
        } else {
            let busy = !sums.is_empty() || !in_flight.is_empty() || registry.awaited();
            let wait = if busy { POLL_BUSY } else { POLL_IDLE };
            match posts.recv_timeout(wait) {
                Ok(p) => Some(p),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => Some(Outgoing::Finish {
                    failure: registry.stopped(),
                    done: std::sync::mpsc::channel().0,
                }),
            }
        };
        for post in first
            .into_iter()
            .chain(std::iter::from_fn(|| posts.try_recv().ok()))
        {
            match post {
                Outgoing::Frame { hosts, tag, bytes } => {
                    for h in hosts {
                        in_flight.push(InFlight::start(&world, h, tag, bytes.clone()));
                    }
                }
                Outgoing::Sum { run, key, partial } => {
                    let total = registry
                        .hub(run)
                        .and_then(|h| h.pool.take(&partial.shape))
                        .unwrap_or_else(|| Array::zeros(partial.shape.clone()));
                    match SumInFlight::start(&world, run, key, partial, total) {
                        Ok(s) => sums.push(Box::new(s)),
                        Err(e) => registry.stop(e),
                    }
                }
                Outgoing::Finish { failure, done } => {
                    let others: Vec<usize> = peers.others().collect();
                    if let Some(message) = &failure {
                        // Stop the others with this host's error (a run stopped by a replica
                        // told them already; the first message wins there).
                        let mut w = Writer::default();
                        w.str(message);
                        let bytes = Arc::new(w.bytes);
                        for &h in &others {
                            in_flight.push(InFlight::start(&world, h, tag::ABORT, bytes.clone()));
                        }
                    }
                    for &h in &others {
                        in_flight.push(InFlight::start(&world, h, tag::BYE, Arc::default()));
                    }
                    finishing.get_or_insert((failure.is_some(), done, Instant::now()));
                }
            }
        }
        in_flight = in_flight
            .into_iter()
            .filter_map(|f| f.try_complete().err())
            .collect();
        let mut summing = Vec::with_capacity(sums.len());
        for s in sums {
            match s.try_complete() {
                Ok(done) => {
                    if let Some(hub) = registry.hub(done.run) {
                        hub.pool.put(done.partial);
                        hub.deliver_sum(done.key, done.total);
                    }
                }
                Err(s) => summing.push(s),
            }
        }
        sums = summing;
        // Frames from the other hosts, received into one buffer kept from frame to frame.
        while let Some((message, status)) = world.any_process().immediate_matched_probe() {
            let source = status.source_rank() as usize;
            let frame_tag = status.tag();
            let len = usize::try_from(status.count(u8::equivalent_datatype())).unwrap_or(0);
            if received.len() < len {
                received.resize(len, 0);
            }
            message.matched_receive_into(&mut received[..len]);
            let bytes = &received[..len];
            if let Some(t) = peers.last_heard.get_mut(source) {
                *t = Instant::now();
            }
            match frame_tag {
                tag::DATA => {
                    if let Err(e) = deliver(&registry, bytes) {
                        registry.stop(format!("from {}: {e}", registry.host_name(source)));
                    }
                }
                tag::ABORT => {
                    let message = Reader::new(bytes)
                        .str()
                        .unwrap_or_else(|e| format!("{} failed ({e})", registry.host_name(source)));
                    registry.stop(message);
                }
                tag::BYE => peers.gone[source] = true,
                _ => {}
            }
        }
        let now = Instant::now();
        if now.duration_since(last_beat) >= beat_every {
            last_beat = now;
            for h in peers
                .others()
                .filter(|&h| !peers.gone[h])
                .collect::<Vec<_>>()
            {
                in_flight.push(InFlight::start(&world, h, tag::HEARTBEAT, Arc::default()));
            }
        }
        for h in peers.others() {
            let silent = now.duration_since(peers.last_heard[h]);
            if !peers.gone[h] && silent > timeout && registry.stopped().is_none() {
                registry.stop(format!(
                    "{} sent nothing for {} s (the timeout): it died or hangs",
                    registry.host_name(h),
                    silent.as_secs()
                ));
            }
        }
        if let Some((failed, _, since)) = &finishing {
            let everyone_gone = peers.others().all(|h| peers.gone[h]);
            let silent_peer = peers
                .others()
                .any(|h| !peers.gone[h] && now.duration_since(peers.last_heard[h]) > timeout);
            if *failed || silent_peer {
                // Let the others report their own error first, then end the job.
                if everyone_gone || now.duration_since(*since) > GRACE || silent_peer {
                    world.abort(1);
                }
            } else if everyone_gone && in_flight.is_empty() && sums.is_empty() {
                break;
            }
        }
    }
    // Every host said goodbye and every send completed: finalise MPI.
    drop(world);
    drop(universe);
    if let Some((_, done, _)) = finishing {
        let _ = done.send(());
    }
}

/// Decodes a data frame and hands it to its run's hub.
fn deliver(registry: &Registry, bytes: &[u8]) -> Result<(), String> {
    let run = Reader::new(bytes).u64()?;
    // The arrays are decoded into the run's spares (the storage of deposits it is done with).
    let hub = registry.hub(run);
    let mut r = Reader::with_spares(bytes, hub.as_deref().map(|h| &h.pool));
    r.u64()?;
    let computation = ComputationId(u32::try_from(r.u64()?).map_err(|e| e.to_string())?);
    let instruction = InstrId::new(r.u64()? as usize);
    let count = r.u64()?;
    let first = r.u64()? as usize;
    let group_len = r.u64()? as usize;
    let n = r.u64()?;
    let mut parts = Vec::new();
    for _ in 0..n {
        let position = r.u64()? as usize;
        parts.push((position, r.literals()?));
    }
    let site = CollectiveSite {
        computation,
        instruction,
    };
    registry.deliver(
        run,
        Delivery {
            key: (site, count, first),
            group_len,
            parts,
        },
    );
    Ok(())
}
