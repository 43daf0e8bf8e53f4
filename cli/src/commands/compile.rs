//! `tessel compile FILE [--replicas N] [--dump-to DIR] [--dump-pass-re REGEX]`
//!
//! Parses the module, runs the optimization pipeline (writing dumps when asked) and prints
//! `key: value` lines: compile time, instruction, fusion and kernel counts, buffer sizes.
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::passes::{optimize, CompileOptions};

#[derive(Args)]
pub struct CompileArgs {
    /// The HLO module to optimize.
    pub file: PathBuf,
    /// Number of replicas the module is compiled for (recorded; no pass uses it yet).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Write the module before and after each pass that changed it, buffer assignment and a .dot.
    #[arg(long)]
    pub dump_to: Option<PathBuf>,
    /// Dump only after the passes whose name matches this regular expression.
    #[arg(long)]
    pub dump_pass_re: Option<String>,
}

pub fn run(args: &CompileArgs) -> ExitCode {
    let mut module = match parse_module_file(&args.file) {
        Ok(m) => m,
        Err(e) => return super::fail(e),
    };
    if let Err(errors) = tessel_compiler::verifier::verify(&module) {
        for e in &errors {
            eprintln!("error: {e}");
        }
        return super::fail(format!(
            "{} is not a valid module ({} errors)",
            args.file.display(),
            errors.len()
        ));
    }
    let options = CompileOptions {
        dump_to: args.dump_to.clone(),
        dump_pass_re: args.dump_pass_re.clone(),
        replicas: args.replicas,
    };
    match optimize(&mut module, &options) {
        Ok(report) => {
            for line in report.summary_lines() {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => super::fail(e),
    }
}
