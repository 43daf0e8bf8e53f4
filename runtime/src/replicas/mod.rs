//! Running one program on N replicas, one thread each: the rendezvous ([`rendezvous`]), the
//! fault rules ([`faults`]) and the interpreter's replica threads ([`spawn`]) live here; the
//! compiler's interpreter reaches them only through its `ReplicaLink` trait.
//!
//! Each replica thread of a compiled program gets its own arena and a [`ReplicaContext`] (its
//! id, the replica count and the rendezvous [`Hub`] shared by the run). The context reaches
//! the JIT's collective routines through a thread-local set around the entry call
//! ([`enter`]), so the program's entry signature `fn(arena) -> status` stays the same for one
//! replica and for many.
//!
//! Faults follow one rule on both backends: a replica that fails (an error status from a kernel
//! or routine, a panic caught in a routine, a panic on its thread) poisons the hub, every
//! replica waiting at (or later reaching) a rendezvous stops, and the run reports the first
//! failure that was not itself a consequence of another replica stopping, naming its replica.

pub mod faults;
pub mod launcher;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod placement;
pub(crate) mod pool;
pub mod rendezvous;
#[cfg(test)]
mod spanning_tests;
pub mod spawn;
#[cfg(test)]
mod tests;
mod unordered_sum;

pub(crate) use crate::stop_message::{is_stop_message, stopped_message};
pub(crate) use faults::PoisonOnDrop;
pub use placement::Placement;
pub(crate) use rendezvous::ReplicaContext;
pub use spawn::{
    evaluate_on_devices, evaluate_placed, evaluate_replicated, evaluate_replicated_with_feed,
    evaluate_with_feed,
};

use std::cell::{Cell, RefCell};
use std::fmt;
use tessel_compiler::interpreter::EvalError;
use tessel_compiler::ir::Literal;

/// Why a replicated run failed, and on which replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaError {
    /// The replica whose failure stopped the run (`None`: the run could not start).
    pub replica: Option<usize>,
    pub message: String,
}

impl ReplicaError {
    pub fn new(replica: Option<usize>, message: impl Into<String>) -> ReplicaError {
        ReplicaError {
            replica,
            message: message.into(),
        }
    }
}

impl fmt::Display for ReplicaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(r) = self.replica {
            write!(f, "replica {r}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReplicaError {}

impl From<EvalError> for ReplicaError {
    fn from(e: EvalError) -> Self {
        let replica = e.replica;
        let message = EvalError { replica: None, ..e }.to_string();
        ReplicaError { replica, message }
    }
}

/// Something that runs one per-replica program on N replicas: `args[r]` are replica r's
/// arguments, the result is every replica's output in replica order. The interpreter and the
/// JIT's [`crate::jit::program::executable::Executable`] both are.
pub trait ReplicaBackend {
    fn run_replicas(&self, args: Vec<Vec<Literal>>) -> Result<Vec<Literal>, ReplicaError>;
}

/// The reference interpreter running `module`'s entry on the replicas.
pub struct Interpreted<'m>(pub &'m tessel_compiler::ir::Module);

impl ReplicaBackend for Interpreted<'_> {
    fn run_replicas(&self, args: Vec<Vec<Literal>>) -> Result<Vec<Literal>, ReplicaError> {
        evaluate_replicated(self.0, args).map_err(Into::into)
    }
}

/// Picks the error to report from every replica's outcome: the first failure that did not
/// only stop because another replica had failed.
pub(crate) fn first_failure<T>(results: &[Result<T, ReplicaError>]) -> Option<ReplicaError> {
    let errors = || results.iter().filter_map(|r| r.as_ref().err());
    errors()
        .find(|e| !is_stop_message(&e.message))
        .or_else(|| errors().next())
        .cloned()
}

/// A fault injected into one replica, to test that a failure anywhere stops every replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The replica's n-th collective routine returns an error status (a failing kernel).
    KernelError,
    /// The replica's n-th collective routine panics (caught in the routine, never unwound
    /// through generated code).
    RoutinePanic,
    /// The replica's thread panics before entering the program.
    ThreadPanic,
}

