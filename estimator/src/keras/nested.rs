//! A model used as a layer of another (a Sequential inside a Functional, a Functional called
//! as a layer) is inlined: its layers become layers of the outer model named `outer/inner`
//! (the key the weight files give them, and their variables' scope), and each call of it
//! becomes calls of its layers on the call's tensors. Every call of the nested model reuses
//! the same layers, so its weights are shared between calls as in Keras.

use super::architecture::{is_model_class, parse, Architecture, Call, LayerConfig, TensorRef};
use super::error::KerasError;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Where an outer layer went: a layer of the new list, or a model whose layers were inlined.
enum Placed {
    Layer(usize),
    Model {
        inner: Architecture,
        /// Per layer of `inner`: its index in the new list (`None` for its InputLayers).
        index: Vec<Option<usize>>,
        /// The node numbers of one call of the model: call `n` of the model numbers its
        /// layers' calls from `n * stride`.
        stride: usize,
    },
}

/// `arch` with every nested model inlined (nested models inside those are inlined by the
/// recursive parse).
pub(crate) fn inline_nested_models(arch: Architecture) -> Result<Architecture, KerasError> {
    if !arch.layers.iter().any(|l| is_model_class(&l.class)) {
        return Ok(arch);
    }
    let mut layers = Vec::new();
    let mut placed = Vec::new();
    for l in &arch.layers {
        if !is_model_class(&l.class) {
            placed.push(Placed::Layer(layers.len()));
            layers.push(l.clone());
            continue;
        }
        let inner = parse(&inner_config(l))?;
        // A frozen nested model freezes its layers (Keras's `trainable` is recursive).
        let frozen = l.config.get("trainable") == Some(&Value::Bool(false));
        let mut index = Vec::new();
        for il in &inner.layers {
            if il.class == "InputLayer" {
                index.push(None);
                continue;
            }
            let mut config = il.config.clone();
            if frozen {
                config.insert("trainable".into(), Value::Bool(false));
            }
            index.push(Some(layers.len()));
            layers.push(LayerConfig {
                name: format!("{}/{}", l.name, il.name),
                class: il.class.clone(),
                config,
            });
        }
        let stride = inner.calls.iter().map(|c| c.node + 1).max().unwrap_or(1);
        placed.push(Placed::Model {
            inner,
            index,
            stride,
        });
    }
    // The tensors the nested models make, by the outer model's reference to them.
    let mut made: HashMap<TensorRef, TensorRef> = HashMap::new();
    let resolve = |t: &TensorRef, made: &HashMap<TensorRef, TensorRef>| {
        made.get(t).cloned().unwrap_or_else(|| t.clone())
    };
    let mut calls = Vec::new();
    for call in &arch.calls {
        let outer = &arch.layers[call.layer];
        let args: Vec<TensorRef> = call.inputs.iter().map(|t| resolve(t, &made)).collect();
        let (inner, index, stride) = match &placed[call.layer] {
            Placed::Layer(i) => {
                calls.push(Call {
                    layer: *i,
                    node: call.node,
                    inputs: args,
                });
                continue;
            }
            Placed::Model {
                inner,
                index,
                stride,
            } => (inner, index, *stride),
        };
        if args.len() != inner.inputs.len() {
            return Err(KerasError::Config(format!(
                "nested model `{}` takes {} input(s), call {} of it gives {}",
                outer.name,
                inner.inputs.len(),
                call.node,
                args.len()
            )));
        }
        let rename = |t: &TensorRef| match inner.inputs.iter().position(|i| i.name == t.layer) {
            Some(k) => args[k].clone(),
            None => TensorRef {
                layer: format!("{}/{}", outer.name, t.layer),
                node: call.node * stride + t.node,
                index: t.index,
            },
        };
        for c in &inner.calls {
            let layer = index[c.layer].ok_or_else(|| {
                KerasError::Config(format!(
                    "nested model `{}`: its InputLayer `{}` is called",
                    outer.name, inner.layers[c.layer].name
                ))
            })?;
            calls.push(Call {
                layer,
                node: call.node * stride + c.node,
                inputs: c.inputs.iter().map(rename).collect(),
            });
        }
        for (k, o) in inner.outputs.iter().enumerate() {
            let outer_ref = TensorRef {
                layer: outer.name.clone(),
                node: call.node,
                index: k,
            };
            made.insert(outer_ref, rename(o));
        }
    }
    let outputs = arch.outputs.iter().map(|t| resolve(t, &made)).collect();
    Ok(Architecture {
        name: arch.name,
        layers,
        inputs: arch.inputs,
        calls,
        outputs,
        output_layers: arch.output_layers,
    })
}

/// The nested model's own `{"class_name", "config"}`. A Sequential that was built by being
/// called (no InputLayer, no input shape on its first layer) gets an InputLayer of unknown
/// shape: the outer model's tensor gives the shape.
fn inner_config(l: &LayerConfig) -> Value {
    let mut config = l.config.clone();
    if l.class == "Sequential" {
        if let Some(Value::Array(layers)) = config.get_mut("layers") {
            let first_is_input = layers.first().is_some_and(|f| {
                f["class_name"] == "InputLayer"
                    || f["config"].get("batch_input_shape").is_some()
                    || f["config"].get("batch_shape").is_some()
            });
            if !first_is_input {
                let shape = l
                    .config
                    .get("build_input_shape")
                    .cloned()
                    .unwrap_or_else(|| json!([null]));
                layers.insert(
                    0,
                    json!({"class_name": "InputLayer",
                           "config": {"name": format!("{}_input", l.name), "batch_shape": shape}}),
                );
            }
        }
    }
    json!({"class_name": l.class, "config": config})
}
