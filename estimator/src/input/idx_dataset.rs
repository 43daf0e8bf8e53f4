//! IDX files (MNIST's original format) as a dataset source: each named file is read whole
//! (plain or `.gz`) and sliced along its first dimension, so element `i` holds row `i` of every
//! file (`images` u8[28, 28], `labels` u8[] for MNIST). The files must agree on their first
//! dimension. [`idx_dataset_normalized`] gives what a model takes: f32 images in [0, 1] and
//! s32 labels.

use super::dataset::{Dataset, DatasetError};
use super::idx::read_idx;
use super::ValueSpec;
use std::path::PathBuf;
use tessel_compiler::ir::ElementType;

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

/// An images file (u8 pixels) and a labels file as a model takes them: images cast to f32
/// and scaled to [0, 1] as `tf.cast(x, tf.float32) * (1. / 255)`, labels cast to s32 (TF's
/// `tf.int32` labels). The pixels are converted element by element as they are read, so the
/// files stay in memory as bytes.
pub fn idx_dataset_normalized(
    images: (&str, PathBuf),
    labels: (&str, PathBuf),
) -> Result<Dataset, DatasetError> {
    let (image, label) = (images.0, labels.0);
    let ds = idx_dataset(&[images.clone(), labels])?;
    if let Some((_, ValueSpec::Dense { element_type, .. })) = ds.element_spec().components.first() {
        if *element_type != ElementType::U8 {
            return Err(DatasetError::invalid(
                "idx_dataset_normalized",
                format!(
                    "{} holds {element_type:?} values; normalizing to [0, 1] needs u8 pixels",
                    images.1.display()
                ),
            ));
        }
    }
    ds.cast(image, ElementType::F32)?
        .scale(image, 1.0 / 255.0, 0.0)?
        .cast(label, ElementType::S32)
}
