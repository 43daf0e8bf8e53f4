//! [`JitError`]: why the JIT could not compile or run a module, worded for a library user.

use thiserror::Error;

/// Why a module could not be compiled or run.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum JitError {
    /// The module uses something the JIT does not compile (yet).
    #[error("the JIT does not support {0}")]
    Unsupported(String),
    /// The module is malformed in a way the verifier should have caught.
    #[error("invalid module: {0}")]
    Invalid(String),
    /// Cranelift rejected the generated code.
    #[error("code generation failed: {0}")]
    Codegen(String),
    /// Arguments do not match the entry's parameters.
    #[error("bad arguments: {0}")]
    Arguments(String),
    /// A kernel or routine reported an error while running.
    #[error("runtime error: {0}")]
    Runtime(String),
    /// The memory a run needs (its buffer arena) could not be allocated.
    #[error("runtime error: {0}")]
    Memory(#[from] crate::memory::MemoryError),
    /// Writing the CLIF dump files failed.
    #[error("dump failed: {0}")]
    Io(String),
}

impl JitError {
    /// Adds the instruction the error concerns.
    pub fn at(self, name: &str) -> JitError {
        match self {
            JitError::Unsupported(m) => JitError::Unsupported(format!("{m} (at {name})")),
            JitError::Invalid(m) => JitError::Invalid(format!("{m} (at {name})")),
            JitError::Codegen(m) => JitError::Codegen(format!("{m} (at {name})")),
            other => other,
        }
    }
}
