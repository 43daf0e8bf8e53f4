//! A tf.keras 2.x SavedModel directory: `keras_metadata.pb` (one JSON document per Keras
//! object: the root's has the model's config and `training_config`) and the checkpoint in
//! `variables/`, read by the TF bundle reader. The checkpoint's object graph
//! (`_CHECKPOINTABLE_OBJECT_GRAPH`) links each Keras layer's node to its variables' keys: a
//! layer's own variables are keyed `layer_with_weights-N/kernel/...`, but those of a nested
//! model's layers are keyed by the root's `variables/K/...`, so the keys alone do not say
//! which layer a variable belongs to.

use super::saved_model_proto::{SavedMetadata, TrackableObjectGraph};
use super::weight_names::{weight_names, Naming};
use super::{parse_json, KerasArray, KerasFile, KerasFileError, KerasFormat};
use crate::checkpoint::tf_bundle::TfBundle;
use prost::Message;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub(crate) fn read(dir: &Path) -> Result<KerasFile, KerasFileError> {
    let meta_path = dir.join("keras_metadata.pb");
    if !meta_path.is_file() {
        return Err(KerasFileError::NotKeras {
            file: dir.to_path_buf(),
            what: "is a directory without keras_metadata.pb: not a SavedModel written by tf.keras"
                .into(),
        });
    }
    let bytes = std::fs::read(&meta_path).map_err(|source| KerasFileError::Io {
        file: meta_path.clone(),
        source,
    })?;
    let corrupt = |expected: &str| KerasFileError::Corrupt {
        file: meta_path.clone(),
        offset: 0,
        expected: expected.to_string(),
    };
    let meta = SavedMetadata::decode(bytes.as_slice())
        .map_err(|e| corrupt(&format!("a Keras SavedMetadata protobuf ({e})")))?;
    // path -> (node id, metadata JSON)
    let mut nodes: BTreeMap<String, (i32, Value)> = BTreeMap::new();
    for node in &meta.nodes {
        let what = format!("the metadata of `{}`", node.node_path);
        let value = parse_json(&meta_path, &what, &node.metadata)?;
        nodes.insert(node.node_path.clone(), (node.node_id, value));
    }
    let Some((_, root)) = nodes.get("root") else {
        return Err(corrupt("a `root` node in keras_metadata.pb"));
    };
    let model_config = untuple(json!({
        "class_name": root.get("class_name").cloned().unwrap_or(Value::Null),
        "config": root.get("config").cloned().unwrap_or(Value::Null),
    }));
    if !model_config["config"].is_object() {
        return Err(KerasFileError::NotKeras {
            file: meta_path,
            what: "the root object has no config (a subclassed model, which tessel cannot rebuild)"
                .into(),
        });
    }
    let compile_config = root
        .get("training_config")
        .filter(|c| !c.is_null())
        .cloned()
        .map(untuple);
    let keras_version = root
        .get("keras_version")
        .and_then(Value::as_str)
        .map(str::to_string);
    let weights = read_weights(dir, &meta, &nodes)?;
    Ok(KerasFile {
        format: KerasFormat::SavedModel,
        keras_version,
        model_config,
        compile_config,
        weights,
    })
}

/// The metadata's JSON spells a tuple `{"class_name": "__tuple__", "items": [...]}` where
/// `.keras` and `.h5` files write a list (Keras's own decoder turns it back into a tuple):
/// every such object becomes its list, so the builder reads one spelling.
fn untuple(value: Value) -> Value {
    match value {
        Value::Object(mut map) => {
            if map.get("class_name").and_then(Value::as_str) == Some("__tuple__") {
                if let Some(Value::Array(items)) = map.remove("items") {
                    return Value::Array(items.into_iter().map(untuple).collect());
                }
            }
            Value::Object(map.into_iter().map(|(k, v)| (k, untuple(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(untuple).collect()),
        other => other,
    }
}

fn read_weights(
    dir: &Path,
    meta: &SavedMetadata,
    nodes: &BTreeMap<String, (i32, Value)>,
) -> Result<BTreeMap<String, Vec<KerasArray>>, KerasFileError> {
    let bundle = TfBundle::open(dir.join("variables").join("variables"))?;
    let graph_bytes = bundle.read_scalar_string("_CHECKPOINTABLE_OBJECT_GRAPH")?;
    let graph = TrackableObjectGraph::decode(graph_bytes.as_slice()).map_err(|e| {
        KerasFileError::Corrupt {
            file: dir.join("variables"),
            offset: 0,
            expected: format!("a TrackableObjectGraph in _CHECKPOINTABLE_OBJECT_GRAPH ({e})"),
        }
    })?;
    let name_of: HashMap<&str, &str> = nodes
        .iter()
        .filter_map(|(path, (_, v))| Some((path.as_str(), v.get("name")?.as_str()?)))
        .collect();
    let mut out = BTreeMap::new();
    for node in &meta.nodes {
        if !node.identifier.starts_with("_tf_keras_") || node.identifier.contains("metric") {
            continue;
        }
        let Some(object) = usize::try_from(node.node_id)
            .ok()
            .and_then(|id| graph.nodes.get(id))
        else {
            return Err(KerasFileError::Corrupt {
                file: dir.join("keras_metadata.pb"),
                offset: 0,
                expected: format!(
                    "the object graph node {} of `{}`",
                    node.node_id, node.node_path
                ),
            });
        };
        // The layer's variables: its children whose node holds a variable's value.
        let mut vars: Vec<(&str, &str)> = object
            .children
            .iter()
            .filter_map(|child| {
                let child_node = graph.nodes.get(usize::try_from(child.node_id).ok()?)?;
                let key = child_node
                    .attributes
                    .iter()
                    .find(|a| a.name == "VARIABLE_VALUE")?;
                Some((child.local_name.as_str(), key.checkpoint_key.as_str()))
            })
            .collect();
        if vars.is_empty() || node.node_path == "root" {
            continue;
        }
        let (_, value) = &nodes[&node.node_path];
        let class = value
            .get("class_name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let config = value.get("config").unwrap_or(&Value::Null);
        // The names are the checkpoint's; the table only orders them.
        let order = weight_names(class, config, Naming::TfKeras).unwrap_or_default();
        vars.sort_by_key(|(name, _)| order.iter().position(|n| n == name).unwrap_or(usize::MAX));
        let mut arrays = Vec::with_capacity(vars.len());
        for (name, key) in vars {
            let array = bundle.read(key)?;
            let shape = array.shape.dims.iter().map(|&d| d as usize).collect();
            let data = (0..array.data.len())
                .map(|i| array.data.get_f64(i) as f32)
                .collect();
            arrays.push(KerasArray {
                name: name.to_string(),
                shape,
                data,
            });
        }
        out.insert(layer_key(&node.node_path, &name_of), arrays);
    }
    Ok(out)
}

/// `root.layer_with_weights-2.layer_with_weights-0` → `inner/inner_d`: the names of the
/// node and of its ancestors below the root.
fn layer_key(path: &str, name_of: &HashMap<&str, &str>) -> String {
    let mut names = Vec::new();
    let mut prefix = String::from("root");
    for part in path.split('.').skip(1) {
        prefix.push('.');
        prefix.push_str(part);
        names.push(name_of.get(prefix.as_str()).copied().unwrap_or(part));
    }
    names.join("/")
}
