//! Real training and test sets for the suite's accuracy runs, preprocessed exactly as
//! `tests/benches/tf/models.py --accuracy` does on the TF side:
//!
//! | model | data (IDX files in the directory given) | features |
//! | --- | --- | --- |
//! | `mnist` | MNIST | `image` f32[784], pixel / 255 |
//! | `mlp` | Fashion-MNIST | `image` f32[784], pixel / 255 |
//! | `fashion` | Fashion-MNIST | `image` f32[28, 28, 1], pixel / 255 |
//! | `resnet20` | Fashion-MNIST | `image` f32[32, 32, 3]: padded with 2 black pixels on each side, pixel / 255 - 0.5, repeated to 3 channels |
//! | `textcnn` | the keyword task of `tests/benches/tf/text_task.py` | `ids` s32[200] |
//!
//! Labels are s32 `label`. The files are `{train,t10k}-{images,labels}-idx*` (gzipped or
//! not; the text task's are `{train,t10k}-{ids,labels}-idx*`).

use std::path::{Path, PathBuf};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_estimator::input::idx::read_idx;
use tessel_estimator::input::Dataset;
use tessel_estimator::EstimatorError;

/// The split's file of `kind` (`images-idx3-ubyte`, ...) in `dir`, plain or gzipped.
fn split_file(dir: &Path, train: bool, kind: &str) -> Result<PathBuf, EstimatorError> {
    let prefix = if train { "train" } else { "t10k" };
    let plain = dir.join(format!("{prefix}-{kind}"));
    let gz = dir.join(format!("{prefix}-{kind}.gz"));
    if plain.is_file() {
        Ok(plain)
    } else if gz.is_file() {
        Ok(gz)
    } else {
        Err(EstimatorError::Input(format!(
            "{} has neither {prefix}-{kind} nor {prefix}-{kind}.gz",
            dir.display()
        )))
    }
}

fn read(dir: &Path, train: bool, kind: &str) -> Result<Array, EstimatorError> {
    let path = split_file(dir, train, kind)?;
    read_idx(&path).map_err(|e| EstimatorError::Input(e.to_string()))
}

/// Any integer array as s32 (IDX labels are u8, the text task's ids s32).
fn to_s32(a: Array) -> Result<Array, EstimatorError> {
    let values: Vec<i32> = match &a.data {
        ArrayData::U8(v) => v.iter().map(|&x| x as i32).collect(),
        ArrayData::S32(v) => v.clone(),
        other => {
            return Err(EstimatorError::Input(format!(
                "expected u8 or s32 integers, got {:?}",
                other.element_type()
            )))
        }
    };
    Ok(Array::new(
        ArrayShape::new(ElementType::S32, a.shape.dims.as_slice()),
        ArrayData::S32(values),
    ))
}

/// u8 images `[N, 28, 28]` as the model's f32 input (see the module's table).
fn image_features(model: &str, images: &Array) -> Result<Array, EstimatorError> {
    let ArrayData::U8(pixels) = &images.data else {
        return Err(EstimatorError::Input(
            "the images file does not hold u8 pixels".into(),
        ));
    };
    let dims = images.shape.dims.as_slice();
    if dims.len() != 3 || dims[1] != 28 || dims[2] != 28 {
        return Err(EstimatorError::Input(format!(
            "expected images [N, 28, 28], got {dims:?}"
        )));
    }
    let n = dims[0];
    let scaled = |p: u8| p as f32 / 255.0;
    let (shape, values): (Vec<i64>, Vec<f32>) = match model {
        "mnist" | "mlp" => (vec![n, 784], pixels.iter().map(|&p| scaled(p)).collect()),
        "fashion" => (
            vec![n, 28, 28, 1],
            pixels.iter().map(|&p| scaled(p)).collect(),
        ),
        "resnet20" => {
            let mut out = Vec::with_capacity(n as usize * 32 * 32 * 3);
            for image in pixels.chunks_exact(28 * 28) {
                for y in 0..32usize {
                    for x in 0..32usize {
                        let inside = (2..30).contains(&y) && (2..30).contains(&x);
                        let p = if inside {
                            image[(y - 2) * 28 + x - 2]
                        } else {
                            0
                        };
                        let v = scaled(p) - 0.5;
                        out.extend_from_slice(&[v, v, v]);
                    }
                }
            }
            (vec![n, 32, 32, 3], out)
        }
        other => {
            return Err(EstimatorError::Value(format!(
                "{other} does not train on images"
            )))
        }
    };
    Ok(Array::new(
        ArrayShape::new(ElementType::F32, &shape),
        ArrayData::F32(values),
    ))
}

/// The training (`train`) or test split for `model`, from the IDX files in `dir`.
pub fn split(model: &str, dir: &Path, train: bool) -> Result<Dataset, EstimatorError> {
    let (name, features, labels) = if model == "textcnn" {
        let ids = to_s32(read(dir, train, "ids-idx2-int")?)?;
        ("ids", ids, read(dir, train, "labels-idx1-int")?)
    } else {
        let images = read(dir, train, "images-idx3-ubyte")?;
        let features = image_features(model, &images)?;
        ("image", features, read(dir, train, "labels-idx1-ubyte")?)
    };
    let labels = to_s32(labels)?;
    if labels.shape.dims.as_slice().first() != features.shape.dims.as_slice().first() {
        return Err(EstimatorError::Input(format!(
            "{} has {:?} features but {:?} labels",
            dir.display(),
            features.shape.dims.as_slice(),
            labels.shape.dims.as_slice()
        )));
    }
    Ok(Dataset::from_tensor_slices(vec![
        (name.to_string(), features),
        ("label".to_string(), labels),
    ])?)
}
