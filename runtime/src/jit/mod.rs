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
//! - `routines/`: calls into the hand-written routines of the `tessel-kernels` crate (GEMM,
//!   direct, Winograd and patch-GEMM convolution) through plans over buffer addresses, and
//!   the choice of a convolution's routine (`conv_select.rs`).
//! - `program/`: the program function of a module and its [`Executable`]: arena placement,
//!   per-instruction emission, control flow, kernel and routine calls, loop state in place.
//!
//! `buffer.rs` (where a value lives: arena offset or owned memory), `options.rs` and
//! `error.rs` are shared by every layer and depend on no other part of the JIT.

pub mod arena_plan;
pub mod buffer;
pub mod clif;
mod error;
pub(crate) mod fused_kernels;
pub mod host;
pub mod isa;
mod options;
pub mod program;
pub mod routines;

pub(crate) use error::JitError;
pub use host::profile;
pub use options::{ConvAlgorithm, JitOptions, TraceBuffers};
pub use program::{Executable, ProgramStats};
pub use tessel_kernels::gemm::GemmBackend;

use tessel_compiler::ir::Module;
use tessel_compiler::passes::BufferAssignment;

/// Compiles `module` for this machine.
pub fn compile(module: &Module, options: &JitOptions) -> Result<Executable, JitError> {
    program::compile_module(module, options, None)
}

/// Compiles `module` with the arena laid out by `plan`, which must be the assignment
/// [`arena_plan::plan_arena`] makes for `module` and `options`: the optimizer's report has
/// computed it already when the pipeline ran with the JIT's buffer needs.
pub(crate) fn compile_with_plan(
    module: &Module,
    options: &JitOptions,
    plan: BufferAssignment,
) -> Result<Executable, JitError> {
    program::compile_module(module, options, Some(plan))
}
