//! [`ExportedModel`]: an export loaded to run, `tessel predict`'s library half.
//!
//! Loading checks the export's three files against each other before anything runs, so a
//! damaged or hand-edited export is an error naming what is wrong: the module must pass the
//! verifier (every finding is reported), `signature.json`'s parameters and outputs must be the
//! module's in number, shape and dtype, and `variables.safetensors` must hold every variable at
//! the shape the module takes.
//!
//! [`ExportedModel::run`] runs one batch of the export's static size;
//! [`ExportedModel::predict`] takes any number of rows, as TF's SavedModel does: it runs the
//! batch in chunks, pads the last chunk with zero rows and strips their predictions.

use super::export::{Signature, SignatureParameter};
use crate::error::EstimatorError;
use std::path::Path;
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Module, Shape};
use tessel_runtime::host_io::read_safetensors;
use tessel_runtime::session::{compile, Device, Outputs, Program};

/// An export loaded to run.
pub struct ExportedModel {
    pub signature: Signature,
    program: Program,
    /// Every parameter's value that is a variable, by parameter number.
    variables: Vec<Option<Array>>,
}

fn export_err(what: &str, e: impl std::fmt::Display) -> EstimatorError {
    EstimatorError::Export(format!("{what}: {e}"))
}

/// `f32[8,4]`: a type and dims, spelled alike on both sides of a mismatch.
fn spelled(ty: ElementType, dims: &[i64]) -> String {
    let dims: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("{ty}[{}]", dims.join(","))
}

