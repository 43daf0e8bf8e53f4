//! `tessel predict EXPORT_DIR --inputs X.safetensors --outputs Y.safetensors`: runs an export
//! written by `TpuEstimator::export` on any number of rows. Inputs are keyed by feature name,
//! each with the same number of rows first; they run in chunks of the export's static batch
//! (`signature.json`'s `batch_size`), the last one padded and its padding stripped. Outputs
//! are written keyed by prediction key, one row per input row.
//!
//! Loading checks the export (the verifier's findings, the signature against the module, the
//! variables' shapes) and reports what is wrong. The logic is in the library
//! (`tessel_estimator::estimator::ExportedModel`); this file only reads, prints and writes.

use super::fail;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use tessel_estimator::estimator::ExportedModel;
use tessel_runtime::host_io::{read_safetensors, write_safetensors};

#[derive(Args)]
pub struct PredictArgs {
    /// An export directory: model.hlo, variables.safetensors, signature.json.
    pub export_dir: PathBuf,
    /// The features, keyed by name, each with the same number of rows first (any number).
    #[arg(long)]
    pub inputs: PathBuf,
    /// Where to write the predictions, keyed by prediction key.
    #[arg(long)]
    pub outputs: PathBuf,
}

pub fn run(args: &PredictArgs) -> ExitCode {
    let model = match ExportedModel::load(&args.export_dir) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let inputs = match read_safetensors(&args.inputs) {
        Ok(i) => i,
        Err(e) => return fail(e),
    };
    let outputs = match model.predict(&inputs) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    for (name, a) in &outputs {
        println!("{name}: {}", a.shape);
    }
    match write_safetensors(&args.outputs, &outputs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}
