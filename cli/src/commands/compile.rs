//! `tessel compile FILE [--replicas N] [--dump-to DIR] [--dump-pass-re REGEX]`
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct CompileArgs {
    pub file: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    #[arg(long)]
    pub dump_to: Option<PathBuf>,
    #[arg(long)]
    pub dump_pass_re: Option<String>,
}

pub fn run(args: &CompileArgs) -> ExitCode {
    super::fail(format!(
        "compile is not built yet ({})",
        args.file.display()
    ))
}