impl ExportedModel {
    /// Reads `dir`'s three files, checks them against each other and compiles the module for
    /// the JIT.
    pub fn load(dir: impl AsRef<Path>) -> Result<ExportedModel, EstimatorError> {
        let dir = dir.as_ref();
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| export_err(&dir.join(name).display().to_string(), e))
        };
        let signature = Signature::from_json(&read("signature.json")?)
            .map_err(|e| export_err("signature.json", e))?;
        if signature.batch_size == 0 {
            return Err(export_err("signature.json", "its batch_size is 0"));
        }
        let module = parse_module(&read("model.hlo")?, Some("model.hlo"))
            .map_err(|e| export_err("model.hlo", e))?;
        tessel_compiler::verifier::verify(&module).map_err(|errors| {
            let shown: Vec<String> = errors.iter().map(|e| format!("\n  {e}")).collect();
            export_err(
                "model.hlo",
                format!(
                    "the module is not valid ({} error{}):{}",
                    errors.len(),
                    if errors.len() == 1 { "" } else { "s" },
                    shown.concat()
                ),
            )
        })?;
        check_signature(&signature, &module)?;
        let stored = read_safetensors(dir.join("variables.safetensors"))
            .map_err(|e| export_err("variables.safetensors", e))?;
        let mut variables = Vec::new();
        for p in &signature.parameters {
            if p.kind != "variable" {
                variables.push(None);
                continue;
            }
            let a = stored.iter().find(|(n, _)| n == &p.name).map(|(_, a)| a);
            let a = a.ok_or_else(|| {
                export_err(
                    "variables.safetensors",
                    format!("it has no variable `{}`", p.name),
                )
            })?;
            if a.shape.dims.as_slice() != p.shape.as_slice() || a.element_type() != p.dtype {
                return Err(export_err(
                    "variables.safetensors",
                    format!(
                        "variable `{}` is {}, but the module takes {} (parameter {})",
                        p.name,
                        spelled(a.element_type(), &a.shape.dims),
                        spelled(p.dtype, &p.shape),
                        p.number
                    ),
                ));
            }
            variables.push(Some(a.clone()));
        }
        let program = compile(&module, &Device::jit())?;
        Ok(ExportedModel {
            signature,
            program,
            variables,
        })
    }

    /// Runs one batch: `inputs` keyed by feature name, each at the export's batch size;
    /// returns the outputs keyed by prediction key. [`Self::predict`] takes any number of rows.
    pub fn run(&self, inputs: &[(String, Array)]) -> Result<Vec<(String, Array)>, EstimatorError> {
        self.check_input_names(inputs)?;
        let mut args = Vec::with_capacity(self.variables.len());
        for (p, v) in self.signature.parameters.iter().zip(&self.variables) {
            match v {
                Some(a) => args.push(a.clone()),
                None => {
                    let a = input(inputs, &p.name)?;
                    if a.shape.dims.as_slice() != p.shape.as_slice() || a.element_type() != p.dtype
                    {
                        return Err(input_err(format!(
                            "`{}` is {}, but the export takes {} (run takes the export's batch size; predict takes any number of rows)",
                            p.name,
                            spelled(a.element_type(), &a.shape.dims),
                            spelled(p.dtype, &p.shape)
                        )));
                    }
                    args.push(a.clone());
                }
            }
        }
        let bound = self.program.bind_ordered(args)?;
        let leaves = match self.program.run(&bound)? {
            Outputs::Global(leaves) => leaves,
            Outputs::PerReplica(mut r) => r.remove(0),
        };
        Ok(self
            .signature
            .outputs
            .iter()
            .zip(leaves)
            .map(|(o, a)| (o.name.clone(), a))
            .collect())
    }

    /// Runs any number of rows: `inputs` keyed by feature name, each with the same number of
    /// rows N first and the export's per-example dims after. The rows run in chunks of the
    /// export's batch; the last chunk is padded with zero rows, whose outputs are dropped.
    /// Returns every output with N rows, keyed by prediction key.
    pub fn predict(
        &self,
        inputs: &[(String, Array)],
    ) -> Result<Vec<(String, Array)>, EstimatorError> {
        self.check_input_names(inputs)?;
        let batch = self.signature.batch_size;
        let features: Vec<&SignatureParameter> = self
            .signature
            .parameters
            .iter()
            .filter(|p| p.kind == "input")
            .collect();
        let mut rows: Option<(usize, &str)> = None;
        let mut columns = Vec::with_capacity(features.len());
        for p in &features {
            let a = input(inputs, &p.name)?;
            let dims = &a.shape.dims;
            if dims.is_empty()
                || dims.len() != p.shape.len()
                || dims[1..] != p.shape[1..]
                || a.element_type() != p.dtype
            {
                let mut wanted = vec!["N".to_string()];
                wanted.extend(p.shape.iter().skip(1).map(i64::to_string));
                return Err(input_err(format!(
                    "`{}` is {}, but the export takes {}[{}] (N rows, any number)",
                    p.name,
                    spelled(a.element_type(), dims),
                    p.dtype,
                    wanted.join(",")
                )));
            }
            let n = dims[0] as usize;
            if let Some((m, other)) = rows.filter(|&(m, _)| m != n) {
                let message = format!(
                    "the inputs have different numbers of rows: `{other}` has {m}, `{}` has {n}",
                    p.name
                );
                return Err(input_err(message));
            }
            rows = Some((n, &p.name));
            columns.push((p, Rows::of(a)));
        }
        let rows = rows.map_or(0, |(n, _)| n);
        let mut outputs: Vec<(Vec<u8>, usize)> = Vec::new();
        for o in &self.signature.outputs {
            if o.shape.first() != Some(&(batch as i64)) {
                return Err(export_err(
                    "signature.json",
                    format!(
                        "output `{}` is {}: its first dimension is not the batch ({batch}), so its rows cannot be told apart",
                        o.name,
                        spelled(o.dtype, &o.shape)
                    ),
                ));
            }
            let row_bytes = o.shape[1..].iter().product::<i64>() as usize * o.dtype.byte_size();
            outputs.push((Vec::with_capacity(rows * row_bytes), row_bytes));
        }
        for start in (0..rows).step_by(batch) {
            let real = batch.min(rows - start);
            let chunk = columns
                .iter()
                .map(|(p, column)| {
                    Ok((p.name.clone(), column.chunk(start, real, batch, &p.shape)?))
                })
                .collect::<Result<Vec<_>, EstimatorError>>()?;
            for ((bytes, row_bytes), (_, a)) in outputs.iter_mut().zip(self.run(&chunk)?) {
                bytes.extend_from_slice(&a.data.to_le_bytes()[..real * *row_bytes]);
            }
        }
        self.signature
            .outputs
            .iter()
            .zip(outputs)
            .map(|(o, (bytes, _))| {
                let mut dims = o.shape.clone();
                dims[0] = rows as i64;
                let data = ArrayData::from_le_bytes(o.dtype, &bytes)
                    .ok_or_else(|| export_err("outputs", "their bytes do not decode"))?;
                Ok((
                    o.name.clone(),
                    Array::new(ArrayShape::new(o.dtype, &dims), data),
                ))
            })
            .collect()
    }

    /// An input the export does not take is an error, not silently dropped.
    fn check_input_names(&self, inputs: &[(String, Array)]) -> Result<(), EstimatorError> {
        let known = |n: &String| {
            self.signature
                .parameters
                .iter()
                .any(|p| p.kind == "input" && &p.name == n)
        };
        match inputs.iter().find(|(n, _)| !known(n)) {
            Some((extra, _)) => Err(input_err(format!("the export has no input `{extra}`"))),
            None => Ok(()),
        }
    }
}

