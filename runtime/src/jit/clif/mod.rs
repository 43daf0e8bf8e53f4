//! CLIF emission helpers shared by every kernel: element types in memory and in CLIF values
//! (`types.rs`), counted loops (`loops.rs`), one elementwise op on CLIF values
//! (`element_ops.rs`) with its lane and mask helpers (`lane_values.rs`), conversions
//! (`convert.rs`) and `bf16`/`f16` arithmetic (`low_precision.rs`), the value of an instruction
//! at an index (`value_at_index.rs`, the elemental emitter), select-and-scatter windows that do
//! not overlap (`tiled_window.rs`), straight-line transcendental functions (`vector_math.rs`)
//! and the symbols generated code uses for memory and functions outside the arena
//! (`symbols.rs`).

pub mod convert;
pub(crate) mod element_ops;
pub(crate) mod lane_values;
pub mod loops;
pub(crate) mod low_precision;
pub(crate) mod symbols;
pub(crate) mod tiled_window;
pub mod types;
pub(crate) mod value_at_index;
pub mod vector_math;
