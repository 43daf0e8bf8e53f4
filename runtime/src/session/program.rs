//! [`Program`]: a module compiled for a [`super::Device`], ready to run (again). It has one of
//! three forms: one replica; a per-replica module on N replicas (each with its own
//! arguments); or a shard_map module on its mesh's replicas, taking and giving global arrays
//! that the program splits and assembles.

use super::bind::{bind_inputs, bind_replica_inputs, Parameter};
use super::engine::Engine;
use super::error::{ReplicaCountError, SessionError};
use crate::jit::profile::ProfileCounters;
use crate::jit::program::executable::{Executable, ProgramStats};
use crate::replicas::Numbering;
use crate::shard_map::ShardMap;
use crate::trace::Trace;
use tessel_compiler::ir::{Array, Literal};

/// How a program's replicas share its inputs and outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramForm {
    /// One replica.
    Single,
    /// A per-replica module on N replicas: each takes and gives its own values.
    PerReplica,
    /// A shard_map module: global arrays in and out, split over the replicas by its shardings.
    ShardMap,
}

pub(crate) enum Form {
    Single,
    PerReplica,
    ShardMap(Box<ShardMap>),
}

/// A compiled program. Build it with [`super::compile`].
pub struct Program {
    pub(crate) form: Form,
    pub(crate) engine: Engine,
    /// The entry's parameters (global ones for a shard_map module).
    pub(crate) parameters: Vec<Parameter>,
    pub(crate) replicas: usize,
    /// Every replica runs in this process, even in an MPI job of several hosts.
    pub(crate) this_host_only: bool,
}

/// Arguments bound to a program's parameters (see [`Program::bind`]).
#[derive(Clone, Debug)]
pub struct Inputs(Bound);

#[derive(Clone, Debug)]
enum Bound {
    /// One replica's arguments (kept as literals: a run borrows them as they are).
    Single(Vec<Literal>),
    /// `[r]`: replica r's arguments.
    PerReplica(Vec<Vec<Literal>>),
    /// A shard_map program's global arguments.
    Global(Vec<Array>),
}

/// What a run gives: the root's flattened leaves, global (one replica, or a shard_map
/// program), or per replica.
#[derive(Clone, Debug, PartialEq)]
pub enum Outputs {
    Global(Vec<Array>),
    /// `[r]`: replica r's leaves.
    PerReplica(Vec<Vec<Array>>),
}

impl Outputs {
    /// The outputs keyed as inputs are: `"I"` for global leaves, `"R/I"` per replica.
    pub fn keyed(self) -> Vec<(String, Array)> {
        match self {
            Outputs::Global(leaves) => leaves
                .into_iter()
                .enumerate()
                .map(|(i, a)| (i.to_string(), a))
                .collect(),
            Outputs::PerReplica(replicas) => replicas
                .into_iter()
                .enumerate()
                .flat_map(|(r, leaves)| {
                    leaves
                        .into_iter()
                        .enumerate()
                        .map(move |(i, a)| (format!("{r}/{i}"), a))
                })
                .collect(),
        }
    }
}

impl Program {
    pub fn form(&self) -> ProgramForm {
        match self.form {
            Form::Single => ProgramForm::Single,
            Form::PerReplica => ProgramForm::PerReplica,
            Form::ShardMap(_) => ProgramForm::ShardMap,
        }
    }

    /// The replicas the program runs on.
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// The entry's parameters, in order (the global ones for a shard_map program).
    pub fn parameters(&self) -> &[Parameter] {
        &self.parameters
    }

    /// Binds inputs keyed by parameter number (`"I"`; a per-replica program also takes
    /// `"R/I"` for replica R's own value).
    pub fn bind(&self, inputs: Vec<(String, Array)>) -> Result<Inputs, SessionError> {
        let params = &self.parameters;
        Ok(Inputs(match self.form {
            Form::Single => Bound::Single(
                bind_inputs(params, inputs)?
                    .into_iter()
                    .map(Literal::Array)
                    .collect(),
            ),
            Form::ShardMap(_) => Bound::Global(bind_inputs(params, inputs)?),
            Form::PerReplica => Bound::PerReplica(
                bind_replica_inputs(params, inputs, self.replicas)?
                    .into_iter()
                    .map(|args| args.into_iter().map(Literal::Array).collect())
                    .collect(),
            ),
        }))
    }

    /// Binds arguments in parameter order (every replica of a per-replica program gets them).
    pub fn bind_ordered(&self, args: Vec<Array>) -> Result<Inputs, SessionError> {
        self.bind(
            args.into_iter()
                .enumerate()
                .map(|(i, a)| (i.to_string(), a))
                .collect(),
        )
    }

    /// Runs once.
    pub fn run(&self, inputs: &Inputs) -> Result<Outputs, SessionError> {
        self.engine.check_memory(self.replicas, 0, "")?;
        let leaves = |l: &Literal| -> Vec<Array> { l.leaves().into_iter().cloned().collect() };
        match (&self.form, &inputs.0) {
            (Form::Single, Bound::Single(args)) => {
                Ok(Outputs::Global(leaves(&self.engine.run(args)?)))
            }
            (Form::PerReplica, Bound::PerReplica(args)) => {
                let outs = self.engine.run_replicas(
                    args.clone(),
                    Numbering::Replicas,
                    self.this_host_only,
                )?;
                Ok(Outputs::PerReplica(outs.iter().map(leaves).collect()))
            }
            (Form::ShardMap(sharded), Bound::Global(args)) => {
                let pieces = sharded.split(args)?;
                // The body is SPMD: one replica of as many partitions as the mesh has devices.
                let results =
                    self.engine
                        .run_replicas(pieces, Numbering::Partitions, self.this_host_only)?;
                Ok(Outputs::Global(sharded.assemble(&results)?))
            }
            _ => Err(SessionError::ReplicaCount(ReplicaCountError::Arguments {
                expected: self.replicas,
                got: match &inputs.0 {
                    Bound::PerReplica(args) => args.len(),
                    _ => 1,
                },
            })),
        }
    }

    /// The JIT's executable (`None` on the interpreter).
    pub fn executable(&self) -> Option<&Executable> {
        self.engine.executable()
    }

    /// The JIT's compile statistics (`None` on the interpreter).
    pub fn stats(&self) -> Option<&ProgramStats> {
        self.executable().map(|exe| exe.stats())
    }

    /// The JIT's per-kernel time counters, when the device profiles.
    pub fn profile(&self) -> Option<&ProfileCounters> {
        self.executable().and_then(|exe| exe.profile())
    }

    /// Starts recording this program's runs as a trace (emptying what was recorded); an
    /// error unless its device was made [`with_trace`](super::Device::with_trace).
    pub fn start_trace(&self) -> Result<(), SessionError> {
        self.engine.start_trace()
    }

    /// Stops recording; the events stay until [`Self::take_trace`].
    pub fn stop_trace(&self) -> Result<(), SessionError> {
        self.engine.stop_trace()
    }

    /// The events recorded since [`Self::start_trace`], named; the buffers are empty
    /// afterwards.
    pub fn take_trace(&self) -> Result<Trace, SessionError> {
        self.engine.take_trace()
    }
}