/// A mistake in the inputs given to an export (not an input_fn's: an export has none).
fn input_err(message: String) -> EstimatorError {
    export_err("inputs", message)
}

fn input<'a>(inputs: &'a [(String, Array)], name: &str) -> Result<&'a Array, EstimatorError> {
    inputs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, a)| a)
        .ok_or_else(|| input_err(format!("the inputs have no feature `{name}`")))
}

/// One input's bytes, cut into batches by rows.
struct Rows {
    ty: ElementType,
    bytes: Vec<u8>,
    row_bytes: usize,
}

impl Rows {
    fn of(a: &Array) -> Rows {
        let per_row: i64 = a.shape.dims[1..].iter().product();
        Rows {
            ty: a.element_type(),
            bytes: a.data.to_le_bytes(),
            row_bytes: per_row as usize * a.element_type().byte_size(),
        }
    }

    /// Rows `start..start + real`, then zero rows up to `batch`, at `dims` (the batch first).
    fn chunk(
        &self,
        start: usize,
        real: usize,
        batch: usize,
        dims: &[i64],
    ) -> Result<Array, EstimatorError> {
        let mut bytes =
            self.bytes[start * self.row_bytes..(start + real) * self.row_bytes].to_vec();
        bytes.resize(batch * self.row_bytes, 0);
        let data = ArrayData::from_le_bytes(self.ty, &bytes)
            .ok_or_else(|| export_err("inputs", "a chunk's bytes do not decode"))?;
        Ok(Array::new(ArrayShape::new(self.ty, dims), data))
    }
}

/// `signature.json` against the module: the same parameters (number, shape, dtype) and the
/// same outputs (the root's leaves, in order).
fn check_signature(signature: &Signature, module: &Module) -> Result<(), EstimatorError> {
    let err = |m: String| export_err("signature.json does not match model.hlo", m);
    let (params, root) = module.entry_signature();
    if params.len() != signature.parameters.len() {
        return Err(err(format!(
            "it lists {} parameters but the module has {}",
            signature.parameters.len(),
            params.len()
        )));
    }
    for (number, (p, shape)) in signature.parameters.iter().zip(&params).enumerate() {
        let Shape::Array(a) = shape else {
            return Err(err(format!("the module's parameter {number} is a tuple")));
        };
        if p.number != number
            || p.shape.as_slice() != a.dims.as_slice()
            || p.dtype != a.element_type
        {
            return Err(err(format!(
                "parameter {} `{}` is {} in signature.json, but the module's parameter {number} is {}",
                p.number,
                p.name,
                spelled(p.dtype, &p.shape),
                spelled(a.element_type, &a.dims)
            )));
        }
        if p.kind == "input" && p.shape.first() != Some(&(signature.batch_size as i64)) {
            return Err(err(format!(
                "input `{}` is {}: its first dimension is not the batch_size {}",
                p.name,
                spelled(p.dtype, &p.shape),
                signature.batch_size
            )));
        }
    }
    let leaves = root.leaves();
    for (index, o) in signature.outputs.iter().enumerate() {
        let Some(leaf) = leaves.get(index) else {
            return Err(err(format!(
                "output `{}` (index {}) is not in the module, which has {} output{}",
                o.name,
                o.index,
                leaves.len(),
                if leaves.len() == 1 { "" } else { "s" }
            )));
        };
        if o.index != index
            || o.shape.as_slice() != leaf.dims.as_slice()
            || o.dtype != leaf.element_type
        {
            return Err(err(format!(
                "output `{}` (index {}) is {} in signature.json, but the module's output {index} is {}",
                o.name,
                o.index,
                spelled(o.dtype, &o.shape),
                spelled(leaf.element_type, &leaf.dims)
            )));
        }
    }
    if leaves.len() > signature.outputs.len() {
        let k = signature.outputs.len();
        return Err(err(format!(
            "the module has {} outputs but signature.json lists {k}: output {k} ({}) has no name",
            leaves.len(),
            spelled(leaves[k].element_type, &leaves[k].dims)
        )));
    }
    Ok(())
}
