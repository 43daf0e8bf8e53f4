//! A Keras model ready to trace: its architecture, a built layer per class, its saved
//! weights; [`KerasModel::trace`] records the forward pass into a [`Graph`], creating each
//! layer's variables (named `LAYER/WEIGHT`, Keras's names) from the saved weights on its first
//! call, so shared layers share them.

use super::architecture::{self, Architecture, TensorRef};
use super::error::KerasError;
use super::layers::{self, Ctx, Layer, Weight, WeightSpec};
use super::weights::{SavedArray, SavedWeights};
use crate::model::{Graph, Initializer};
use serde_json::Value;
use std::collections::HashMap;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;

pub(crate) struct KerasModel {
    pub(crate) arch: Architecture,
    /// One per architecture layer; `None` for InputLayers.
    layers: Vec<Option<Box<dyn Layer>>>,
    pub(crate) weights: SavedWeights,
    /// Written by tf.keras 2.x rather than Keras 3.
    pub(crate) tf_keras: bool,
}

/// What one trace of the forward pass gives.
pub(crate) struct Traced {
    pub(crate) outputs: Vec<Tensor>,
    /// The sum of the weight penalties (`model.losses`), if any layer has one.
    pub(crate) regularization: Option<Tensor>,
    /// Per call: the layer index and its output's dimensions (for the summary).
    pub(crate) shapes: Vec<(usize, Vec<i64>)>,
    /// Per layer: its weights' specs (for the summary's parameter counts).
    pub(crate) specs: Vec<Vec<WeightSpec>>,
}

/// The element type of a Keras input dtype.
pub(crate) fn input_type(dtype: &str) -> Option<ElementType> {
    match dtype {
        "float32" => Some(ElementType::F32),
        "int32" | "int64" | "uint8" | "int8" | "int16" => Some(ElementType::S32),
        _ => None,
    }
}

impl KerasModel {
    /// Parses the architecture and every layer's options (all unsupported layers and options
    /// are found here, before anything is traced).
    pub(crate) fn new(
        model_config: &Value,
        weights: SavedWeights,
        keras_version: Option<&str>,
    ) -> Result<KerasModel, KerasError> {
        let arch = architecture::parse(model_config)?;
        let mut layers = Vec::new();
        for l in &arch.layers {
            layers.push(match l.class.as_str() {
                "InputLayer" => None,
                _ => Some(layers::from_config(l)?),
            });
        }
        for i in &arch.inputs {
            if input_type(&i.dtype).is_none() {
                return Err(KerasError::UnsupportedOption {
                    layer: i.name.clone(),
                    class: "InputLayer".into(),
                    option: "dtype".into(),
                    value: i.dtype.clone(),
                    why: "inputs are float32 or integers".into(),
                });
            }
        }
        let tf_keras = keras_version.is_some_and(|v| v.starts_with("2."));
        Ok(KerasModel {
            arch,
            layers,
            weights,
            tf_keras,
        })
    }

