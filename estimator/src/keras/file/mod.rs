//! Reading a saved Keras model: its architecture, its `compile()` arguments and its weights,
//! from any of the three formats Keras saves in.
//!
//! - [`KerasFormat::KerasV3Zip`]: a `.keras` zip (Keras 3, and tf.keras 2.15's
//!   `save_format="keras"`) holding `config.json`, `metadata.json` and `model.weights.h5`.
//! - [`KerasFormat::LegacyH5`]: a tf.keras `.h5` file: `model_config` and `training_config`
//!   attributes, weights under `model_weights/<layer>/`, ordered by `weight_names`.
//! - [`KerasFormat::SavedModel`]: a tf.keras 2.x SavedModel directory: `keras_metadata.pb`
//!   and the checkpoint in `variables/`.
//!
//! The HDF5 files are read by [`crate::keras::hdf5`]. Weights are keyed by layer name; a layer
//! of a nested model (a Sequential inside a Functional) is keyed `outer/inner`, by the two
//! layers' names.

mod error;
mod keras_zip;
mod layer_paths;
mod legacy_h5;
mod weight_names;

pub use error::KerasFileError;

use std::collections::BTreeMap;
use std::path::Path;

/// Which of Keras's formats a model was saved in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KerasFormat {
    KerasV3Zip,
    LegacyH5,
    SavedModel,
}

/// A saved Keras model, as the file holds it.
#[derive(Clone, Debug)]
pub struct KerasFile {
    pub format: KerasFormat,
    pub keras_version: Option<String>,
    /// {"class_name": "Sequential" | "Functional" | "Model", "config": {...}} as Keras wrote it
    /// (Keras 3 / tf.keras 2.15 spelling; the builder copes with both).
    pub model_config: serde_json::Value,
    /// Keras 3 `compile_config` or legacy `training_config`, if the model was compiled.
    pub compile_config: Option<serde_json::Value>,
    /// Per layer name, the layer's weights in Keras's own order (`layer.weights`), with their
    /// names (e.g. "kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance",
    /// "embeddings"). A layer of a nested model is keyed "outer/inner". Layers without weights
    /// have no entry.
    pub weights: BTreeMap<String, Vec<KerasArray>>,
}

/// One weight: its name within its layer, its shape and its values (row-major).
#[derive(Clone, Debug, PartialEq)]
pub struct KerasArray {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Reads a `.keras` zip, a legacy `.h5` file or a SavedModel directory, telling them apart by
/// their contents (not their names).
pub fn read_keras_file(path: &Path) -> Result<KerasFile, KerasFileError> {
    let io = |source| KerasFileError::Io {
        file: path.to_path_buf(),
        source,
    };
    if std::fs::metadata(path).map_err(io)?.is_dir() {
        return Err(KerasFileError::Unsupported {
            file: path.to_path_buf(),
            offset: 0,
            feature: "tf.keras SavedModel directories".into(),
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    if bytes.starts_with(b"PK\x03\x04") {
        keras_zip::read(path, bytes)
    } else if bytes.starts_with(b"\x89HDF\r\n\x1a\n") {
        legacy_h5::read(path, bytes)
    } else {
        Err(KerasFileError::NotKeras {
            file: path.to_path_buf(),
            what: "is neither a .keras zip, an HDF5 (.h5) file nor a SavedModel directory".into(),
        })
    }
}

/// Parses JSON text found in the file, naming what it was in errors.
pub(crate) fn parse_json(
    file: &Path,
    what: &str,
    text: &str,
) -> Result<serde_json::Value, KerasFileError> {
    serde_json::from_str(text).map_err(|source| KerasFileError::Json {
        file: file.to_path_buf(),
        what: what.to_string(),
        source,
    })
}
