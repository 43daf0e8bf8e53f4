//! Optimization passes over HLO modules, and the pipeline that runs them.
//!
//! Every pass implements [`Pass`]: it rewrites a module in place and reports honestly whether
//! it changed anything (a pass that reports "unchanged" must leave the printed module
//! identical). [`pipeline::default_pipeline`] strings them together in XLA:CPU's order;
//! `crate::compile::optimize` runs it (with buffer assignment and dumps) for library callers.

pub mod algebraic_simplifier;
pub mod all_reduce_combiner;
pub mod buffer_assignment;
pub mod call_inliner;
pub mod constant_folding;
pub mod cse;
pub mod dce;
pub mod fusion;
mod fusion_concat;
pub mod pipeline;
mod result_transpose;
pub mod scheduling;
pub mod stats;
pub mod threefry_rounds;
pub(crate) mod util;
pub mod while_loop_simplifier;
pub mod while_loop_unroller;

use crate::ir::Module;

pub use algebraic_simplifier::AlgebraicSimplifier;
pub use all_reduce_combiner::AllReduceCombiner;
pub use buffer_assignment::{
    assign_buffers, assign_buffers_with, Buffer, BufferAssignment, BufferKind, BufferNeeds,
    Instance, LoopCopy, ReportNeeds,
};
pub use call_inliner::CallInliner;
pub use constant_folding::ConstantFolding;
pub use cse::Cse;
pub use dce::Dce;
pub use fusion::Fusion;
pub use pipeline::Pipeline;
pub use scheduling::Scheduler;
pub use threefry_rounds::ThreefryRounds;
pub use while_loop_simplifier::WhileLoopSimplifier;
pub use while_loop_unroller::WhileLoopUnroller;

/// One rewrite of a module.
pub trait Pass {
    /// A short kebab-case name, used in dump file names and error messages.
    fn name(&self) -> &'static str;
    /// Rewrites `m`; returns whether anything changed.
    fn run(&mut self, m: &mut Module) -> Result<bool, PassError>;
}

/// Why a pass (or the verifier after it) failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("pass {pass}: {message}")]
pub struct PassError {
    /// The pass that failed or left the module invalid.
    pub pass: String,
    pub message: String,
}

impl PassError {
    pub fn new(pass: impl Into<String>, message: impl Into<String>) -> PassError {
        PassError {
            pass: pass.into(),
            message: message.into(),
        }
    }
}
