//! The layer of the JIT that calls into the kernels crate (`tessel-kernels`): plans that turn
//! IR shapes and dimension numbers into the crate's geometry at compile time, and the
//! `extern "C"` routines generated code calls with a plan and the arena, which resolve the
//! buffer addresses and run the crate's routine.
//!
//! - `dot.rs`: `dot` as GEMM (operands permuted into scratch where needed).
//! - `conv_select.rs`: which routine a convolution runs (and the rule for choosing).
//! - `bias_match.rs`: the bias add after a convolution, which the direct and Winograd
//!   routines then do in their stores.
//! - `convolution.rs`: the general patch-matrix GEMM, any convolution.
//! - `conv_direct.rs`, `winograd.rs`, `winograd_1d.rs`, `conv_phase.rs`,
//!   `conv_strided_wgrad.rs`: the specialized convolutions;
//!   `conv_epilogue.rs`: the bias and max-pool they compute as they store their output.
//! - `pool_match.rs`, `pooling.rs`: max-pool fusions (forward; gradient with ReLU gate and bias
//!   sum) recognized and run by the pooling routines.
//! - `pool_fold.rs`: the forward max-pool after a convolution, which the direct and Winograd
//!   routines then compute in their epilogue.
//! - `pool_choices.rs`: the window choices a forward max-pool records, which its gradient
//!   then reads instead of the pre-activation.
//! - `kernel_pair.rs`: two halves of a generated kernel on two workers.
//! - `conv_pair.rs`: two independent convolutions side by side, one per core.

pub mod bias_match;
pub mod conv_direct;
pub(crate) mod conv_epilogue;
pub mod conv_pair;
pub(crate) mod conv_phase;
pub mod conv_select;
pub(crate) mod conv_shape;
pub(crate) mod conv_strided_wgrad;
pub mod convolution;
pub mod dot;
pub(crate) mod kernel_pair;
pub(crate) mod operand_plan;
pub mod pool_choices;
pub mod pool_fold;
pub mod pool_match;
pub mod pooling;
pub mod winograd;
pub(crate) mod winograd_1d;
