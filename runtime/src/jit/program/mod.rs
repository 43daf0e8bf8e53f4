//! The program of a module and its executable.
//!
//! The entry computation is walked in dependency order. Each step becomes a call from the
//! program function `tessel_program(arena) -> status`: a kernel function (elementwise loop
//! nest, reduce, reduce-window, select-and-scatter), or a Rust routine (dot, convolution,
//! collectives, feeds) whose non-zero status returns at once. `call` is inlined, `while` is a
//! native loop whose state buffers are updated in place, `conditional` a native branch. Every
//! buffer is placed in one arena.
//!
//! - `compile.rs`: the entry ([`compile_module`]) and the per-module state;
//! - `codegen_queue.rs`: Cranelift's code generation of the finished functions, on helper
//!   threads during emission;
//! - `memory.rs`: buffers and scratch looked up in the buffer assignment (`../arena_plan.rs`),
//!   constants and buffer copies;
//! - `emit_instruction.rs`: the walk of a computation and the dispatch by op class;
//! - `emit_control_flow.rs`: `while` and `conditional`;
//! - `emit_calls.rs`: routine calls (dot, convolution, collectives, feeds) and profile marks;
//! - `conv_bias.rs`: the bias-add fusions a convolution routine computes in its stores;
//! - `conv_pool.rs`: the max-pool fusions a convolution routine computes in its epilogue;
//! - `conv_pair.rs`: two independent convolutions planned and called as one pair;
//! - `emit_fusion.rs`, `emit_kernels.rs`: kernels for fusions and other ops, and their calls;
//! - `emit_pooling.rs`: max-pool fusions as calls of the pooling routines;
//! - `executable.rs`: the compiled program, run once or on replicas.

mod codegen_queue;
mod compile;
mod conv_bias;
mod conv_pair;
mod conv_pool;
mod emit_calls;
mod emit_control_flow;
mod emit_fusion;
mod emit_instruction;
mod emit_kernels;
mod emit_pooling;
pub mod executable;
mod memory;

pub(crate) use compile::compile_module;
pub use executable::{Executable, ProgramStats};