/// Where to inject a [`Fault`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Injection {
    pub replica: usize,
    /// Which collective routine call fails (1 = the first), for the routine faults.
    pub at_collective: u64,
    pub fault: Fault,
}

/// How the devices of a replicated run are numbered, as XLA numbers them (see
/// `tessel_compiler::interpreter::ReplicaLink`): what `replica-id` and `partition-id` give and
/// which devices a collective's `replica_groups` name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Numbering {
    /// N replicas of one partition: a per-replica module (collectives in the entry).
    #[default]
    Replicas,
    /// One replica of N partitions: a shard_map body (SPMD), where `partition-id` is the
    /// device's index in the mesh.
    Partitions,
}

impl Numbering {
    /// Partitions per replica on a run of `devices`.
    pub fn partitions(self, devices: usize) -> usize {
        match self {
            Numbering::Replicas => 1,
            Numbering::Partitions => devices.max(1),
        }
    }
}

/// Options of a replicated run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaOptions {
    /// A fault to inject (tests only; `None` in real runs).
    pub inject: Option<Injection>,
    /// How the devices are numbered.
    pub numbering: Numbering,
    /// This process's block of the run's devices when the run spans hosts (`None`: all
    /// devices run here).
    pub placement: Option<Placement>,
    /// Results kept in the arenas from one run to the next.
    pub residency: Residency,
}

/// A run's results kept where the program left them, as a TPU keeps a training loop's
/// variables on the device: a program whose result leaf i lives in parameter i's buffer (a
/// loop whose state took over its donated parameters) leaves each replica's arena holding
/// those results, and a run started from exactly those values need not write them again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Residency {
    /// The arguments are the results of the run tagged `from`, unchanged: where a replica's
    /// arena still holds them, they are not written again.
    pub from: Option<u64>,
    /// The tag the arenas get after this run (`None`: they hold nothing afterwards).
    pub tag: Option<u64>,
}

impl Residency {
    /// A tag no other run in this process has.
    pub fn new_tag() -> u64 {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// What a replica thread's routines see: its context and its injected fault, if any.
pub(crate) struct ReplicaEnv {
    /// Compiled programs reach the host feed through `jit::host::infeed_outfeed`, not the context.
    pub(crate) context: ReplicaContext<'static>,
    collectives: Cell<u64>,
    fault: Option<(u64, Fault)>,
}

impl ReplicaEnv {
    /// Counts one collective call; fails it when the injected fault says so.
    pub(crate) fn before_collective(&self) -> Result<(), String> {
        let n = self.collectives.get() + 1;
        self.collectives.set(n);
        match self.fault {
            Some((at, Fault::KernelError)) if at == n => {
                Err(format!("injected kernel error at collective {n}"))
            }
            Some((at, Fault::RoutinePanic)) if at == n => {
                panic!("injected panic at collective {n}")
            }
            _ => Ok(()),
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<ReplicaEnv>> = const { RefCell::new(None) };
}

/// Makes `context` the current thread's replica until the guard is dropped.
pub(crate) fn enter(context: ReplicaContext<'static>, inject: Option<Injection>) -> Entered {
    let fault = inject
        .filter(|i| i.replica == context.id())
        .map(|i| (i.at_collective, i.fault));
    CURRENT.with(|c| {
        *c.borrow_mut() = Some(ReplicaEnv {
            context,
            collectives: Cell::new(0),
            fault,
        })
    });
    Entered { _private: () }
}

/// Clears the thread's replica context when dropped.
pub(crate) struct Entered {
    _private: (),
}

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

/// Runs `f` with the current thread's replica; outside a replicated run that is replica 0 of
/// one (collectives over one replica are the identity).
pub(crate) fn with_current<R>(f: impl FnOnce(&ReplicaEnv) -> R) -> R {
    CURRENT.with(|c| match &*c.borrow() {
        Some(env) => f(env),
        None => f(&ReplicaEnv {
            context: ReplicaContext::single(None),
            collectives: Cell::new(0),
            fault: None,
        }),
    })
}
