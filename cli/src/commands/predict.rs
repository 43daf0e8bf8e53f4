//! `tessel predict EXPORT_DIR --inputs X.safetensors --outputs Y.safetensors`: runs an export
//! written by `TpuEstimator::export` on one batch. Inputs are keyed by feature name and must
//! have the export's static batch size (`signature.json`'s `batch_size`; pad a short batch);
//! outputs are written keyed by prediction key.
//!
//! The logic is in the library (`tessel_estimator::estimator::ExportedModel`); this file only
//! reads, prints and writes.

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
    /// The features, keyed by name, each with the export's batch size first.
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
    let outputs = match model.run(&inputs) {
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
