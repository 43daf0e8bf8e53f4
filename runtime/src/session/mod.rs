//! The session API: compile a module for a [`Device`] and run it, once, on N replicas, or as a
//! compiled loop fed by an infeed source and drained by an outfeed sink. It is the one driver
//! the CLI, the tests and the estimator use (see `docs/session.md`).
//!
//! - [`device`]: the device description ([`Backend`], replicas, threads, ...);
//! - [`compile`](mod@compile): the driver (verify, legality, optimize, JIT);
//! - [`program`]: a compiled [`Program`] in its single, per-replica or shard_map form;
//! - [`bind`]: inputs bound to parameters;
//! - `loop_program`, `loop_host`, `loop_global`: a compiled loop, its host threads, and its
//!   shard_map form on global arrays;
//! - `hosts`: the split over the hosts of an MPI job (the `mpi` feature) and the gather;
//! - [`error`]: the errors, [`SessionError`].

pub mod bind;
pub mod compile;
pub mod device;
mod engine;
pub mod error;
mod hosts;
mod loop_global;
mod loop_host;
pub(crate) mod loop_program;
pub mod program;
#[cfg(test)]
mod tests;
mod trace;

pub use bind::Parameter;
// What the session's callers need from the layers below it, so they import only the session:
// the device's options, the profile and the trace of a run, and the errors a session passes on.
pub use crate::jit::profile;
pub use crate::jit::ConvAlgorithm;
pub use crate::memory::MemoryError;
pub use crate::threads::ThreadBudget;
pub use crate::trace::{
    chrome_trace_json, write_chrome_trace, Trace, TraceEvent, TraceOptions, Track,
};
pub use compile::{compile, compile_loop, compile_with_report, optimize_for_device, Compiled};
pub use device::{Backend, Device};
// A run split over the hosts of an MPI job (the `mpi` feature): this host's place in it.
pub use crate::replicas::launcher::alone_under_launcher;
#[cfg(feature = "mpi")]
pub use crate::replicas::mpi::{timeout_from_env, World as MpiWorld};
pub use crate::replicas::placement::hosts as job_hosts;
pub use crate::replicas::placement::set_fast_allreduce;
pub use crate::replicas::Placement;
pub use error::{BindError, ReplicaCountError, SessionError};
pub use hosts::{from_chief, from_every_host};
pub use loop_host::Outfeed;
pub use loop_program::{
    CarriedOnDevice, LoopInputs, LoopOptions, LoopOutputs, LoopProgram, LoopSpec,
};
pub use program::{Inputs, Outputs, Program, ProgramForm};
pub use tessel_compiler::compile::CompileError;
pub use tessel_compiler::dump::DumpError;
pub use tessel_compiler::training_loop::LoopError;
