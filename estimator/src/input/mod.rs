//! The host input pipeline: what an `input_fn` returns (`docs/input.md`).
//!
//! | module | holds |
//! | --- | --- |
//! | `element` | `Value`, `Element`, `ValueSpec`, `ElementSpec`: what flows through a dataset |

pub mod element;

pub use element::{Element, ElementSpec, Value, ValueSpec};
