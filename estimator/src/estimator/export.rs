//! `export(export_dir_base, serving_input)`: the PREDICT module with the trained values, as
//! files any runtime can load (`exported_model.rs` loads and runs one: `tessel predict`).
//!
//! `<base>/<timestamp>/` holds `model.hlo` (the PREDICT module after the compiler's pipeline,
//! as canonical HLO text: XLA's parser and tessel's read it), `variables.safetensors` (the
//! checkpoint's values under their checkpoint names) and `signature.json` (every entry
//! parameter with its number, kind, name, shape and dtype; the outputs; the batch size). The
//! directory is written under a temporary name and renamed, so a reader never sees half an
//! export, and a failed export leaves nothing behind.
//!
//! The global step: the traced module's parameter 0 is the s32 global step (a model_fn may
//! read it). The export keeps it as a `variable` named `global_step`, saved with the
//! checkpoint's step in `variables.safetensors`, so the module runs unchanged anywhere.

use super::params::Params;
use super::spec::Features;
use super::tpu_estimator::TpuEstimator;
use super::variables_state::HostState;
use crate::checkpoint::Saver;
use crate::error::EstimatorError;
use crate::model::variables::Variable;
use crate::model::{Graph, Mode};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use tessel_compiler::hlo_text::{parse_module, print_module, PrintOptions};
use tessel_compiler::ir::{Array, ElementType, Module};
use tessel_runtime::host_io::write_safetensors;
use tessel_runtime::session::{optimize_for_device, SessionError};

/// TF's `serving_input_receiver_fn`, reduced to what it declares: each feature's name,
/// element type and per-example dims. The export takes them at `predict_batch_size`.
#[derive(Clone, Debug, Default)]
pub struct ServingInput {
    pub features: Vec<(String, ElementType, Vec<i64>)>,
}

impl ServingInput {
    pub fn new() -> ServingInput {
        ServingInput::default()
    }

    /// Adds a feature of `dims` per example.
    pub fn feature(mut self, name: &str, element_type: ElementType, dims: &[i64]) -> ServingInput {
        self.features
            .push((name.to_string(), element_type, dims.to_vec()));
        self
    }
}

/// The name the export gives the global-step parameter.
pub(crate) const GLOBAL_STEP: &str = "global_step";

/// One entry parameter of an export, as `signature.json` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureParameter {
    pub number: usize,
    /// `variable` (read from `variables.safetensors`) or `input` (a feature).
    pub kind: String,
    pub name: String,
    pub shape: Vec<i64>,
    pub dtype: ElementType,
}

/// One output of an export: a leaf of the root, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureOutput {
    pub index: usize,
    pub name: String,
    pub shape: Vec<i64>,
    pub dtype: ElementType,
}

/// `signature.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub batch_size: usize,
    pub parameters: Vec<SignatureParameter>,
    pub outputs: Vec<SignatureOutput>,
}

impl Signature {
    /// A fixed layout: keys in a fixed order, one parameter or output per line.
    pub(crate) fn to_json(&self) -> String {
        let q = |s: &str| Json::from(s).to_string();
        let dims = |d: &[i64]| {
            let parts: Vec<String> = d.iter().map(i64::to_string).collect();
            format!("[{}]", parts.join(", "))
        };
        let params: Vec<String> = self
            .parameters
            .iter()
            .map(|p| {
                format!(
                    "{{\"number\": {}, \"kind\": {}, \"name\": {}, \"shape\": {}, \"dtype\": {}}}",
                    p.number,
                    q(&p.kind),
                    q(&p.name),
                    dims(&p.shape),
                    q(p.dtype.name())
                )
            })
            .collect();
        let outputs: Vec<String> = self
            .outputs
            .iter()
            .map(|o| {
                format!(
                    "{{\"index\": {}, \"name\": {}, \"shape\": {}, \"dtype\": {}}}",
                    o.index,
                    q(&o.name),
                    dims(&o.shape),
                    q(o.dtype.name())
                )
            })
            .collect();
        format!(
            "{{\"batch_size\": {},\n \"parameters\": [{}],\n \"outputs\": [{}]}}\n",
            self.batch_size,
            params.join(&format!(",\n{}", " ".repeat(16))),
            outputs.join(&format!(",\n{}", " ".repeat(13)))
        )
    }

