//! IDX files (MNIST's original format) as a dataset source: each named file is read whole
//! (plain or `.gz`) and sliced along its first dimension, so element `i` holds row `i` of every
//! file (`images` u8[28, 28], `labels` u8[] for MNIST). The files must agree on their first
//! dimension.

use super::dataset::{Dataset, DatasetError};
use super::idx::read_idx;
use std::path::PathBuf;

/// A dataset of the rows of the IDX files, one component per `(name, file)`.
pub fn idx_dataset(files: &[(&str, PathBuf)]) -> Result<Dataset, DatasetError> {
    let columns = files
        .iter()
        .map(|(name, path)| {
            read_idx(path)
                .map(|a| (name.to_string(), a))
                .map_err(|e| DatasetError::Source {
                    context: path.display().to_string(),
                    source: Box::new(e),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Dataset::from_tensor_slices(columns)
}
