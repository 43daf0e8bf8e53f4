//! MNIST's IDX files as TFRecords of `tf.train.Example`, with the features TensorFlow's
//! `convert_to_records.py` writes: `image_raw` (the 784 pixel bytes), `label`, `height`,
//! `width` and `depth` (int64). Each file is written atomically.

use crate::input::example::{Example, Feature};
use crate::input::idx::read_idx;
use crate::input::tfrecord::{Compression, RecordFileWriter};
use crate::input::InputError;
use std::path::{Path, PathBuf};
use tessel_compiler::ir::ArrayData;

/// What [`convert_mnist`] wrote: (file, records) per split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Converted {
    pub files: Vec<(PathBuf, u64)>,
}

/// Converts `IDX_DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]` into
/// `OUT_DIR/train.tfrecords` and `OUT_DIR/test.tfrecords`.
pub fn convert_mnist(idx_dir: &Path, out_dir: &Path) -> Result<Converted, InputError> {
    std::fs::create_dir_all(out_dir).map_err(|e| InputError::io(out_dir, e))?;
    let mut files = Vec::new();
    for (split, prefix) in [("train", "train"), ("test", "t10k")] {
        let images = read_idx(find(idx_dir, &format!("{prefix}-images-idx3-ubyte"))?)?;
        let labels = read_idx(find(idx_dir, &format!("{prefix}-labels-idx1-ubyte"))?)?;
        let (ArrayData::U8(pixels), ArrayData::U8(labels_u8)) = (&images.data, &labels.data) else {
            return Err(idx_error(
                idx_dir,
                prefix,
                "images and labels must be u8 (type code 0x08)",
            ));
        };
        let dims = images.shape.dims.as_slice();
        if dims.len() != 3 || dims[0] as usize != labels_u8.len() {
            return Err(idx_error(
                idx_dir,
                prefix,
                &format!("images {dims:?} do not match {} labels", labels_u8.len()),
            ));
        }
        let (rows, cols) = (dims[1], dims[2]);
        let path = out_dir.join(format!("{split}.tfrecords"));
        let mut w = RecordFileWriter::create(&path, Compression::None)?;
        let size = (rows * cols) as usize;
        for (i, &label) in labels_u8.iter().enumerate() {
            let example = Example::from_features([
                ("height".to_string(), Feature::int64s(vec![rows])),
                ("width".to_string(), Feature::int64s(vec![cols])),
                ("depth".to_string(), Feature::int64s(vec![1])),
                ("label".to_string(), Feature::int64s(vec![label as i64])),
                (
                    "image_raw".to_string(),
                    Feature::bytes(vec![pixels[i * size..(i + 1) * size].to_vec()]),
                ),
            ]);
            w.write(&example.to_bytes())?;
        }
        files.push((path, w.commit()?));
    }
    Ok(Converted { files })
}

/// `name.gz` if present, else `name`.
fn find(dir: &Path, name: &str) -> Result<PathBuf, InputError> {
    let gz = dir.join(format!("{name}.gz"));
    let plain = dir.join(name);
    if gz.is_file() {
        Ok(gz)
    } else if plain.is_file() {
        Ok(plain)
    } else {
        Err(InputError::io(
            &plain,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file (nor .gz)"),
        ))
    }
}

fn idx_error(dir: &Path, prefix: &str, reason: &str) -> InputError {
    InputError::Idx {
        path: dir.join(format!("{prefix}-*-ubyte")),
        reason: reason.to_string(),
    }
}