    /// The forward pass on `inputs` (in the model's input order).
    pub(crate) fn trace(
        &self,
        g: &mut Graph,
        inputs: &[Tensor],
        training: bool,
    ) -> Result<Traced, KerasError> {
        let mut values: HashMap<(String, usize), Tensor> = HashMap::new();
        for (spec, t) in self.arch.inputs.iter().zip(inputs) {
            values.insert((spec.name.clone(), 0), t.clone());
        }
        let mut made: Vec<Option<Vec<Weight>>> = vec![None; self.arch.layers.len()];
        let mut specs: Vec<Vec<WeightSpec>> = vec![Vec::new(); self.arch.layers.len()];
        let mut shapes = Vec::new();
        for call in &self.arch.calls {
            let cfg = &self.arch.layers[call.layer];
            let layer = self.layers[call.layer].as_ref().ok_or_else(|| {
                KerasError::Config(format!("InputLayer `{}` is called", cfg.name))
            })?;
            let args = call
                .inputs
                .iter()
                .map(|r| lookup(&values, r))
                .collect::<Result<Vec<Tensor>, KerasError>>()?;
            let fail = |message: String| {
                KerasError::Build(format!("layer `{}` ({}): {message}", cfg.name, cfg.class))
            };
            if made[call.layer].is_none() {
                let dims = args
                    .iter()
                    .map(|a| {
                        a.dims()
                            .iter()
                            .map(|d| d.fixed())
                            .collect::<Option<Vec<i64>>>()
                            .ok_or_else(|| fail("its input has an unknown dimension".into()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let s = layer.weights(&dims).map_err(fail)?;
                let trainable = cfg
                    .config
                    .get("trainable")
                    .and_then(Value::as_bool)
                    .unwrap_or(true);
                made[call.layer] = Some(self.create_weights(g, &cfg.name, &s, trainable)?);
                specs[call.layer] = s;
            }
            let weights = made[call.layer].clone().unwrap_or_default();
            g.tracer.push_scope(&cfg.name);
            let mut cx = Ctx {
                g,
                training,
                weights: &weights,
                tf_keras: self.tf_keras,
            };
            let y = layer.call(&mut cx, &args);
            g.tracer.pop_scope();
            let y = y.map_err(fail)?;
            if !y.is_ok() {
                let why = g
                    .tracer
                    .issues()
                    .last()
                    .map(|i| i.message.clone())
                    .unwrap_or_else(|| "the trace failed".into());
                return Err(fail(why));
            }
            shapes.push((
                call.layer,
                y.dims().iter().map(|d| d.fixed().unwrap_or(-1)).collect(),
            ));
            values.insert((cfg.name.clone(), call.node), y);
        }
        let outputs = self
            .arch
            .outputs
            .iter()
            .map(|r| lookup(&values, r))
            .collect::<Result<Vec<_>, _>>()?;
        let mut regularization: Option<Tensor> = None;
        for (i, layer) in self.layers.iter().enumerate() {
            let (Some(layer), Some(weights)) = (layer, &made[i]) else {
                continue;
            };
            for (w, r) in layer.regularizers() {
                let p = r.penalty(&weights[w].tensor);
                regularization = Some(match regularization {
                    Some(total) => total + p,
                    None => p,
                });
            }
        }
        Ok(Traced {
            outputs,
            regularization,
            shapes,
            specs,
        })
    }

    /// The layer's variables, valued from its saved weights.
    fn create_weights(
        &self,
        g: &mut Graph,
        layer: &str,
        specs: &[WeightSpec],
        trainable: bool,
    ) -> Result<Vec<Weight>, KerasError> {
        if specs.is_empty() {
            return Ok(Vec::new());
        }
        let err = |message: String| KerasError::Weights {
            layer: layer.to_string(),
            message,
        };
        let saved: &[SavedArray] = self.weights.get(layer).map(Vec::as_slice).unwrap_or(&[]);
        if saved.len() != specs.len() {
            let want: Vec<&str> = specs.iter().map(|s| s.name).collect();
            return Err(err(format!(
                "the file has {} weight(s) for it, the layer needs {} ({})",
                saved.len(),
                specs.len(),
                want.join(", ")
            )));
        }
        let mut out = Vec::new();
        for (spec, array) in specs.iter().zip(saved) {
            let dims: Vec<i64> = array.shape.iter().map(|&d| d as i64).collect();
            if dims != spec.dims {
                return Err(err(format!(
                    "weight `{}` has shape {:?} in the file, the layer needs {:?} for `{}`",
                    array.name, dims, spec.dims, spec.name
                )));
            }
            if array.data.len() != array.shape.iter().product::<usize>() {
                return Err(err(format!(
                    "weight `{}` has {} values for shape {:?}",
                    array.name,
                    array.data.len(),
                    array.shape
                )));
            }
            // Keras's own weight name (the last part of a saved path, without `:0`), so a
            // checkpoint reads as the Keras model's weights.
            let saved_name = array
                .name
                .rsplit('/')
                .next()
                .unwrap_or("")
                .split(':')
                .next()
                .unwrap_or("");
            let name = format!(
                "{layer}/{}",
                if saved_name.is_empty() {
                    spec.name
                } else {
                    saved_name
                }
            );
            if g.variables.find(&name).is_some() {
                return Err(err(format!(
                    "variable `{name}` exists twice (two layers of one name)"
                )));
            }
            let value = Array::new(
                ArrayShape::new(ElementType::F32, &dims),
                ArrayData::F32(array.data.clone()),
            );
            let id = g.variables.push(
                &mut g.tracer,
                &name,
                &dims,
                ElementType::F32,
                Initializer::Value(value),
                spec.trainable && trainable,
            );
            out.push(Weight {
                tensor: g.variables.get(id).tensor.clone(),
                id,
            });
        }
        Ok(out)
    }
}

fn lookup(values: &HashMap<(String, usize), Tensor>, r: &TensorRef) -> Result<Tensor, KerasError> {
    if r.index != 0 {
        return Err(KerasError::Config(format!(
            "tensor {} of layer `{}`: layers with several outputs are not supported",
            r.index, r.layer
        )));
    }
    values
        .get(&(r.layer.clone(), r.node))
        .cloned()
        .ok_or_else(|| {
            KerasError::Config(format!(
                "no tensor made by call {} of layer `{}`",
                r.node, r.layer
            ))
        })
}
