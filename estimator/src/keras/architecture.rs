//! The saved architecture (`model.to_json()`'s `{"class_name", "config"}`) as one form for
//! Sequential and Functional models, from tf.keras 2.x and Keras 3 alike: the layers, and
//! each call of a layer ("node") with the tensors it takes.

use super::error::KerasError;
use super::nested::inline_nested_models;
use super::options::dtype_name;
use serde_json::{Map, Value};

/// A tensor of the model: output `index` of call `node` of layer `layer`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct TensorRef {
    pub(crate) layer: String,
    pub(crate) node: usize,
    pub(crate) index: usize,
}

/// One model input (an `InputLayer`).
#[derive(Clone, Debug)]
pub(crate) struct InputSpec {
    pub(crate) name: String,
    /// Dimensions after the batch; `None` for an unknown one.
    pub(crate) shape: Vec<Option<i64>>,
    pub(crate) dtype: String,
}

/// One layer: its name, class and `config` object.
#[derive(Clone, Debug)]
pub(crate) struct LayerConfig {
    pub(crate) name: String,
    pub(crate) class: String,
    pub(crate) config: Map<String, Value>,
}

/// One call of a layer on model tensors.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub(crate) layer: usize,
    /// Which call of the layer this is (its node index).
    pub(crate) node: usize,
    pub(crate) inputs: Vec<TensorRef>,
}

#[derive(Clone, Debug)]
pub(crate) struct Architecture {
    pub(crate) name: String,
    pub(crate) layers: Vec<LayerConfig>,
    pub(crate) inputs: Vec<InputSpec>,
    /// Every call, in an order where each call's inputs come before it.
    pub(crate) calls: Vec<Call>,
    pub(crate) outputs: Vec<TensorRef>,
    /// The output names: the layers of this model's config that make them (Keras's
    /// `output_names`; a nested model's name when it makes one, though its layers are inlined).
    pub(crate) output_layers: Vec<String>,
}

impl Architecture {
    /// The model's output names (Keras's `output_names`).
    pub(crate) fn output_names(&self) -> Vec<String> {
        self.output_layers.clone()
    }
}

fn bad(message: impl Into<String>) -> KerasError {
    KerasError::Config(message.into())
}

/// Reads `{"class_name": "Sequential" | "Functional" | "Model", "config": {...}}`.
pub(crate) fn parse(model_config: &Value) -> Result<Architecture, KerasError> {
    let class = model_config
        .get("class_name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no `class_name` at the top"))?;
    let config = model_config
        .get("config")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("no `config` object at the top"))?;
    let name = config
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("model")
        .to_string();
    let layers_json = config
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("the model config has no `layers` list"))?;
    let mut layers = Vec::new();
    for l in layers_json {
        layers.push(layer_config(l)?);
    }
    let arch = match class {
        "Sequential" => sequential(name, layers)?,
        "Functional" | "Model" => functional(name, layers, layers_json, config)?,
        other => {
            return Err(KerasError::UnsupportedLayer {
                layer: name,
                class: format!(
                    "{other} (a subclassed model, whose architecture Keras does not save)"
                ),
            })
        }
    };
    inline_nested_models(arch)
}

/// Whether a layer's class is a model (a model used as a layer of another).
pub(crate) fn is_model_class(class: &str) -> bool {
    matches!(class, "Sequential" | "Functional" | "Model")
}

fn layer_config(l: &Value) -> Result<LayerConfig, KerasError> {
    let class = l
        .get("class_name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("a layer without `class_name`: {l}")))?;
    let config = l
        .get("config")
        .and_then(Value::as_object)
        .ok_or_else(|| bad(format!("layer of class {class} has no `config` object")))?;
    let name = config
        .get("name")
        .or_else(|| l.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("a {class} layer without a name")))?;
    Ok(LayerConfig {
        name: name.to_string(),
        class: class.to_string(),
        config: config.clone(),
    })
}

