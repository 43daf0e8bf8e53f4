//! [`SessionError`]: why compiling or running a program failed, in variants a library user can
//! match. The wording names no command-line flag; the CLI adds its flags when it reports them.

use crate::jit::JitError;
use crate::memory::MemoryError;
use crate::replicas::ReplicaError;
use crate::shard_map::ShardMapError;
use tessel_compiler::interpreter::EvalError;
use tessel_compiler::ir::{ArrayShape, Shape};
use tessel_compiler::legality::Diagnostic;
use tessel_compiler::training_loop::LoopError;
use tessel_compiler::verifier::VerifyError;
use thiserror::Error;

/// Why a program could not be compiled or run.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The module is not well formed (the verifier's findings).
    #[error("the module is not valid ({} error{})", .0.len(), plural(.0.len()))]
    Invalid(Vec<VerifyError>),
    /// The module is well formed but the device cannot run it. The interpreter, the
    /// reference, runs it.
    #[error("the module cannot run on the device ({} diagnostic{})", .diagnostics.len(), plural(.diagnostics.len()))]
    NotLegal {
        diagnostics: Vec<Diagnostic>,
        /// The diagnostics rendered like rustc's, with source lines.
        rendered: String,
    },
    /// The device's replica count does not fit the program.
    #[error("{0}")]
    ReplicaCount(#[from] ReplicaCountError),
    /// Inputs do not match the program's parameters.
    #[error(transparent)]
    Binding(#[from] BindError),
    /// The step cannot be wrapped in a loop.
    #[error(transparent)]
    Loop(#[from] LoopError),
    /// The shard_map form could not be read, or arrays could not be split or assembled.
    #[error(transparent)]
    ShardMap(#[from] ShardMapError),
    /// The optimization pipeline failed.
    #[error("optimizing the module: {0}")]
    Optimize(tessel_compiler::compile::CompileError),
    /// The JIT could not compile the optimized module.
    #[error("{0}")]
    Compile(JitError),
    /// The machine has not the memory (or the threads) the program needs.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// A trace was asked of a program compiled without trace buffers (or for the interpreter).
    #[error("the program has no trace buffers: compile it for a JIT device made with_trace")]
    NoTraceBuffers,
    /// A run failed: on `replica` when several run, at `instruction` when known.
    #[error("{}{}{message}", replica_prefix(*.replica), instruction_prefix(.instruction))]
    Run {
        replica: Option<usize>,
        /// `instruction in computation`, when the interpreter knows it.
        instruction: Option<String>,
        message: String,
    },
}

/// A program run on a number of replicas it was not made for.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ReplicaCountError {
    /// A shard_map module runs on exactly its mesh's devices.
    #[error("this shard_map module runs on {expected} replicas (its mesh {mesh}), not {got}")]
    Mesh {
        expected: usize,
        got: usize,
        /// The mesh axes as `"name"=size, ...`.
        mesh: String,
    },
    /// Arguments were given for a different number of replicas than the program runs on.
    #[error("the program runs on {expected} replicas, but arguments for {got} were given")]
    Arguments { expected: usize, got: usize },
    /// A device needs at least one replica.
    #[error("a device needs at least one replica")]
    Zero,
}

/// Inputs that do not match the parameters they are bound to. Inputs are keyed by parameter
/// number (`"I"`), or `"R/I"` for replica R's own value of a per-replica program.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum BindError {
    #[error("missing input \"{key}\"{} for parameter {index} ({name} {shape}){}", replica_key(*.replica, *.index), replica_suffix(*.replica))]
    Missing {
        key: String,
        index: usize,
        name: String,
        shape: String,
        /// The replica lacking it, for a per-replica program.
        replica: Option<usize>,
    },
    #[error("extra input \"{key}\": the module has {count} parameters ({parameters})")]
    Extra {
        key: String,
        count: usize,
        /// The parameters as `"I": name shape, ...`.
        parameters: String,
    },
    #[error("input \"{key}\": parameter {index} ({name}) expects {want}, got {got}")]
    Mismatch {
        key: String,
        index: usize,
        name: String,
        want: String,
        got: String,
    },
    #[error("input \"{key}\" names a replica that does not run ({replicas} replicas)")]
    NoSuchReplica { key: String, replicas: usize },
    #[error("parameter {index} ({name}) has shape {shape}, which cannot be bound to an array")]
    NotAnArray {
        index: usize,
        name: String,
        shape: String,
    },
}

impl SessionError {
    /// The replica whose failure stopped a run, when several ran.
    pub fn replica(&self) -> Option<usize> {
        match self {
            SessionError::Run { replica, .. } => *replica,
            _ => None,
        }
    }

    /// A run failure without a known replica or instruction.
    pub(crate) fn run(message: impl std::fmt::Display) -> SessionError {
        SessionError::Run {
            replica: None,
            instruction: None,
            message: message.to_string(),
        }
    }

    /// A run failure on replica `r`.
    pub(crate) fn on_replica(r: usize, message: impl std::fmt::Display) -> SessionError {
        SessionError::Run {
            replica: Some(r),
            instruction: None,
            message: message.to_string(),
        }
    }
}

impl From<EvalError> for SessionError {
    fn from(e: EvalError) -> Self {
        let instruction = match (e.instruction, e.computation) {
            (Some(i), Some(c)) => Some(format!("{i} in {c}")),
            _ => None,
        };
        SessionError::Run {
            replica: e.replica,
            instruction,
            message: e.message,
        }
    }
}

impl From<ReplicaError> for SessionError {
    fn from(e: ReplicaError) -> Self {
        SessionError::Run {
            replica: e.replica,
            instruction: None,
            message: e.message,
        }
    }
}

/// A shape as text without layout: `f32[2,3]`.
pub(crate) fn shape_text(shape: &ArrayShape) -> String {
    Shape::Array(shape.clone()).to_text(false)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn replica_prefix(replica: Option<usize>) -> String {
    replica
        .map(|r| format!("replica {r}: "))
        .unwrap_or_default()
}

fn instruction_prefix(instruction: &Option<String>) -> String {
    instruction
        .as_ref()
        .map(|i| format!("{i}: "))
        .unwrap_or_default()
}

fn replica_key(replica: Option<usize>, index: usize) -> String {
    replica
        .map(|r| format!(" (or \"{r}/{index}\")"))
        .unwrap_or_default()
}

fn replica_suffix(replica: Option<usize>) -> String {
    replica
        .map(|r| format!(" of replica {r}"))
        .unwrap_or_default()
}
