//! `KerasFileError`: why a Keras model file (or an HDF5 file inside it) could not be read.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum KerasFileError {
    #[error("cannot read {file}: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// The file uses a part of its format this reader does not implement.
    #[error("{file}: at byte {offset}: {feature} is not supported")]
    Unsupported {
        file: PathBuf,
        offset: u64,
        feature: String,
    },
    /// The bytes are not what the format says must be there (truncated or damaged file).
    #[error("{file}: at byte {offset}: expected {expected}")]
    Corrupt {
        file: PathBuf,
        offset: u64,
        expected: String,
    },
    /// The file is readable but lacks what a Keras model file holds.
    #[error("{file}: {what}")]
    NotKeras { file: PathBuf, what: String },
    #[error("{file}: {what} is not valid JSON: {source}")]
    Json {
        file: PathBuf,
        what: String,
        source: serde_json::Error,
    },
    #[error("{file} is not a readable zip archive: {message}")]
    Zip { file: PathBuf, message: String },
}
