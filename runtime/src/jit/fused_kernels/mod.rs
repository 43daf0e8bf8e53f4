//! The CLIF kernel families: a kernel is a function `kernel(arena)` with a loop nest that
//! computes one instruction (and the instructions fused into it) into its output buffers.
//!
//! - `elementwise.rs`: elementwise and shape ops, one loop nest over the output;
//! - `reduce.rs`, `reduce_fused.rs`: reduce, alone or with the elementwise outputs of its
//!   multi-output fusion;
//! - `window.rs`, `window_tiled.rs`: reduce-window and select-and-scatter;
//! - `fusion_plan.rs`: which instructions of an unfused computation are recomputed inside
//!   their users' kernels (the JIT's own plan, not the optimizer's fusion pass).

pub(crate) mod elementwise;
pub(crate) mod fusion_plan;
pub(crate) mod reduce;
pub(crate) mod reduce_fused;
pub(crate) mod window;
pub(crate) mod window_tiled;
