//! `tessel-estimator`: TPUEstimator's programming model on tessel's session API.
//!
//! - [`input`]: the host input pipeline (TFRecord, `tf.train.Example`, IDX, a tf.data-style
//!   `Dataset`) that an `input_fn` returns and that feeds the device through infeed.
//! - [`model`]: the graph a model_fn records into: variables, layers, optimizers.
//! - [`metrics`]: host-side streaming metrics (`tf.metrics`) for `eval_metrics`.
//! - [`summary`]: TensorBoard event files (scalars).

pub mod input;
pub mod metrics;
pub mod model;
pub mod summary;
