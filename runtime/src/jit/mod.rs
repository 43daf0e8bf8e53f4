//! The Cranelift JIT backend: compiles an HLO module into native code for this machine.
//!
//! [`compile`] lowers the entry computation into one program function (`program.rs`) that
//! runs every step natively: fused elementwise kernels and reductions become CLIF loop nests
//! (`kernel_lowering.rs`, `reduce.rs`, `window.rs`), dot and convolution call a tuned GEMM
//! (`gemm.rs`, `convolution.rs`), and `while` / `call` / `conditional` become native control
//! flow with loop state updated in place. All buffers live in one arena allocated once.
//! [`Executable::run`] marshals literals in and out.

pub mod arena_plan;
pub mod buffer;
pub mod collectives;
pub mod conv_direct;
#[cfg(target_arch = "x86_64")]
pub mod conv_direct_avx2;
#[cfg(target_arch = "x86_64")]
pub mod conv_direct_avx512;
pub mod conv_direct_tile;
pub mod conv_direct_wgrad;
pub mod conv_patches;
pub mod conv_select;
pub mod conv_shape;
pub mod conv_winograd;
pub mod conv_winograd_filter;
pub mod convolution;
pub mod elemental;
pub mod elementwise;
pub mod feed_ops;
pub mod fusion;
pub mod gemm;
pub mod host;
pub mod isa;
pub mod kernel_lowering;
pub mod loop_state;
pub mod loops;
pub mod parallel;
pub mod profile;
pub mod program;
pub mod reduce;
pub mod reduce_fused;
pub mod small_gemm;
pub mod types;
pub mod vector_math;
pub mod window;
pub mod window_tiled;
pub mod winograd;
pub(crate) mod winograd_tiles;

pub use crate::executable::Executable;
pub use conv_select::ConvAlgorithm;
pub use gemm::GemmBackend;

use std::fmt;
use std::path::PathBuf;
use tessel_compiler::ir::Module;

/// Why a module could not be compiled or run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JitError {
    /// The module uses something the JIT does not compile (yet).
    Unsupported(String),
    /// The module is malformed in a way the verifier should have caught.
    Invalid(String),
    /// Cranelift rejected the generated code.
    Codegen(String),
    /// Arguments do not match the entry's parameters.
    Arguments(String),
    /// A kernel reported an error while running.
    Runtime(String),
    /// Writing dump files failed.
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

impl fmt::Display for JitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JitError::Unsupported(m) => write!(f, "the JIT does not support {m}"),
            JitError::Invalid(m) => write!(f, "invalid module: {m}"),
            JitError::Codegen(m) => write!(f, "code generation failed: {m}"),
            JitError::Arguments(m) => write!(f, "bad arguments: {m}"),
            JitError::Runtime(m) => write!(f, "runtime error: {m}"),
            JitError::Io(m) => write!(f, "dump failed: {m}"),
        }
    }
}

impl std::error::Error for JitError {}

/// Options of [`compile`].
#[derive(Clone, Debug)]
pub struct JitOptions {
    /// Write each kernel's CLIF before and after Cranelift's optimizer into this directory.
    pub dump_to: Option<PathBuf>,
    /// Cranelift's `opt_level`: `none`, `speed` or `speed_and_size`.
    pub opt_level: String,
    /// Use 4-lane vector loops where the kernel allows.
    pub vectorize: bool,
    /// Which GEMM library dot and convolution call.
    pub gemm: GemmBackend,
    /// Threads the GEMM may use (this machine has 2 cores).
    pub gemm_threads: usize,
    /// Count the time of every kernel and routine call (see `profile.rs`).
    pub profile: bool,
    /// Which convolution routines may be used (`conv_select.rs`).
    pub conv_algorithm: ConvAlgorithm,
}

impl Default for JitOptions {
    fn default() -> Self {
        JitOptions {
            dump_to: None,
            opt_level: "speed".into(),
            vectorize: true,
            gemm: GemmBackend::default(),
            gemm_threads: 2,
            profile: false,
            conv_algorithm: ConvAlgorithm::Auto,
        }
    }
}

/// Compiles `module` for this machine.
pub fn compile(module: &Module, options: &JitOptions) -> Result<Executable, JitError> {
    program::compile_module(module, options)
}
