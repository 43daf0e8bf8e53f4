//! [`Engine`]: one compiled module ready to run — the module itself for the interpreter, or
//! the JIT's executable — on one replica or N, with or without a host feed.

use super::error::SessionError;
use super::hosts::{gather_results, local_share};
use crate::feed::{HostFeed, HostQueues};
use crate::jit::host::infeed_outfeed::with_host_feed;
use crate::jit::program::executable::Executable;
use crate::memory::{check_run, largest_value};
use crate::replicas::{
    evaluate_placed, evaluate_with_feed, Numbering, Placement, ReplicaOptions, Residency,
};
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Literal, Module};

pub(crate) enum Engine {
    /// The reference interpreter, on the module as it is.
    Interpreter(Box<Module>),
    /// The optimized module compiled by the JIT.
    Jit(Box<Executable>),
}

impl Engine {
    pub(crate) fn executable(&self) -> Option<&Executable> {
        match self {
            Engine::Jit(exe) => Some(exe),
            Engine::Interpreter(_) => None,
        }
    }

    /// Checks that `replicas` replicas fit in the memory available now: the JIT's arena, or
    /// the interpreter's largest value, on each, plus `host_bytes` per replica that the run
    /// holds beside it (a loop's infeed queue). Arenas kept from earlier runs are already
    /// taken from the memory available, so only the ones still to allocate are counted.
    pub(crate) fn check_memory(
        &self,
        replicas: usize,
        host_bytes: u64,
        host_what: &str,
    ) -> Result<(), SessionError> {
        let with_host = |what: String| {
            if host_bytes == 0 {
                what
            } else {
                format!("{what} and {host_what}")
            }
        };
        match self {
            Engine::Interpreter(m) => match largest_value(m) {
                Some(v) => {
                    let what = format!("{}, the largest value, is {}", v.instruction, v.shape);
                    Ok(check_run(
                        v.bytes.saturating_add(host_bytes),
                        replicas,
                        &with_host(what),
                    )?)
                }
                None => Ok(check_run(host_bytes, replicas, host_what)?),
            },
            Engine::Jit(exe) if host_bytes == 0 => Ok(check_run(
                exe.arena_size() as u64,
                replicas.saturating_sub(exe.pooled_arenas()),
                "the buffer arena",
            )?),
            Engine::Jit(exe) => {
                let unpooled = replicas.saturating_sub(exe.pooled_arenas());
                // Pooled arenas are held already; the host bytes are new on every replica.
                let total = (exe.arena_size() as u64)
                    .saturating_mul(unpooled as u64)
                    .saturating_add(host_bytes.saturating_mul(replicas as u64));
                Ok(check_run(
                    total,
                    1,
                    &with_host("the buffer arenas".to_string()),
                )?)
            }
        }
    }

    /// Runs on one replica.
    pub(crate) fn run(&self, args: &[Literal]) -> Result<Literal, SessionError> {
        match self {
            Engine::Interpreter(m) => Ok(evaluate(m, args)?),
            Engine::Jit(exe) => exe.run(args).map_err(|e| SessionError::run(e.to_string())),
        }
    }

    /// Runs on `args.len()` devices, one thread each, numbered as `numbering` says; every
    /// device's result in order. In an MPI job of several hosts this host runs its block of
    /// the devices and the results are gathered from all hosts, unless `this_host_only`.
    pub(crate) fn run_replicas(
        &self,
        args: Vec<Vec<Literal>>,
        numbering: Numbering,
        this_host_only: bool,
    ) -> Result<Vec<Literal>, SessionError> {
        let (placement, args) = local_share(args, this_host_only)?;
        let local = match self {
            Engine::Interpreter(m) => evaluate_placed(m, args, numbering, None, placement)?,
            Engine::Jit(exe) => exe.run_replicated_with(
                args,
                &ReplicaOptions {
                    numbering,
                    placement,
                    ..ReplicaOptions::default()
                },
            )?,
        };
        gather_results(placement, local)
    }

    /// Runs a module that reads and writes the host `feed` on `args.len()` devices numbered as
    /// `numbering` says; every device's result in order. With a `placement` (a run spanning
    /// hosts), `args` and `feed` are this host's devices' and so are the results. The JIT
    /// keeps results in its arenas as `residency` says (the interpreter keeps nothing).
    pub(crate) fn run_fed(
        &self,
        args: Vec<Vec<Literal>>,
        feed: &HostQueues,
        numbering: Numbering,
        placement: Option<Placement>,
        residency: Residency,
    ) -> Result<Vec<Literal>, SessionError> {
        let n = args.len();
        match self {
            Engine::Interpreter(m) if n == 1 && placement.is_none() => {
                let args = args.into_iter().next().unwrap_or_default();
                Ok(evaluate_with_feed(m, &args, feed).map(|l| vec![l])?)
            }
            Engine::Interpreter(m) => {
                Ok(evaluate_placed(m, args, numbering, Some(feed), placement)?)
            }
            Engine::Jit(exe) if n > 1 || placement.is_some() => {
                let options = ReplicaOptions {
                    numbering,
                    placement,
                    residency,
                    ..ReplicaOptions::default()
                };
                Ok(exe.run_replicated_fed(args, feed, &options)?)
            }
            Engine::Jit(exe) => {
                let args = args.into_iter().next().unwrap_or_default();
                with_host_feed(feed, 0, || exe.run_resident(&args, residency))
                    .map(|l| vec![l])
                    .map_err(|e| {
                        // Wake the host threads: nothing will read or send any more.
                        let message = e.to_string();
                        feed.abort(0, &message);
                        SessionError::run(message)
                    })
            }
        }
    }
}
