//! The `tessel` command line. Each verb lives in its own file under `commands/`.

mod commands;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tessel",
    version,
    about = "tessel: an XLA-style graph compiler and runtime for HLO modules"
)]
enum Command {
    /// Parse, verify and check device legality; exit 0 only when every file is legal.
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Print a module in canonical text (stable names, no metadata).
    Fmt { file: PathBuf },
    /// Run a module on inputs from a safetensors file and write its outputs.
    Run(commands::run::RunArgs),
    /// Print a module whose root is (value, d value / d param I, ...).
    Grad {
        file: PathBuf,
        /// Parameter numbers to differentiate with respect to, e.g. `0,1`.
        #[arg(long, value_delimiter = ',', required = true)]
        wrt: Vec<u32>,
    },
    /// Run the optimization pipeline and print a summary; optionally dump every pass.
    Compile(commands::compile::CompileArgs),
    /// Run an estimator export on one batch of features from a safetensors file.
    Predict(commands::predict::PredictArgs),
    /// TFRecord files of tf.train.Example: convert MNIST, inspect files.
    #[command(subcommand)]
    Data(commands::data::DataCommand),
    /// A saved Keras model as a TpuEstimator: train, evaluate, predict, export, summary.
    #[command(subcommand)]
    Keras(commands::keras::KerasCommand),
}

fn main() -> ExitCode {
    commands::logger::install();
    match Command::parse() {
        Command::Check { files } => commands::check::run(&files),
        Command::Fmt { file } => commands::fmt::run(&file),
        Command::Run(args) => commands::run::run(&args),
        Command::Grad { file, wrt } => commands::grad::run(&file, &wrt),
        Command::Compile(args) => commands::compile::run(&args),
        Command::Data(command) => commands::data::run(&command),
        Command::Predict(args) => commands::predict::run(&args),
        Command::Keras(command) => commands::keras::run(&command),
    }
}
