//! Building a model_fn's graph: the [`Graph`] a model_fn records into (TF's default graph),
//! its variables ([`VariableStore`]), layers, optimizers and device randomness.
//!
//! | module | holds |
//! | --- | --- |
//! | `global_step` | the host's i64 step as the device's s32, refusing loops past `i32::MAX` |
//! | `graph` | `Graph`: the tracer, the variable store, unique layer names, the mode and the global step |
//! | `variables` | `VariableStore`, `Variable`, `Initializer`: variables by name, TF's names and initializers |
//! | `optimizers` | the `Optimizer` trait (TF1's `minimize`) and GradientDescent, Momentum, Adam, RMSProp, Adagrad |
//! | `schedules` | learning-rate schedules as traced functions of the global step |
//! | `cross_shard` | `CrossShardOptimizer`: gradients summed across replicas |
//! | `initializers` | the host computation of initial values (glorot_uniform, truncated_normal, ...) |
//! | `get_variable` | TF1's `get_variable` and `variable_scope`, `VariableError` |
//! | `layers/` | `tf.layers`: conv2d, dense, pooling, flatten, dropout, batch_normalization |
//! | `threefry` | Threefry-2x32, the one RNG: on the host (initializers) and traced (device) |
//! | `random` | device randomness: uniform floats keyed by seed, step, replica and op |

pub mod cross_shard;
pub mod get_variable;
pub mod global_step;
pub mod graph;
pub mod initializers;
pub mod layers;
pub mod optimizers;
pub mod random;
pub mod schedules;
pub mod threefry;
pub mod variables;

pub use cross_shard::{CrossShardError, CrossShardOptimizer, Reduction};
pub use get_variable::{get_variable, variable_scope, Reuse, VariableError};
pub use graph::{Graph, Mode};
pub use optimizers::{GradAndVar, Gradient, LearningRate, Optimizer, OptimizerError, TrainOp};
pub use variables::{Initializer, Variable, VariableId, VariableStore};
