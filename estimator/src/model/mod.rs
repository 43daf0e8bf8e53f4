//! Building a model_fn's graph: the [`Graph`] a model_fn records into (TF's default graph),
//! its variables ([`VariableStore`]), layers, optimizers and device randomness.
//!
//! | module | holds |
//! | --- | --- |
//! | `graph` | `Graph`: the tracer, the variable store, unique layer names, the mode and the global step |
//! | `variables` | `VariableStore`, `Variable`, `Initializer`: variables by name, TF's names and initializers |
//! | `initializers` | the host computation of initial values (glorot_uniform, truncated_normal, ...) |
//! | `get_variable` | TF1's `get_variable` and `variable_scope`, `VariableError` |
//! | `layers/` | `tf.layers`: conv2d, dense, pooling, flatten, dropout, batch_normalization |
//! | `threefry` | Threefry-2x32, the one RNG: on the host (initializers) and traced (device) |
//! | `random` | device randomness: uniform floats keyed by seed, step, replica and op |

pub mod get_variable;
pub mod graph;
pub mod initializers;
pub mod layers;
pub mod random;
pub mod threefry;
pub mod variables;

pub use get_variable::{get_variable, variable_scope, Reuse, VariableError};
pub use graph::{Graph, Mode};
pub use variables::{Initializer, Variable, VariableId, VariableStore};
