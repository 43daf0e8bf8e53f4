//! `tessel compile FILE [--replicas N] [--dump-to DIR] [--dump-pass-re REGEX]`
//!
//! Parses the module, rejects it if the device cannot run it (as `tessel check`), runs the optimization pipeline (writing dumps when asked), compiles the
//! result with the Cranelift JIT (as `tessel run --backend jit` does) and prints `key: value`
//! lines: compile time, instruction, fusion and kernel counts, buffer sizes, then the JIT's
//! compile time, kernels and arena. With `--dump-to DIR` the JIT writes each function's CLIF,
//! before and after Cranelift's optimizer, into `DIR/jit/`. A shard_map module is compiled as
//! its per-replica program (what each replica runs).
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use tessel_compiler::compile::{optimize, CompileError, CompileOptions};
use tessel_compiler::dump::DumpError;
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::Module;
use tessel_compiler::legality::{check_legality, render};
use tessel_runtime::jit::{compile, JitOptions};
use tessel_runtime::shard_map::{is_shard_map_module, per_replica_module};

#[derive(Args)]
pub struct CompileArgs {
    /// The HLO module to optimize.
    pub file: PathBuf,
    /// Number of replicas the module is compiled for (recorded; no pass uses it yet).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Write the module before and after each pass that changed it, buffer assignment, a .dot,
    /// and the JIT's CLIF per kernel (in DIR/jit/).
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
    // What a TPU cannot run is rejected before compiling, as `tessel check` reports it.
    let diagnostics = check_legality(&module);
    if !diagnostics.is_empty() {
        eprint!("{}", render(&diagnostics, &module));
        return super::fail(format!(
            "{} cannot be compiled for the device ({} diagnostic{})",
            args.file.display(),
            diagnostics.len(),
            if diagnostics.len() == 1 { "" } else { "s" }
        ));
    }
    let options = CompileOptions {
        dump_to: args.dump_to.clone(),
        dump_pass_re: args.dump_pass_re.clone(),
    };
    let report = match optimize(&mut module, &options) {
        Ok(report) => report,
        // The library names the pass filter; the user typed it as a flag.
        Err(CompileError::Dump(DumpError::BadPassFilter { pattern, source })) => {
            return super::fail(format!("--dump-pass-re {pattern:?}: {source}"))
        }
        Err(e) => return super::fail(e),
    };
    for line in report.summary_lines() {
        println!("{line}");
    }
    match jit_compile(&module, args) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => super::fail(format!(
            "the JIT could not compile the optimized module: {e}"
        )),
    }
}

/// Compiles the optimized module with the JIT; returns its `key: value` lines.
fn jit_compile(module: &Module, args: &CompileArgs) -> Result<Vec<String>, String> {
    let program = if is_shard_map_module(module) {
        per_replica_module(module).map_err(|e| e.to_string())?
    } else {
        module.clone()
    };
    let options = JitOptions {
        dump_to: args.dump_to.as_ref().map(|d| d.join("jit")),
        ..Default::default()
    };
    let exe = compile(&program, &options).map_err(|e| e.to_string())?;
    let stats = exe.stats();
    Ok(vec![
        format!("jit_compile_ms: {:.3}", stats.compile_ms),
        format!("jit_kernels: {}", stats.kernels),
        format!("jit_arena_bytes: {}", stats.arena_bytes),
    ])
}
