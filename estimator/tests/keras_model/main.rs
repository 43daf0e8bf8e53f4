//! Keras models as a TpuEstimator, against Keras's own numbers: the fixtures in
//! `tests/fixtures/keras_builder/` (made by `tests/keras/make_builder_fixtures.py` with
//! tf.keras 2.15 and Keras 3) hold each model's config, weights, predictions on fixed inputs
//! and weights after three `train_on_batch` steps.

mod common;
mod errors;
mod feature_spec;
mod files;
mod forward;
mod nested;
mod npz;
mod summary;
mod training;
