//! Building a model_fn's graph: the [`Graph`] a model_fn records into (TF's default graph),
//! its variables ([`VariableStore`]), layers, optimizers and device randomness.
//!
//! | module | holds |
//! | --- | --- |
//! | `graph` | `Graph`: the tracer, the variable store, unique layer names, the mode and the global step |
//! | `variables` | `VariableStore`, `Variable`, `Initializer`: variables by name, TF's names and initializers |

pub mod graph;
pub mod variables;

pub use graph::{Graph, Mode};
pub use variables::{Initializer, Variable, VariableId, VariableStore};
