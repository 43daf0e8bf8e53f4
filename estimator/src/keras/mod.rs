//! Keras models as a [`TpuEstimator`](crate::TpuEstimator) (`docs/keras.md`): a saved
//! model's architecture, weights and `compile()` arguments become a model_fn, with Keras's
//! layers, losses, metrics and optimizers (Keras's semantics, not TF1's).
//!
//! | module | holds |
//! | --- | --- |
//! | `architecture` | Sequential and Functional configs (tf.keras 2.x and Keras 3) as layers and calls |
//! | `nested` | a model used as a layer of another, inlined as `outer/inner` layers |
//! | `options` | a layer's saved options, none silently ignored |
//! | `layers/` | the layer classes, training and inference behaviour |
//! | `activations`, `regularizers` | Keras's activations; L1/L2 weight penalties |
//! | `ops` | zero padding and depthwise convolution as HLO instructions |
//! | `model` | `KerasModel`: the forward pass traced into a `Graph`, variables from saved weights |
//! | `compile` | the compile config per output: loss, loss weight, metrics; the optimizer |
//! | `losses`, `metrics` | Keras's losses on the device; its metrics on the host |
//! | `optimizer`, `schedules` | Keras's optimizers and learning-rate schedules |
//! | `estimator` | `model_to_estimator_from_parts`, `KerasParts`, `KerasOptions` |
//! | `summary` | `model.summary()`'s table, and what tessel cannot run |
//! | `fixture_dir` | a model as `model.json` + `weights.npz` (what the tests use) |
//! | `npz` | NumPy's `.npz` / `.npy` files |
//! | `feature_spec` | TFRecord input: a JSON spec of `FixedLenFeature`s and the label key, checked against the model |
//! | `file/`, `hdf5/` | the files Keras saves models in (`.keras`, legacy `.h5`), read with an in-tree HDF5 reader |

mod activations;
mod architecture;
mod compile;
mod error;
mod estimator;
pub mod feature_spec;
pub mod file;
pub mod fixture_dir;
pub mod hdf5;
mod layers;
mod losses;
mod metrics;
mod model;
mod nested;
pub mod npz;
mod ops;
mod optimizer;
mod options;
mod regularizers;
mod schedules;
mod summary;
mod weights;

pub use error::{KerasError, ESCAPE_HATCH};
pub use estimator::{
    model_to_estimator, model_to_estimator_from_parts, read_model, KerasOptions, KerasParts,
};
pub use optimizer::KerasOptimizer;
pub use summary::{summary, Summary, SummaryRow};
pub use weights::{SavedArray, SavedWeights};
