//! TFRecord input for a Keras model: a JSON feature spec, what a TF user writes as
//! `{"image": tf.io.FixedLenFeature([28, 28, 1], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}`
//! plus the label key, checked against the model's inputs before anything is read:
//!
//! ```json
//! {
//!   "features": {
//!     "image": {"shape": [28, 28, 1], "dtype": "float32"},
//!     "label": {"shape": [], "dtype": "int64", "default_value": 0}
//!   },
//!   "label_key": "label",
//!   "compression_type": ""
//! }
//! ```
//!
//! Features feed the model's inputs by name (`x` for a single input); the label key names the
//! target of a single-output model (without one, a feature named after the output or `y`).

use super::architecture::{self, Architecture};
use super::estimator::KerasParts;
use super::model::input_type;
use crate::input::parse::{FeatureDType, FeatureDefault, FeatureSpec, ParseSpec};
use crate::input::tfrecord::{Compression, ReaderOptions};
use crate::input::{tfrecord_dataset, Dataset, DatasetError};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// A feature spec file's contents.
#[derive(Clone, Debug, PartialEq)]
pub struct KerasFeatureSpec {
    /// One `FixedLenFeature` per feature, in the file's order.
    pub parse: ParseSpec,
    /// The feature that is the target of a single-output model.
    pub label_key: Option<String>,
    /// TF's `compression_type` of the records: "" (none), "GZIP" or "ZLIB".
    pub compression: Compression,
}

/// A feature spec that cannot be read, or does not fit the model.
#[derive(Debug, thiserror::Error)]
#[error("feature spec {file}: {message}")]
pub struct FeatureSpecError {
    pub file: String,
    pub message: String,
}

/// Reads a feature spec file (JSON, the form in this module's documentation).
pub fn read_feature_spec(path: &Path) -> Result<KerasFeatureSpec, FeatureSpecError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| FeatureSpecError {
        file: file.clone(),
        message: format!("cannot read: {e}"),
    })?;
    parse_feature_spec(&text, &file)
}

/// Parses a feature spec's JSON text; `file` names it in errors.
pub fn parse_feature_spec(text: &str, file: &str) -> Result<KerasFeatureSpec, FeatureSpecError> {
    let err = |message: String| FeatureSpecError {
        file: file.to_string(),
        message,
    };
    let root: Value = serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
    let root = root
        .as_object()
        .ok_or_else(|| err("expected a JSON object with `features`".into()))?;
    refuse_unknown(
        root,
        &["features", "label_key", "compression_type"],
        "the spec",
    )
    .map_err(&err)?;
    let features = root
        .get("features")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            err("expected `features`: an object of feature name to {\"shape\", \"dtype\"}".into())
        })?;
    if features.is_empty() {
        return Err(err("`features` is empty".into()));
    }
    let mut parse = ParseSpec::new();
    for (name, f) in features {
        let spec = fixed_len(name, f).map_err(&err)?;
        parse = parse.push(name, spec).map_err(|e| err(e.to_string()))?;
    }
    let label_key = match root.get("label_key") {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) if features.contains_key(k) => Some(k.clone()),
        Some(Value::String(k)) => {
            return Err(err(format!(
                "`label_key` is `{k}`, which is not one of the features ({})",
                features.keys().cloned().collect::<Vec<_>>().join(", ")
            )))
        }
        Some(v) => {
            return Err(err(format!(
                "`label_key` must be a feature's name, not {v}"
            )))
        }
    };
    let compression = match root.get("compression_type") {
        None | Some(Value::Null) => Compression::None,
        Some(Value::String(c)) => Compression::from_tf_name(c).map_err(|e| err(e.to_string()))?,
        Some(v) => {
            return Err(err(format!(
                "`compression_type` must be \"\", \"GZIP\" or \"ZLIB\", not {v}"
            )))
        }
    };
    Ok(KerasFeatureSpec {
        parse,
        label_key,
        compression,
    })
}

fn refuse_unknown(obj: &Map<String, Value>, known: &[&str], what: &str) -> Result<(), String> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{what}: unknown key `{k}` (expected {})",
            known.join(", ")
        )),
        None => Ok(()),
    }
}

/// One feature: `{"shape": [..], "dtype": "float32" | "int64", "default_value": ..}`.
fn fixed_len(name: &str, f: &Value) -> Result<FeatureSpec, String> {
    let obj = f.as_object().ok_or_else(|| {
        format!("feature `{name}`: expected {{\"shape\": [...], \"dtype\": \"float32\" or \"int64\"}}, found {f}")
    })?;
    refuse_unknown(
        obj,
        &["shape", "dtype", "default_value"],
        &format!("feature `{name}`"),
    )?;
    let dtype = match obj.get("dtype").and_then(Value::as_str) {
        Some("float32" | "tf.float32") => FeatureDType::Float32,
        Some("int64" | "tf.int64") => FeatureDType::Int64,
        Some("string" | "tf.string") => {
            return Err(format!(
                "feature `{name}`: dtype string is not read by `tessel keras` (the model takes \
                 numbers): store float32 or int64 lists, or write an input_fn with decode_raw"
            ))
        }
        Some(other) => {
            return Err(format!(
                "feature `{name}`: dtype `{other}`: expected \"float32\" or \"int64\" (the \
                 dtypes of an Example's float_list and int64_list)"
            ))
        }
        None => return Err(format!("feature `{name}`: expected a `dtype` string")),
    };
    let shape = match obj.get("shape") {
        None => Vec::new(),
        Some(Value::Array(dims)) => dims
            .iter()
            .map(|d| d.as_i64().filter(|&d| d >= 0))
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| {
                format!("feature `{name}`: shape {dims:?}: expected non-negative integers")
            })?,
        Some(v) => return Err(format!("feature `{name}`: shape {v}: expected a list")),
    };
    let default = match obj.get("default_value") {
        None | Some(Value::Null) => None,
        Some(v) => Some(default_value(name, v, dtype, &shape)?),
    };
    Ok(FeatureSpec::FixedLen {
        shape,
        dtype,
        default,
    })
}