    pub fn from_json(text: &str) -> Result<Signature, String> {
        let v: Json = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let usize_of = |v: &Json, key: &str| {
            v[key]
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| format!("`{key}` is missing or not a number"))
        };
        let str_of = |v: &Json, key: &str| {
            v[key]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("`{key}` is missing or not a string"))
        };
        let shape_of = |v: &Json| -> Result<Vec<i64>, String> {
            v["shape"]
                .as_array()
                .ok_or("`shape` is missing")?
                .iter()
                .map(|d| {
                    d.as_i64()
                        .ok_or_else(|| "a dimension is not an integer".into())
                })
                .collect()
        };
        let dtype_of = |v: &Json| -> Result<ElementType, String> {
            let name = str_of(v, "dtype")?;
            ElementType::from_name(&name).ok_or_else(|| format!("unknown dtype `{name}`"))
        };
        let list = |key: &str| -> Result<Vec<Json>, String> {
            v[key]
                .as_array()
                .cloned()
                .ok_or_else(|| format!("`{key}` is missing or not a list"))
        };
        let parameters = list("parameters")?
            .iter()
            .map(|p| {
                let kind = str_of(p, "kind")?;
                if kind != "variable" && kind != "input" {
                    return Err(format!(
                        "parameter kind `{kind}` is neither variable nor input"
                    ));
                }
                Ok(SignatureParameter {
                    number: usize_of(p, "number")?,
                    kind,
                    name: str_of(p, "name")?,
                    shape: shape_of(p)?,
                    dtype: dtype_of(p)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let outputs = list("outputs")?
            .iter()
            .map(|o| {
                Ok(SignatureOutput {
                    index: usize_of(o, "index")?,
                    name: str_of(o, "name")?,
                    shape: shape_of(o)?,
                    dtype: dtype_of(o)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Signature {
            batch_size: usize_of(&v, "batch_size")?,
            parameters,
            outputs,
        })
    }
}

fn export_err(what: &str, e: impl std::fmt::Display) -> EstimatorError {
    EstimatorError::Export(format!("{what}: {e}"))
}

impl TpuEstimator {
    /// TF's `export_saved_model(export_dir_base, serving_input_receiver_fn)`: writes
    /// `<export_dir_base>/<timestamp>/` from the latest checkpoint and returns its path.
    pub fn export(
        &self,
        export_dir_base: impl AsRef<Path>,
        serving_input: &ServingInput,
    ) -> Result<PathBuf, EstimatorError> {
        let device = self.chief_device("export")?;
        let batch = self.predict_batch_size.ok_or_else(|| {
            EstimatorError::value("export needs predict_batch_size: the export has a static batch")
        })?;
        let saver = Saver::new(&self.model_dir, self.config.keep_checkpoint_max);
        if saver.latest_file()?.is_none() && self.warm_start.is_none() {
            return Err(EstimatorError::value(format!(
                "Couldn't find trained model at {}.",
                self.model_dir.display()
            )));
        }
        let (module, variables, outputs) = self.trace_export(batch, serving_input)?;
        // The latest checkpoint; with none, the warm-start path restored whole (a TF model).
        let state = HostState::restore_or_load(
            &variables,
            &saver,
            &self.config,
            self.warm_start.as_ref(),
            &mut super::log::Log::new(self.quiet),
        )?;
        // Through the session, as train and predict compile: the module is verified and must be
        // one the device runs (its legality rules) before it is optimized and written.
        let module = optimize_for_device(&module, &device).map_err(|e| match e {
            SessionError::NotLegal { rendered, .. } => {
                export_err("the PREDICT module cannot run on the device", rendered)
            }
            other => export_err("the PREDICT module", other),
        })?;
        let text = print_module(&module, &PrintOptions { canonical: true });
        // What is written must read back.
        parse_module(&text, Some("model.hlo"))
            .map_err(|e| export_err("the printed module does not parse back", e))?;

        let (param_shapes, root) = module.entry_signature();
        let mut parameters = Vec::new();
        let mut tensors = vec![(
            GLOBAL_STEP.to_string(),
            Array::scalar_s32(i32::try_from(state.global_step).unwrap_or(i32::MAX)),
        )];
        let n_inputs = serving_input.features.len();
        for (number, shape) in param_shapes.iter().enumerate() {
            let tessel_compiler::ir::Shape::Array(a) = shape else {
                return Err(export_err("parameter", "a tuple parameter"));
            };
            let (kind, name) = if number == 0 {
                ("variable", GLOBAL_STEP.to_string())
            } else if number <= n_inputs {
                ("input", serving_input.features[number - 1].0.clone())
            } else {
                ("variable", variables[number - 1 - n_inputs].name.clone())
            };
            parameters.push(SignatureParameter {
                number,
                kind: kind.into(),
                name,
                shape: a.dims.to_vec(),
                dtype: a.element_type,
            });
        }
        for (v, a) in variables.iter().zip(state.values) {
            tensors.push((v.name.clone(), a));
        }
        let leaves = root.leaves();
        if leaves.len() != outputs.len() {
            return Err(export_err(
                "outputs",
                format!("{} leaves for {} predictions", leaves.len(), outputs.len()),
            ));
        }
        let signature = Signature {
            batch_size: batch,
            parameters,
            outputs: leaves
                .iter()
                .zip(&outputs)
                .enumerate()
                .map(|(index, (s, name))| SignatureOutput {
                    index,
                    name: name.clone(),
                    shape: s.dims.to_vec(),
                    dtype: s.element_type,
                })
                .collect(),
        };
        write_export(export_dir_base.as_ref(), |dir| {
            std::fs::write(dir.join("model.hlo"), &text).map_err(|e| export_err("model.hlo", e))?;
            write_safetensors(dir.join("variables.safetensors"), &tensors)
                .map_err(|e| export_err("variables.safetensors", e))?;
            std::fs::write(dir.join("signature.json"), signature.to_json())
                .map_err(|e| export_err("signature.json", e))
        })
    }

    /// The model_fn traced in PREDICT at the export's batch on one replica; its root is the
    /// predictions only.
    fn trace_export(
        &self,
        batch: usize,
        serving_input: &ServingInput,
    ) -> Result<(Module, Vec<Variable>, Vec<String>), EstimatorError> {
        if serving_input.features.is_empty() {
            return Err(EstimatorError::value(
                "the serving input declares no features",
            ));
        }
        let mut g = Graph::new(
            "tpu_estimator_export",
            Mode::Predict,
            self.config.tf_random_seed,
        );
        let mut entries = Vec::new();
        for (name, ty, dims) in &serving_input.features {
            let mut d = vec![batch as i64];
            d.extend(dims);
            entries.push((name.clone(), g.tracer.parameter(name, d.as_slice(), *ty)));
        }
        let features = Features::from_entries(entries, &g.global_step.clone());
        let params: Params = self.params.with_batch_size(batch);
        let spec = (self.model_fn)(&mut g, &features, None, Mode::Predict, &params);
        if let Some(message) = params.missing_error() {
            return Err(EstimatorError::ModelFn(message));
        }
        let spec = spec?;
        if spec.predictions.is_empty() {
            return Err(EstimatorError::ModelFn(
                "in PREDICT mode the spec needs predictions".into(),
            ));
        }
        let variables: Vec<Variable> = g.variables.all().map(|(_, v)| v.clone()).collect();
        let names: Vec<String> = spec.predictions.iter().map(|(n, _)| n.clone()).collect();
        let refs: Vec<_> = spec.predictions.iter().map(|(_, t)| t).collect();
        let module = g.tracer.finish(&refs)?;
        let expected = 1 + serving_input.features.len() + variables.len();
        let got = module.computation(module.entry).parameters().len();
        if got != expected {
            return Err(EstimatorError::ModelFn(format!(
                "the model_fn made {} entry parameters of its own; make variables with get_variable or the layers, not Tracer::parameter",
                got.saturating_sub(expected)
            )));
        }
        Ok((module, variables, names))
    }
}

/// Writes an export with `fill` into a temporary directory beside its final place, then
/// renames it to `<base>/<timestamp>` (the next free second, as two exports may share one).
/// Every file is synced before the rename and the base after it, so an export that can be
/// seen is whole after a power loss. On failure the temporary directory is removed.
fn write_export(
    base: &Path,
    fill: impl FnOnce(&Path) -> Result<(), EstimatorError>,
) -> Result<PathBuf, EstimatorError> {
    std::fs::create_dir_all(base).map_err(|e| export_err(&base.display().to_string(), e))?;
    let mut stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let tmp = base.join(format!("temp-{stamp}-{}", std::process::id()));
    std::fs::create_dir(&tmp).map_err(|e| export_err(&tmp.display().to_string(), e))?;
    let synced = |dir: &Path| {
        tessel_runtime::durable::sync_tree(dir)
            .map_err(|e| export_err("syncing the export to disk", e))
    };
    let result = fill(&tmp).and_then(|()| synced(&tmp)).and_then(|()| loop {
        let dir = base.join(stamp.to_string());
        if dir.exists() {
            stamp += 1;
            continue;
        }
        break std::fs::rename(&tmp, &dir)
            .map_err(|e| export_err("renaming the export into place", e))
            .and_then(|()| {
                tessel_runtime::durable::sync_dir(base)
                    .map_err(|e| export_err("syncing the export to disk", e))
            })
            .map(|()| dir);
    });
    if result.is_err() {
        std::fs::remove_dir_all(&tmp).ok();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_write_leaves_no_directory() {
        let base = tempfile::tempdir().unwrap();
        let e = write_export(base.path(), |dir| {
            std::fs::write(dir.join("model.hlo"), "half").unwrap();
            Err(EstimatorError::Export("disk full".into()))
        })
        .unwrap_err();
        assert!(e.to_string().contains("disk full"));
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
        // Two exports in one second get two directories.
        let a = write_export(base.path(), |_| Ok(())).unwrap();
        let b = write_export(base.path(), |_| Ok(())).unwrap();
        assert_ne!(a, b);
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 2);
    }

    #[test]
    fn signature_json_round_trips_in_its_fixed_form() {
        let sig = Signature {
            batch_size: 128,
            parameters: vec![SignatureParameter {
                number: 0,
                kind: "variable".into(),
                name: "conv2d/kernel".into(),
                shape: vec![5, 5, 1, 32],
                dtype: ElementType::F32,
            }],
            outputs: vec![SignatureOutput {
                index: 0,
                name: "classes".into(),
                shape: vec![128],
                dtype: ElementType::S32,
            }],
        };
        let text = sig.to_json();
        assert_eq!(
            text,
            concat!(
                "{\"batch_size\": 128,\n",
                " \"parameters\": [{\"number\": 0, \"kind\": \"variable\", \"name\": \"conv2d/kernel\", \"shape\": [5, 5, 1, 32], \"dtype\": \"f32\"}],\n",
                " \"outputs\": [{\"index\": 0, \"name\": \"classes\", \"shape\": [128], \"dtype\": \"s32\"}]}\n"
            )
        );
        let v: Json = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({"batch_size": 128,
                   "parameters": [{"number": 0, "kind": "variable", "name": "conv2d/kernel", "shape": [5, 5, 1, 32], "dtype": "f32"}],
                   "outputs": [{"index": 0, "name": "classes", "shape": [128], "dtype": "s32"}]})
        );
        assert_eq!(Signature::from_json(&text).unwrap(), sig);
        let bad = text.replace("variable", "constant");
        assert!(Signature::from_json(&bad).unwrap_err().contains("constant"));
    }
}