/// An `InputLayer`'s input: `batch_shape` (Keras 3) or `batch_input_shape` (tf.keras).
fn input_spec(layer: &LayerConfig) -> Result<InputSpec, KerasError> {
    let shape = layer
        .config
        .get("batch_shape")
        .or_else(|| layer.config.get("batch_input_shape"))
        .and_then(Value::as_array)
        .ok_or_else(|| bad(format!("input `{}` has no batch shape", layer.name)))?;
    if shape.is_empty() {
        return Err(bad(format!(
            "input `{}` has an empty batch shape",
            layer.name
        )));
    }
    let dims = shape[1..]
        .iter()
        .map(|d| match d {
            Value::Null => Ok(None),
            v => v.as_i64().map(Some).ok_or_else(|| {
                bad(format!(
                    "input `{}`: dimension {v} is not an integer",
                    layer.name
                ))
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let dtype = layer
        .config
        .get("dtype")
        .and_then(dtype_name)
        .unwrap_or_else(|| "float32".to_string());
    Ok(InputSpec {
        name: layer.name.clone(),
        shape: dims,
        dtype,
    })
}

/// A first layer's `batch_input_shape` (tf.keras Sequential without an InputLayer).
fn implicit_input(first: &LayerConfig) -> Result<LayerConfig, KerasError> {
    let Some(shape) = first
        .config
        .get("batch_input_shape")
        .or_else(|| first.config.get("batch_shape"))
    else {
        return Err(bad("the Sequential model has no InputLayer and its first layer no input shape (the model was never built)"));
    };
    let mut config = Map::new();
    config.insert("batch_input_shape".into(), shape.clone());
    if let Some(d) = first.config.get("dtype") {
        config.insert("dtype".into(), d.clone());
    }
    let name = format!("{}_input", first.name);
    config.insert("name".into(), Value::from(name.clone()));
    Ok(LayerConfig {
        name,
        class: "InputLayer".into(),
        config,
    })
}

fn sequential(name: String, mut layers: Vec<LayerConfig>) -> Result<Architecture, KerasError> {
    if layers.is_empty() {
        return Err(bad("the Sequential model has no layers"));
    }
    if layers[0].class != "InputLayer" {
        let input = implicit_input(&layers[0])?;
        // The first layer's batch_input_shape becomes the InputLayer's.
        layers[0].config.remove("batch_input_shape");
        layers[0].config.remove("batch_shape");
        layers.insert(0, input);
    }
    let inputs = vec![input_spec(&layers[0])?];
    let mut calls = Vec::new();
    let mut last = TensorRef {
        layer: layers[0].name.clone(),
        node: 0,
        index: 0,
    };
    for (i, l) in layers.iter().enumerate().skip(1) {
        if l.class == "InputLayer" {
            return Err(bad(format!(
                "InputLayer `{}` in the middle of a Sequential model",
                l.name
            )));
        }
        calls.push(Call {
            layer: i,
            node: 0,
            inputs: vec![last.clone()],
        });
        last = TensorRef {
            layer: l.name.clone(),
            node: 0,
            index: 0,
        };
    }
    Ok(Architecture {
        name,
        layers,
        inputs,
        calls,
        output_layers: vec![last.layer.clone()],
        outputs: vec![last],
    })
}

/// `[name, node, index]` (both formats' `input_layers` / `output_layers` entries).
fn tensor_triple(v: &Value) -> Result<TensorRef, KerasError> {
    let a = v.as_array().filter(|a| a.len() >= 3).ok_or_else(|| {
        bad(format!(
            "a tensor reference should be [layer, node, index], got {v}"
        ))
    })?;
    let layer = a[0].as_str().ok_or_else(|| {
        bad(format!(
            "a tensor reference's layer should be a name, got {v}"
        ))
    })?;
    let num = |x: &Value| {
        x.as_u64().map(|n| n as usize).ok_or_else(|| {
            bad(format!(
                "a tensor reference's node and index should be integers, got {v}"
            ))
        })
    };
    Ok(TensorRef {
        layer: layer.to_string(),
        node: num(&a[1])?,
        index: num(&a[2])?,
    })
}

/// `input_layers` is a list of triples, or one triple for a single input (Keras 3).
fn triples(v: Option<&Value>, what: &str) -> Result<Vec<TensorRef>, KerasError> {
    let v = v.ok_or_else(|| bad(format!("the Functional model has no `{what}`")))?;
    match v.as_array() {
        Some(a) if a.first().is_some_and(Value::is_string) => Ok(vec![tensor_triple(v)?]),
        Some(a) => a.iter().map(tensor_triple).collect(),
        None => Err(bad(format!("`{what}` should be a list, got {v}"))),
    }
}

/// The tensors one call takes. tf.keras: `[[layer, node, index, kwargs], ...]`; Keras 3:
/// `{"args": [...], "kwargs": {...}}` whose args hold `__keras_tensor__` objects (or lists of
/// them for merge layers).
fn call_inputs(layer: &str, node: &Value) -> Result<Vec<TensorRef>, KerasError> {
    if let Some(args) = node.get("args") {
        if let Some(kwargs) = node.get("kwargs").and_then(Value::as_object) {
            if let Some((k, _)) = kwargs
                .iter()
                .find(|(k, v)| !v.is_null() && k.as_str() != "mask")
            {
                return Err(KerasError::UnsupportedOption {
                    layer: layer.to_string(),
                    class: "call".into(),
                    option: k.clone(),
                    value: kwargs[k].to_string(),
                    why: "call arguments other than tensors are not supported".into(),
                });
            }
        }
        let mut out = Vec::new();
        collect_keras_tensors(args, &mut out)?;
        return Ok(out);
    }
    let entries = node.as_array().ok_or_else(|| {
        bad(format!(
            "layer `{layer}`: an inbound node should be a list, got {node}"
        ))
    })?;
    entries.iter().map(tensor_triple).collect()
}

fn collect_keras_tensors(v: &Value, out: &mut Vec<TensorRef>) -> Result<(), KerasError> {
    match v {
        Value::Array(items) => items.iter().try_for_each(|i| collect_keras_tensors(i, out)),
        Value::Object(o)
            if o.get("class_name").and_then(Value::as_str) == Some("__keras_tensor__") =>
        {
            let history = o
                .get("config")
                .and_then(|c| c.get("keras_history"))
                .ok_or_else(|| bad(format!("a keras tensor without keras_history: {v}")))?;
            out.push(tensor_triple(history)?);
            Ok(())
        }
        // Constants passed as call arguments are not model tensors.
        other => Err(bad(format!(
            "a call argument that is not a tensor: {other}"
        ))),
    }
}

/// tf.keras numbers the calls of a nested model that starts with an InputLayer from 1 (its
/// node 0 links its own inputs to its outputs and is left out of the config: tf.keras's
/// `_should_skip_first_node`); Keras 3 (whose inbound nodes are `{"args", "kwargs"}` objects)
/// numbers them from 0.
fn skips_first_node(layer: &LayerConfig, inbound_nodes: &[Value]) -> bool {
    let tf_keras_nodes = inbound_nodes.first().is_some_and(Value::is_array);
    let starts_with_input = layer
        .config
        .get("layers")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .is_some_and(|l| l.get("class_name").and_then(Value::as_str) == Some("InputLayer"));
    is_model_class(&layer.class) && tf_keras_nodes && starts_with_input
}

fn functional(
    name: String,
    layers: Vec<LayerConfig>,
    layers_json: &[Value],
    config: &Map<String, Value>,
) -> Result<Architecture, KerasError> {
    let input_refs = triples(config.get("input_layers"), "input_layers")?;
    let outputs = triples(config.get("output_layers"), "output_layers")?;
    let mut inputs = Vec::new();
    for r in &input_refs {
        let l = layers
            .iter()
            .find(|l| l.name == r.layer && l.class == "InputLayer")
            .ok_or_else(|| {
                bad(format!(
                    "input `{}` is not an InputLayer of the model",
                    r.layer
                ))
            })?;
        inputs.push(input_spec(l)?);
    }
    // Every call, then ordered so that each comes after the calls that make its inputs.
    let mut pending: Vec<(usize, usize, Vec<TensorRef>)> = Vec::new();
    for (i, (l, json)) in layers.iter().zip(layers_json).enumerate() {
        if l.class == "InputLayer" {
            continue;
        }
        let nodes = json
            .get("inbound_nodes")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("layer `{}` has no inbound_nodes", l.name)))?;
        let first = usize::from(skips_first_node(l, nodes));
        for (n, node) in nodes.iter().enumerate() {
            pending.push((i, first + n, call_inputs(&l.name, node)?));
        }
    }
    let mut made: std::collections::BTreeSet<(String, usize)> =
        inputs.iter().map(|i| (i.name.clone(), 0)).collect();
    let mut calls = Vec::new();
    while !pending.is_empty() {
        let before = pending.len();
        let mut rest = Vec::new();
        for (layer, node, ins) in pending {
            if ins
                .iter()
                .all(|t| made.contains(&(t.layer.clone(), t.node)))
            {
                made.insert((layers[layer].name.clone(), node));
                // Calls of one layer are numbered in the order Keras made them.
                calls.push(Call {
                    layer,
                    node,
                    inputs: ins,
                });
            } else {
                rest.push((layer, node, ins));
            }
        }
        pending = rest;
        if pending.len() == before {
            let names: Vec<&str> = pending
                .iter()
                .map(|(l, _, _)| layers[*l].name.as_str())
                .collect();
            return Err(bad(format!(
                "layers {names:?} take tensors no layer makes (a cycle or a missing layer)"
            )));
        }
    }
    for o in &outputs {
        if !made.contains(&(o.layer.clone(), o.node)) {
            return Err(bad(format!(
                "output `{}` is made by no layer call",
                o.layer
            )));
        }
    }
    Ok(Architecture {
        name,
        layers,
        inputs,
        calls,
        output_layers: outputs.iter().map(|t| t.layer.clone()).collect(),
        outputs,
    })
}
