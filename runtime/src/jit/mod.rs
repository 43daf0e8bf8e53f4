//! The Cranelift JIT backend: compiles an HLO module into native code for this machine.
//!
//! [`compile`] lowers the entry computation into one program function that runs every step
//! natively; [`Executable::run`] marshals literals in and out. The code is in layers, each a
//! folder, and a layer only calls the ones listed before it:
//!
//! - `clif/`: CLIF emission helpers: element types, counted loops, one elementwise op on
//!   CLIF values (`element_ops.rs`), the value of an instruction at an index
//!   (`value_at_index.rs`), vector math, and the symbols the code refers to instead of
//!   absolute addresses (`symbols.rs`).
//! - `fused_kernels/`: the CLIF kernel families: elementwise loop nests, reduce (also fused
//!   with elementwise outputs), reduce-window and select-and-scatter, and the plan of which
//!   instructions are recomputed inside their users' kernels (`fusion_plan.rs`).
//! - `host/`: Rust code the generated code calls: the routine ABI (status, error message,
//!   buffer addresses), infeed and outfeed, collectives, the profile counters.
//! - the hand-written routines (GEMM, convolution) the program calls through plans over buffer
//!   addresses (`gemm.rs`, `convolution.rs`, `conv_*.rs`, `winograd*.rs`).
//! - `program/`: the program function of a module and its [`Executable`]: arena placement,
//!   per-instruction emission, control flow, kernel and routine calls, loop state in place.
//!
//! `buffer.rs` (where a value lives: arena offset or owned memory), `options.rs` and
//! `error.rs` are shared by every layer and depend on no other part of the JIT.

pub mod buffer;
pub mod clif;
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
mod error;
pub mod fused_kernels;
pub mod gemm;
pub mod host;
pub mod isa;
mod options;
pub mod parallel;
pub mod program;
pub mod small_gemm;
pub mod winograd;
pub(crate) mod winograd_tiles;

pub use conv_select::ConvAlgorithm;
pub use error::JitError;
pub use gemm::GemmBackend;
pub use host::profile;
pub use options::JitOptions;
pub use program::{Executable, ProgramStats};

use tessel_compiler::ir::Module;

/// Compiles `module` for this machine.
pub fn compile(module: &Module, options: &JitOptions) -> Result<Executable, JitError> {
    program::compile_module(module, options)
}
