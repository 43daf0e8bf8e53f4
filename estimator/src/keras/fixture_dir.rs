//! A model as a directory of `model.json` (`keras_version`, `model_config`,
//! `compile_config`) and `weights.npz` (arrays keyed `LAYER/INDEX:WEIGHT`), as
//! `tests/keras/make_builder_fixtures.py` writes it from Keras: the builder's test format.

use super::error::KerasError;
use super::estimator::KerasParts;
use super::npz::read_npz;
use super::weights::{SavedArray, SavedWeights};
use serde_json::Value;
use std::path::Path;
use tessel_compiler::ir::ArrayData;

/// Reads `dir/model.json` and `dir/weights.npz`.
pub fn read_fixture_dir(dir: &Path) -> Result<KerasParts, KerasError> {
    let json_path = dir.join("model.json");
    let text = std::fs::read_to_string(&json_path)
        .map_err(|e| KerasError::File(format!("{}: {e}", json_path.display())))?;
    let meta: Value = serde_json::from_str(&text)
        .map_err(|e| KerasError::File(format!("{}: not JSON: {e}", json_path.display())))?;
    let model_config = meta
        .get("model_config")
        .cloned()
        .ok_or_else(|| KerasError::File(format!("{}: no model_config", json_path.display())))?;
    let arrays = read_npz(&dir.join("weights.npz")).map_err(|e| KerasError::File(e.to_string()))?;
    Ok(KerasParts {
        keras_version: meta
            .get("keras_version")
            .and_then(Value::as_str)
            .map(str::to_string),
        model_config,
        compile_config: meta.get("compile_config").cloned().filter(|v| !v.is_null()),
        weights: weights_from_keys(arrays)?,
    })
}

/// `LAYER/INDEX:WEIGHT` keys to weights by layer, in index order.
pub fn weights_from_keys(
    arrays: Vec<(String, tessel_compiler::ir::Array)>,
) -> Result<SavedWeights, KerasError> {
    let mut by_layer: std::collections::BTreeMap<String, Vec<(usize, SavedArray)>> =
        Default::default();
    for (key, a) in arrays {
        let bad = || KerasError::File(format!("weight key `{key}` is not LAYER/INDEX:NAME"));
        let (layer, rest) = key.rsplit_once('/').ok_or_else(bad)?;
        let (index, name) = rest.split_once(':').ok_or_else(bad)?;
        let index: usize = index.parse().map_err(|_| bad())?;
        let ArrayData::F32(data) = a.data else {
            return Err(KerasError::File(format!("weight `{key}` is not float32")));
        };
        by_layer.entry(layer.to_string()).or_default().push((
            index,
            SavedArray {
                name: name.to_string(),
                shape: a.shape.dims.iter().map(|&d| d as usize).collect(),
                data,
            },
        ));
    }
    Ok(by_layer
        .into_iter()
        .map(|(layer, mut ws)| {
            ws.sort_by_key(|(i, _)| *i);
            (layer, ws.into_iter().map(|(_, w)| w).collect())
        })
        .collect())
}