/// TF's default_value: one number (repeated to fill the shape) or a flat list of them.
fn default_value(
    name: &str,
    v: &Value,
    dtype: FeatureDType,
    shape: &[i64],
) -> Result<FeatureDefault, String> {
    // A scalar default is repeated to fill the shape: bound the count first (the spec's
    // check of the shape comes after this).
    let count = shape
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::from(i32::MAX))
        .ok_or_else(|| format!("feature `{name}`: shape {shape:?} has too many elements"))?;
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        one => std::iter::repeat_n(one, count as usize).collect(),
    };
    let bad = || format!("feature `{name}`: default_value {v} is not a {dtype:?} value or list");
    Ok(match dtype {
        FeatureDType::Int64 => FeatureDefault::Int64(
            items
                .iter()
                .map(|x| x.as_i64())
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
        ),
        _ => FeatureDefault::Float32(
            items
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
        ),
    })
}

impl KerasFeatureSpec {
    /// Checks the spec against the model: a feature for every input, of its shape and a dtype
    /// that converts to the input's, and (when `targets`) a target for a single output. Each
    /// error names the feature and what the model expects.
    pub fn check_model(&self, parts: &KerasParts, targets: bool) -> Result<(), String> {
        let arch = architecture::parse(&parts.model_config).map_err(|e| e.to_string())?;
        self.check_inputs(&arch)?;
        if targets {
            self.check_targets(&arch)?;
        }
        Ok(())
    }

    fn feature(&self, name: &str) -> Option<(&Vec<i64>, FeatureDType)> {
        self.parse
            .features
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, s)| match s {
                FeatureSpec::FixedLen { shape, dtype, .. } => Some((shape, *dtype)),
                FeatureSpec::VarLen { .. } => None,
            })
    }

    fn check_inputs(&self, arch: &Architecture) -> Result<(), String> {
        let single = arch.inputs.len() == 1;
        for input in &arch.inputs {
            let (name, (shape, dtype)) = match self.feature(&input.name) {
                Some(f) => (input.name.as_str(), f),
                None => match self.feature("x").filter(|_| single) {
                    Some(f) => ("x", f),
                    None => {
                        return Err(format!(
                            "no feature for the model's input `{}`{} (the spec has {})",
                            input.name,
                            if single { " or `x`" } else { "" },
                            self.names()
                        ))
                    }
                },
            };
            let fits = shape.len() == input.shape.len()
                && shape
                    .iter()
                    .zip(&input.shape)
                    .all(|(&s, d)| d.is_none_or(|d| d == s));
            if !fits {
                let want: Vec<String> = input
                    .shape
                    .iter()
                    .map(|d| d.map_or("None".into(), |d| d.to_string()))
                    .collect();
                return Err(format!(
                    "feature `{name}` has shape {shape:?}, the model's input `{}` takes [{}] per example",
                    input.name,
                    want.join(", ")
                ));
            }
            let integer_input = input_type(&input.dtype) != input_type("float32");
            if integer_input && dtype == FeatureDType::Float32 {
                return Err(format!(
                    "feature `{name}` is float32, the model's input `{}` takes {} (store it as int64)",
                    input.name, input.dtype
                ));
            }
        }
        Ok(())
    }

    fn check_targets(&self, arch: &Architecture) -> Result<(), String> {
        let outputs = arch.output_names();
        if let Some(key) = &self.label_key {
            if outputs.len() != 1 {
                return Err(format!(
                    "`label_key` is `{key}`, but the model has {} outputs: name a target feature \
                     after each output ({}) and leave out label_key",
                    outputs.len(),
                    outputs.join(", ")
                ));
            }
            return Ok(());
        }
        let single = outputs.len() == 1;
        for out in &outputs {
            if self.feature(out).is_none() && !(single && self.feature("y").is_some()) {
                return Err(format!(
                    "no target for the model's output `{out}`: set `label_key`{}, or name a \
                     feature `{out}`{} (the spec has {})",
                    if single { "" } else { " (one output only)" },
                    if single { " or `y`" } else { "" },
                    self.names()
                ));
            }
        }
        Ok(())
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self
            .parse
            .features
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        names.join(", ")
    }

    /// The parsed records of `files` as a dataset of the spec's features.
    pub fn dataset(&self, files: &[PathBuf]) -> Result<Dataset, DatasetError> {
        let options = ReaderOptions {
            compression: self.compression,
            ..ReaderOptions::default()
        };
        tfrecord_dataset(files, options).parse_example(self.parse.clone(), 1)
    }
}
