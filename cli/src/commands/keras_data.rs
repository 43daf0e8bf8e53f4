//! `tessel keras`'s data: `.npz` arrays or TFRecord files of `tf.train.Example`s (with a
//! feature spec) as an input_fn, predictions stacked into arrays, and the serving input of an
//! export.

use std::path::{Path, PathBuf};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_estimator::estimator::{Prediction, ServingInput};
use tessel_estimator::input::Dataset;
use tessel_estimator::keras::feature_spec::KerasFeatureSpec;
use tessel_estimator::keras::npz::read_npz;
use tessel_estimator::keras::KerasParts;
use tessel_estimator::{EstimatorError, Input, Params};

/// Elements a training run shuffles among when reading TFRecords (TF's `shuffle(10000)`).
const TFRECORD_SHUFFLE_BUFFER: usize = 10_000;

/// Where `--data` comes from.
#[derive(Clone)]
pub enum Data {
    /// The arrays of an `.npz` file, each with the same number of rows first.
    Npz(Vec<(String, Array)>),
    /// A TFRecord file parsed with a feature spec.
    TfRecord {
        file: PathBuf,
        spec: KerasFeatureSpec,
    },
}

/// `--data PATH`: an `.npz` file, or a TFRecord file when a feature spec is given (checked
/// against the model: `targets` when the run needs them).
pub fn load_data(
    path: &Path,
    spec: Option<&KerasFeatureSpec>,
    parts: &KerasParts,
    targets: bool,
) -> Result<Data, String> {
    match spec {
        None => columns(path).map(Data::Npz),
        Some(spec) => {
            spec.check_model(parts, targets)?;
            if !path.is_file() {
                return Err(format!("{}: no such TFRecord file", path.display()));
            }
            Ok(Data::TfRecord {
                file: path.to_path_buf(),
                spec: spec.clone(),
            })
        }
    }
}

/// The arrays of an `.npz` file, each with the same number of rows first.
pub fn columns(path: &Path) -> Result<Vec<(String, Array)>, String> {
    let arrays = read_npz(path).map_err(|e| e.to_string())?;
    if arrays.is_empty() {
        return Err(format!("{}: holds no arrays", path.display()));
    }
    Ok(arrays)
}

/// Batches of the per-shard batch size; training shuffles, repeats and drops the remainder,
/// evaluation and prediction see every row once.
pub fn input_fn(data: Data, train: bool) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |params| {
        let (ds, rows, labels) = match &data {
            Data::Npz(columns) => (
                Dataset::from_tensor_slices(columns.clone())?,
                columns[0].1.shape.dims[0].max(1) as usize,
                None,
            ),
            Data::TfRecord { file, spec } => (
                spec.dataset(std::slice::from_ref(file))?,
                TFRECORD_SHUFFLE_BUFFER,
                spec.label_key.clone(),
            ),
        };
        let ds = if train {
            ds.shuffle(rows, 0)?.repeat(None)
        } else {
            ds
        };
        let ds = ds.batch(params.batch_size() as u64, train)?;
        Ok(match labels {
            Some(l) => Input::new(ds, &l),
            None => Input::features_only(ds),
        })
    }
}

/// One array per output, rows in input order.
pub fn stack_predictions(rows: &[Prediction]) -> Result<Vec<(String, Array)>, String> {
    let Some(first) = rows.first() else {
        return Err("no predictions: the data has no rows".into());
    };
    let mut out = Vec::new();
    for (name, a) in first {
        let mut values = Vec::new();
        for r in rows {
            let v = &r[name];
            values.extend((0..v.len()).map(|i| v.data.get_f64(i) as f32));
        }
        let mut dims = vec![rows.len() as i64];
        dims.extend(a.shape.dims.iter().copied());
        out.push((
            name.clone(),
            Array::new(
                ArrayShape::new(ElementType::F32, &dims),
                ArrayData::F32(values),
            ),
        ));
    }
    Ok(out)
}

/// The model's inputs as the export's features.
pub fn serving_input(parts: &KerasParts) -> Result<ServingInput, String> {
    let config = &parts.model_config["config"];
    let layers = config["layers"]
        .as_array()
        .ok_or("the model config has no layers")?;
    let mut s = ServingInput::new();
    for l in layers.iter().filter(|l| l["class_name"] == "InputLayer") {
        let c = &l["config"];
        let shape = c
            .get("batch_shape")
            .or_else(|| c.get("batch_input_shape"))
            .and_then(|v| v.as_array())
            .ok_or("an input without a shape")?;
        let dims: Vec<i64> = shape[1..]
            .iter()
            .map(|d| d.as_i64().ok_or("an input of unknown size"))
            .collect::<Result<_, _>>()?;
        let ty = match c["dtype"].as_str() {
            Some(t) if t.starts_with("int") || t.starts_with("uint") => ElementType::S32,
            _ => ElementType::F32,
        };
        let name = c["name"]
            .as_str()
            .or_else(|| l["name"].as_str())
            .ok_or("an input without a name")?;
        s = s.feature(name, ty, &dims);
    }
    Ok(s)
}
