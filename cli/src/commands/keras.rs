//! `tessel keras train|evaluate|predict|export|summary MODEL ...`: a saved Keras model as a
//! TpuEstimator, for a Keras user who writes no Rust. The model is a `.keras` zip, a legacy
//! `.h5` file, or a directory of `model.json` + `weights.npz`; `--data` is an `.npz` file as
//! `np.savez` writes it, arrays keyed by the model's input and output names or `x` / `y`, or a
//! TFRecord file of `tf.train.Example`s read with `--feature-spec`.
//! The logic is in `tessel_estimator::keras`; this file parses, prints and writes.

use super::fail;
use super::keras_data::{load_data, serving_input, stack_predictions, Data};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tessel_estimator::config::{RunConfig, TpuConfig};
use tessel_estimator::keras::feature_spec::{read_feature_spec, KerasFeatureSpec};
use tessel_estimator::keras::{
    model_to_estimator_from_parts, read_model, summary, KerasOptions, KerasParts,
};
use tessel_estimator::TpuEstimator;
use tessel_runtime::host_io::write_safetensors;

#[derive(Subcommand)]
pub enum KerasCommand {
    /// Train from the saved weights (or the model_dir's checkpoint) for `--steps` steps.
    Train(TrainArgs),
    /// Evaluate the model_dir's latest checkpoint (or the saved weights) on the whole data once.
    Evaluate(EvalArgs),
    /// Predict every row of `--data`; outputs keyed by output name.
    Predict(PredictArgs),
    /// Export the model_dir's latest checkpoint as a tessel export (`tessel predict` runs it).
    Export(ExportArgs),
    /// The layers, output shapes and parameter counts, and what tessel cannot run.
    Summary {
        /// A `.keras` zip, a legacy `.h5` file, a tf.keras SavedModel directory, or a directory
        /// of model.json + weights.npz.
        model: PathBuf,
    },
}

#[derive(Args)]
pub struct Common {
    /// A `.keras` zip, a legacy `.h5` file, a tf.keras SavedModel directory, or a directory of
    /// model.json + weights.npz.
    pub model: PathBuf,
    #[arg(long)]
    pub model_dir: PathBuf,
    /// Global batch size (divided among the shards).
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Replicas to run on (Keras's gradients are averaged across them).
    #[arg(long, default_value_t = 1)]
    pub num_shards: usize,
    /// Steps per compiled loop (TPUConfig's iterations_per_loop).
    #[arg(long, default_value_t = 50)]
    pub iterations: u64,
}

#[derive(Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub common: Common,
    #[arg(long)]
    pub data: PathBuf,
    #[arg(long)]
    pub eval_data: Option<PathBuf>,
    /// A JSON feature spec: `--data` (and `--eval-data`) are then TFRecord files of
    /// tf.train.Example, parsed as `{"features": {"NAME": {"shape": [..], "dtype": "float32" |
    /// "int64"}}, "label_key": "NAME"}` (docs/keras.md).
    #[arg(long)]
    pub feature_spec: Option<PathBuf>,
    #[arg(long)]
    pub steps: u64,
}

#[derive(Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub common: Common,
    #[arg(long)]
    pub data: PathBuf,
    /// A JSON feature spec: `--data` (and `--eval-data`) are then TFRecord files of
    /// tf.train.Example, parsed as `{"features": {"NAME": {"shape": [..], "dtype": "float32" |
    /// "int64"}}, "label_key": "NAME"}` (docs/keras.md).
    #[arg(long)]
    pub feature_spec: Option<PathBuf>,
}

#[derive(Args)]
pub struct PredictArgs {
    #[command(flatten)]
    pub common: Common,
    #[arg(long)]
    pub data: PathBuf,
    /// A JSON feature spec: `--data` (and `--eval-data`) are then TFRecord files of
    /// tf.train.Example, parsed as `{"features": {"NAME": {"shape": [..], "dtype": "float32" |
    /// "int64"}}, "label_key": "NAME"}` (docs/keras.md).
    #[arg(long)]
    pub feature_spec: Option<PathBuf>,
    /// Where to write the predictions (safetensors, keyed by output name).
    #[arg(long)]
    pub outputs: PathBuf,
}

#[derive(Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub common: Common,
    #[arg(long)]
    pub export_dir: PathBuf,
}

