//! `tessel run FILE --inputs IN --outputs OUT [--backend interp|jit] [--replicas N] [--loop K --infeed I,J] [--repeat R]`
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct RunArgs {
    pub file: PathBuf,
    #[arg(long)]
    pub inputs: PathBuf,
    #[arg(long)]
    pub outputs: PathBuf,
    #[arg(long, default_value = "interp")]
    pub backend: String,
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    #[arg(long = "loop")]
    pub loop_iterations: Option<usize>,
    #[arg(long, value_delimiter = ',')]
    pub infeed: Vec<u32>,
    #[arg(long)]
    pub repeat: Option<usize>,
}

pub fn run(args: &RunArgs) -> ExitCode {
    super::fail(format!("run is not built yet ({})", args.file.display()))
}
