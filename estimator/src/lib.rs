//! `tessel-estimator`: TPUEstimator's programming model on tessel's session API.
//!
//! - [`checkpoint`]: checkpoints and the `checkpoint` state file in a model_dir, as TF lays them out.
//! - [`config`]: `RunConfig` and `TpuConfig` with TF's defaults and errors.
//! - [`input`]: the host input pipeline (TFRecord, `tf.train.Example`, IDX, a tf.data-style
//!   `Dataset`) that an `input_fn` returns and that feeds the device through infeed.
//! - [`model`]: the graph a model_fn records into: variables, layers, optimizers.
//! - [`losses`]: `tf.compat.v1.losses` (cross-entropies, regression losses, TF's reductions),
//!   weighted by evaluation's padding mask.
//! - [`metrics`]: host-side streaming metrics (`tf.metrics`) for `eval_metrics`.
//! - [`summary`]: TensorBoard event files (scalars).
//! - [`estimator`]: `TpuEstimator`: train and evaluate a model_fn fed by an input_fn.

pub mod checkpoint;
pub mod config;
pub mod error;
pub mod estimator;
pub mod input;
pub mod keras;
pub mod losses;
pub mod metrics;
pub mod model;
pub mod summary;

pub use config::{CheckpointFormat, RunConfig, TpuConfig};
pub use error::EstimatorError;
pub use estimator::{Input, Params, TpuEstimator, TpuEstimatorSpec};
pub use model::{Graph, Mode};