pub fn run(command: &KerasCommand) -> ExitCode {
    let result = match command {
        KerasCommand::Train(a) => train(a),
        KerasCommand::Evaluate(a) => evaluate(a),
        KerasCommand::Predict(a) => predict(a),
        KerasCommand::Export(a) => export(a),
        KerasCommand::Summary { model } => print_summary(model),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn load(path: &Path) -> Result<KerasParts, String> {
    read_model(path).map_err(|e| e.to_string())
}

fn spec(path: Option<&PathBuf>) -> Result<Option<KerasFeatureSpec>, String> {
    path.map(|p| read_feature_spec(p).map_err(|e| e.to_string()))
        .transpose()
}

fn estimator(c: &Common, parts: &KerasParts) -> Result<TpuEstimator, String> {
    let config = RunConfig {
        model_dir: Some(c.model_dir.clone()),
        tpu_config: TpuConfig {
            iterations_per_loop: c.iterations,
            num_shards: Some(c.num_shards),
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    let options = KerasOptions {
        train_batch_size: c.batch_size,
        eval_batch_size: Some(c.batch_size),
        predict_batch_size: Some(c.batch_size),
        ..KerasOptions::default()
    };
    model_to_estimator_from_parts(parts, config, options).map_err(|e| e.to_string())
}

fn train(a: &TrainArgs) -> Result<(), String> {
    let parts = load(&a.common.model)?;
    let spec = spec(a.feature_spec.as_ref())?;
    let data = load_data(&a.data, spec.as_ref(), &parts, true)?;
    let eval = match &a.eval_data {
        Some(e) => Some(load_data(e, spec.as_ref(), &parts, true)?),
        None => None,
    };
    let est = estimator(&a.common, &parts)?;
    let started = std::time::Instant::now();
    let r = est
        .train(super::keras_data::input_fn(data, true), Some(a.steps), None)
        .map_err(|e| e.to_string())?;
    println!(
        "trained to step {} in {:.1} s",
        r.global_step,
        started.elapsed().as_secs_f64()
    );
    if let Some(eval) = eval {
        evaluate_with(&est, eval)?;
    }
    Ok(())
}

fn evaluate(a: &EvalArgs) -> Result<(), String> {
    let parts = load(&a.common.model)?;
    let spec = spec(a.feature_spec.as_ref())?;
    let data = load_data(&a.data, spec.as_ref(), &parts, true)?;
    let est = estimator(&a.common, &parts)?;
    evaluate_with(&est, data)
}

fn evaluate_with(est: &TpuEstimator, data: Data) -> Result<(), String> {
    let r = est
        .evaluate(super::keras_data::input_fn(data, false), None)
        .map_err(|e| e.to_string())?;
    println!("global_step = {}", r.global_step);
    println!("examples = {}", r.examples);
    println!("loss = {}", r.loss);
    for (name, v) in &r.metrics {
        println!("{name} = {v}");
    }
    Ok(())
}

fn predict(a: &PredictArgs) -> Result<(), String> {
    let parts = load(&a.common.model)?;
    let spec = spec(a.feature_spec.as_ref())?;
    let data = load_data(&a.data, spec.as_ref(), &parts, false)?;
    let est = estimator(&a.common, &parts)?;
    let rows = est
        .predict(super::keras_data::input_fn(data, false), None)
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let outputs = stack_predictions(&rows)?;
    for (name, a) in &outputs {
        println!("{name}: {}", a.shape);
    }
    write_safetensors(&a.outputs, &outputs).map_err(|e| e.to_string())
}

fn export(a: &ExportArgs) -> Result<(), String> {
    let parts = load(&a.common.model)?;
    let est = estimator(&a.common, &parts)?;
    let dir = est
        .export(&a.export_dir, &serving_input(&parts)?)
        .map_err(|e| e.to_string())?;
    println!("exported to {}", dir.display());
    Ok(())
}

fn print_summary(model: &Path) -> Result<(), String> {
    let parts = load(model)?;
    let s = summary(&parts).map_err(|e| e.to_string())?;
    print!("{s}");
    if s.problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "tessel cannot run {}: {} problem(s), listed above",
            model.display(),
            s.problems.len()
        ))
    }
}
