//! The host input pipeline: what an `input_fn` returns (`docs/input.md`).
//!
//! | module | holds |
//! | --- | --- |
//! | `element` | `Value`, `Element`, `ValueSpec`, `ElementSpec`: what flows through a dataset |
//! | `dataset` | `Dataset`: sources, transformations, positioned iterators, infeed |

pub mod dataset;
pub mod element;

pub use dataset::{Dataset, DatasetError, DatasetIterator};
pub use element::{Element, ElementSpec, Value, ValueSpec};
