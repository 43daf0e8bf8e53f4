//! The `.keras` zip of Keras 3 and tf.keras 2.15: `config.json` (the model and its
//! `compile_config`), `metadata.json` (the Keras version) and `model.weights.h5`, whose
//! `layers/<class_in_snake_case>[_N]/vars/<i>` datasets hold each layer's weights by position.

use super::layer_paths::layer_paths;
use super::weight_names::weight_names;
use super::{parse_json, KerasArray, KerasFile, KerasFileError, KerasFormat};
use crate::keras::hdf5::{Group, Hdf5File, Node};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

pub(crate) fn read(path: &Path, bytes: Vec<u8>) -> Result<KerasFile, KerasFileError> {
    let limit = (bytes.len() as u64).saturating_mul(1100);
    let mut zip =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| KerasFileError::Zip {
            file: path.to_path_buf(),
            message: e.to_string(),
        })?;
    let mut member = |name: &str| -> Result<Vec<u8>, KerasFileError> {
        let zip_error = |message: String| KerasFileError::Zip {
            file: path.to_path_buf(),
            message,
        };
        let mut entry = zip.by_name(name).map_err(|e| match e {
            zip::result::ZipError::FileNotFound => KerasFileError::NotKeras {
                file: path.to_path_buf(),
                what: format!("the zip has no `{name}`, so it is not a .keras file"),
            },
            e => zip_error(format!("{name}: {e}")),
        })?;
        let mut out = Vec::new();
        (&mut entry)
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| zip_error(format!("{name}: {e}")))?;
        Ok(out)
    };
    let text = |name: &str, bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|_| KerasFileError::NotKeras {
            file: path.to_path_buf(),
            what: format!("`{name}` is not UTF-8 text"),
        })
    };
    let config = parse_json(
        path,
        "config.json",
        &text("config.json", member("config.json")?)?,
    )?;
    let metadata = parse_json(
        path,
        "metadata.json",
        &text("metadata.json", member("metadata.json")?)?,
    )?;
    let h5 = Hdf5File::from_bytes(path.join("model.weights.h5"), member("model.weights.h5")?)?;
    if config.get("config").is_none() || config.get("class_name").is_none() {
        return Err(KerasFileError::NotKeras {
            file: path.to_path_buf(),
            what: "config.json has no `class_name` and `config`".into(),
        });
    }
    let weights = read_weights(&h5, &config)?;
    Ok(KerasFile {
        format: KerasFormat::KerasV3Zip,
        keras_version: metadata
            .get("keras_version")
            .and_then(Value::as_str)
            .map(str::to_string),
        compile_config: config
            .get("compile_config")
            .filter(|c| !c.is_null())
            .cloned(),
        model_config: config,
        weights,
    })
}

fn read_weights(
    h5: &Hdf5File,
    config: &Value,
) -> Result<BTreeMap<String, Vec<KerasArray>>, KerasFileError> {
    let mut out = BTreeMap::new();
    for layer in layer_paths(config) {
        let Some(Node::Group(vars)) = h5.get(&format!("{}/vars", layer.group))? else {
            continue;
        };
        // Keras 3 records the layer's name on its `vars` group; check the walk agrees.
        if let Some(name) = vars.attribute("name")? {
            let name = name.string()?;
            let own = layer.key.rsplit('/').next().unwrap_or("");
            if name != own {
                return Err(mismatch(h5.path(), &vars, &name, own));
            }
        }
        let arrays = read_vars(h5, &vars, layer.class_name, layer.config)?;
        if !arrays.is_empty() {
            out.insert(layer.key, arrays);
        }
    }
    Ok(out)
}

fn read_vars(
    h5: &Hdf5File,
    vars: &Group<'_>,
    class: &str,
    config: &Value,
) -> Result<Vec<KerasArray>, KerasFileError> {
    let count = vars.member_names()?.len();
    let names = weight_names(class, config).filter(|n| n.len() == count);
    let mut arrays = Vec::with_capacity(count);
    for i in 0..count {
        let Some(Node::Dataset(d)) = vars.member(&i.to_string())? else {
            return Err(KerasFileError::NotKeras {
                file: h5.path().to_path_buf(),
                what: format!("`{}` has no dataset `{i}`", vars.path()),
            });
        };
        let name = names
            .as_ref()
            .map_or_else(|| i.to_string(), |n| n[i].to_string());
        arrays.push(KerasArray {
            name,
            shape: d.shape.iter().map(|&s| s as usize).collect(),
            data: d.read_f32()?,
        });
    }
    Ok(arrays)
}

fn mismatch(file: &Path, vars: &Group<'_>, found: &str, expected: &str) -> KerasFileError {
    KerasFileError::NotKeras {
        file: PathBuf::from(file),
        what: format!(
            "`{}` holds the layer `{found}` where config.json's order puts `{expected}`",
            vars.path()
        ),
    }
}
