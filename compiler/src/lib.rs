//! tessel's compiler: the HLO IR and everything that reads, checks, transforms and evaluates it.
//!
//! - [`ir`]: modules, computations, instructions, shapes and literal values.
//! - [`hlo_text`]: HLO text as XLA and JAX write it, parsed into the IR and printed back.
//! - [`trace`]: a model written as a Rust function over symbolic `Tensor`s, recorded as a module;
//!   [`builder`] adds single instructions with inferred shapes ([`shape_inference`]).
//! - [`autodiff`]: reverse-mode gradients of a computation.
//! - [`verifier`]: is a module well formed; [`legality`]: can the device run it.
//! - [`passes`]: the optimization passes, their pipeline and buffer assignment;
//!   [`compile`] drives them ([`compile::optimize`]) and [`dump`] writes what they did.
//! - [`training_loop`]: a train step wrapped in one `while` of K iterations.
//! - [`interpreter`]: the reference interpreter, every op as HLO defines it.
//!
//! The runtime compiles an optimized module to native code and runs it; programs reach both
//! through the runtime's session API.

pub mod autodiff;
pub mod builder;
pub mod compile;
pub mod dump;
pub mod hlo_text;
pub mod interpreter;
pub mod ir;
pub mod legality;
pub(crate) mod loop_counter;
pub mod passes;
pub mod shape_inference;
pub mod trace;
pub mod training_loop;
pub mod verifier;
