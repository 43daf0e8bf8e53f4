//! Walking a model config's layers (nested models included) the way Keras's `.keras` saver
//! walks them, to know which layer each `layers/<key>` group of `model.weights.h5` is.

use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;

/// A layer of the config, with the path of its group in `model.weights.h5`.
pub(crate) struct LayerPath<'c> {
    /// `layers/dense_1`, `layers/sequential/layers/dense`, ...
    pub(crate) group: String,
    /// The weights' key: the layer's name, `outer/inner` in a nested model.
    pub(crate) key: String,
    pub(crate) class_name: &'c str,
    pub(crate) config: &'c Value,
}

/// Every layer of `model` (a `{"class_name", "config"}` value), depth first, in config order.
pub(crate) fn layer_paths(model: &Value) -> Vec<LayerPath<'_>> {
    let mut out = Vec::new();
    walk(model, "", "", &mut out);
    out
}

fn walk<'c>(model: &'c Value, group: &str, key: &str, out: &mut Vec<LayerPath<'c>>) {
    let Some(layers) = model
        .get("config")
        .and_then(|c| c.get("layers"))
        .and_then(Value::as_array)
    else {
        return;
    };
    // Keras names each child group by its class in snake case, numbered from the second one.
    let mut used: HashMap<String, usize> = HashMap::new();
    for layer in layers {
        let class_name = layer
            .get("class_name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let config = layer.get("config").unwrap_or(&Value::Null);
        let name = config
            .get("name")
            .or_else(|| layer.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut child = to_snake_case(class_name);
        match used.get_mut(&child) {
            Some(n) => {
                *n += 1;
                child = format!("{child}_{n}");
            }
            None => {
                used.insert(child.clone(), 0);
            }
        }
        let group = format!("{group}layers/{child}");
        let key = format!("{key}{name}");
        out.push(LayerPath {
            group: group.clone(),
            key: key.clone(),
            class_name,
            config,
        });
        walk(layer, &format!("{group}/"), &format!("{key}/"), out);
    }
}

/// Keras's `to_snake_case`: `BatchNormalization` → `batch_normalization`, `Conv2D` → `conv2d`,
/// `ReLU` → `re_lu`.
pub(crate) fn to_snake_case(name: &str) -> String {
    static WORD: OnceLock<Regex> = OnceLock::new();
    static CAMEL: OnceLock<Regex> = OnceLock::new();
    let word = WORD.get_or_init(|| Regex::new("(.)([A-Z][a-z0-9]+)").expect("a valid regex"));
    let camel = CAMEL.get_or_init(|| Regex::new("([a-z])([A-Z])").expect("a valid regex"));
    let once = word.replace_all(name, "${1}_${2}");
    let out = camel.replace_all(&once, "${1}_${2}").to_lowercase();
    if out.starts_with('_') {
        format!("private{out}")
    } else {
        out
    }
}
