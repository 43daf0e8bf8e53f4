//! tf.keras's legacy `.h5` file: the `model_config`, `training_config` and `keras_version`
//! attributes of the root, and `model_weights/<layer>/<weight name>` datasets in the order of
//! each layer group's `weight_names` attribute (split into `weight_names0`, `weight_names1`,
//! ... when it is too big for one attribute, as Keras does).

use super::{parse_json, KerasArray, KerasFile, KerasFileError, KerasFormat};
use crate::keras::hdf5::{Group, Hdf5File, Node};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

pub(crate) fn read(path: &Path, bytes: Vec<u8>) -> Result<KerasFile, KerasFileError> {
    let h5 = Hdf5File::from_bytes(path.to_path_buf(), bytes)?;
    let root = h5.root()?;
    let text_attr = |name: &str| -> Result<Option<String>, KerasFileError> {
        root.attribute(name)?.map(|a| a.string()).transpose()
    };
    let model_config = match text_attr("model_config")? {
        Some(text) => parse_json(path, "the model_config attribute", &text)?,
        None => {
            return Err(KerasFileError::NotKeras {
                file: path.to_path_buf(),
                what: "has no `model_config` attribute: it is not a whole Keras model \
                       (a weights-only .h5 file holds no architecture)"
                    .into(),
            })
        }
    };
    let compile_config = text_attr("training_config")?
        .map(|t| parse_json(path, "the training_config attribute", &t))
        .transpose()?;
    let keras_version = text_attr("keras_version")?;
    let Some(weights_group) = root.group("model_weights")? else {
        return Err(KerasFileError::NotKeras {
            file: path.to_path_buf(),
            what: "has no `model_weights` group".into(),
        });
    };
    let nested = nested_models(&model_config);
    let mut weights = BTreeMap::new();
    for layer in split_strings(&weights_group, "layer_names")? {
        let Some(group) = weights_group.group(&layer)? else {
            return Err(KerasFileError::NotKeras {
                file: path.to_path_buf(),
                what: format!("`model_weights` lists the layer `{layer}` but has no group for it"),
            });
        };
        for weight in split_strings(&group, "weight_names")? {
            // Weight names are paths inside the layer's group (`d1/kernel:0`).
            let Some(Node::Dataset(d)) = h5.get(&format!("{}/{weight}", group.path()))? else {
                return Err(KerasFileError::NotKeras {
                    file: path.to_path_buf(),
                    what: format!(
                        "`{}` lists the weight `{weight}` but has no dataset for it",
                        group.path()
                    ),
                });
            };
            let (key, name) = key_and_name(&layer, &weight, nested.contains(&layer.as_str()));
            weights
                .entry(key)
                .or_insert_with(Vec::new)
                .push(KerasArray {
                    name,
                    shape: d.shape.iter().map(|&s| s as usize).collect(),
                    data: d.read_f32()?,
                });
        }
    }
    Ok(KerasFile {
        format: KerasFormat::LegacyH5,
        keras_version,
        model_config,
        compile_config,
        weights,
    })
}

/// A string-list attribute, or its chunks `name0`, `name1`, ... when Keras split it.
fn split_strings(group: &Group<'_>, name: &str) -> Result<Vec<String>, KerasFileError> {
    if let Some(attr) = group.attribute(name)? {
        return attr.strings();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(attr) = group.attribute(&format!("{name}{i}"))? {
        out.extend(attr.strings()?);
        i += 1;
    }
    Ok(out)
}

/// The names of the config's layers that are models themselves.
fn nested_models(model_config: &Value) -> Vec<&str> {
    model_config
        .pointer("/config/layers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|l| l.pointer("/config/layers").is_some())
        .filter_map(|l| l.pointer("/config/name").and_then(Value::as_str))
        .collect()
}

/// `d1` + `d1/kernel:0` → (`d1`, `kernel`); in a nested model `inner` + `inner_d/kernel:0` →
/// (`inner/inner_d`, `kernel`).
fn key_and_name(layer: &str, weight: &str, nested: bool) -> (String, String) {
    let weight = weight.strip_suffix(":0").unwrap_or(weight);
    let (scope, name) = weight.rsplit_once('/').unwrap_or(("", weight));
    let key = if nested && !scope.is_empty() {
        format!("{layer}/{}", scope.rsplit('/').next().unwrap_or(scope))
    } else {
        layer.to_string()
    };
    (key, name.to_string())
}
