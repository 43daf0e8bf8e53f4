//! Replicas on several hosts over MPI (the `mpi` feature): one process per host, started by
//! `mpirun`; the hosts split a run's replicas `0..N` into contiguous blocks. Collectives stay
//! the in-process rendezvous' ([`crate::replicas::rendezvous`]): the members on one host meet
//! there, and once all of them have deposited their operands go to the hosts holding the
//! group's other members, so every member reads every deposit in group order and reduces in
//! replica-id order — results are bitwise equal to one process running all N replicas.
//!
//! [`World::init_from_env`] starts MPI only under a launcher (`OMPI_COMM_WORLD_SIZE` or
//! `PMI_SIZE` set); one communication thread does every MPI call ([`comm`]), keeps a
//! heartbeat, and turns a failure on any host into a stop on every host.

mod comm;
mod registry;
pub(crate) mod wire;

use comm::Outgoing;
use registry::Registry;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::rendezvous::Hub;
use tessel_compiler::ir::Literal;

/// How long a silent host is waited for before the job stops (`TESSEL_MPI_TIMEOUT_SECS`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// This process's place among the hosts of an MPI job.
pub struct World {
    rank: usize,
    size: usize,
    registry: Arc<Registry>,
    to_comm: Mutex<Sender<Outgoing>>,
    /// `--fast-allreduce`: all-reduce sums over every host through `MPI_Iallreduce`.
    fast_allreduce: AtomicBool,
}

static WORLD: OnceLock<World> = OnceLock::new();

pub use crate::replicas::launcher::launched_by_mpi;

/// The heartbeat timeout: `TESSEL_MPI_TIMEOUT_SECS`, or [`DEFAULT_TIMEOUT`].
pub fn timeout_from_env() -> Result<Duration, String> {
    match std::env::var("TESSEL_MPI_TIMEOUT_SECS") {
        Err(_) => Ok(DEFAULT_TIMEOUT),
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(s) if s > 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
            _ => Err(format!(
                "TESSEL_MPI_TIMEOUT_SECS must be a positive number of seconds, not \"{v}\""
            )),
        },
    }
}

impl World {
    /// Joins the MPI job this process was launched in, once: `None` when no launcher started
    /// it (then everything runs in this process, as without the feature). A host silent for
    /// longer than `timeout` stops the job.
    pub fn init_from_env(timeout: Duration) -> Result<Option<&'static World>, String> {
        if let Some(w) = WORLD.get() {
            return Ok(Some(w));
        }
        if !launched_by_mpi() {
            return Ok(None);
        }
        let (posts_tx, posts_rx) = channel();
        let (started_tx, started_rx) = channel();
        let (registry_tx, registry_rx) = channel();
        std::thread::Builder::new()
            .name("mpi".into())
            .spawn(move || comm::serve(started_tx, registry_tx, posts_rx, timeout))
            .map_err(|e| format!("starting the MPI thread: {e}"))?;
        let (rank, size) = started_rx
            .recv()
            .map_err(|_| "the MPI thread stopped while starting".to_string())??;
        let registry = registry_rx
            .recv()
            .map_err(|_| "the MPI thread stopped while starting".to_string())?;
        let world = World {
            rank,
            size,
            registry,
            to_comm: Mutex::new(posts_tx),
            fast_allreduce: AtomicBool::new(false),
        };
        Ok(Some(WORLD.get_or_init(|| world)))
    }

    /// This host's index (the MPI rank).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many hosts run.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Ends this host's part of the job. On success it waits for every host to finish and
    /// finalises MPI. After a failure it tells every other host (their runs stop with
    /// `failure`), gives them a moment to report their own error, and ends the whole job with
    /// `MPI_Abort` (this call does not return then), so no host is left waiting.
    pub fn finish(&self, failure: Option<&str>) {
        let (done_tx, done_rx) = channel();
        let sent = self
            .to_comm
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Outgoing::Finish {
                failure: failure.map(|m| format!("host {} failed: {m}", self.rank)),
                done: done_tx,
            });
        if sent.is_ok() {
            let _ = done_rx.recv();
        }
    }

    /// Makes all-reduce sums over every host use MPI's own all-reduce (`on`), which adds the
    /// hosts' partial sums in an order of its own (faster, not bitwise reproducible), or
    /// gather the operands and add them in replica-id order (the default). Every host must
    /// call this at the same point of the job (it is a gather), and with the same `on`: a
    /// host that differs is an error on every host, naming it.
    pub fn set_fast_allreduce(&self, on: bool) -> Result<(), String> {
        use super::placement::{gather, Placement};
        use tessel_compiler::ir::Array;
        let here = Placement {
            devices: self.size,
            first: self.rank,
            local: 1,
        };
        let flag = Literal::Array(Array::scalar_s32(i32::from(on)));
        let all = gather(here, vec![flag])?;
        let other = all.iter().position(|l| {
            let theirs = l.as_array().map(|a| a.data.get_i64(0) != 0);
            theirs != Some(on)
        });
        if let Some(h) = other {
            let word = |b: bool| if b { "on" } else { "off" };
            return Err(format!(
                "--fast-allreduce is {} on host {} but {} on host {h}: every host must run \
                 with the same options",
                word(on),
                self.rank,
                word(!on)
            ));
        }
        self.fast_allreduce.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// The hub of this process's replicas `local` of the next run of `devices` replicas.
    pub(crate) fn start_run(&self, devices: usize, local: Range<usize>) -> Arc<Hub> {
        let to_comm = self
            .to_comm
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let fast = self.fast_allreduce.load(Ordering::Relaxed);
        self.registry.start_run(devices, local, to_comm, fast)
    }
}

/// The job this process joined, if any.
pub fn world() -> Option<&'static World> {
    WORLD.get()
}
