//! `tessel compile FILE [--replicas N] [--dump-to DIR] [--dump-pass-re REGEX]`
//!
//! Compiles the module for the JIT device with the session's driver (as `tessel run --backend
//! jit` does): it is rejected if the device cannot run it (as `tessel check`), optimized
//! (writing dumps when asked) and compiled. Prints `key: value` lines: compile time,
//! instruction, fusion and kernel counts, buffer sizes, then the JIT's compile time, kernels
//! and arena. With `--dump-to DIR` the JIT writes each function's CLIF, before and after
//! Cranelift's optimizer, into `DIR/jit/`. A shard_map module is compiled as its per-replica
//! program (what each replica runs).
use super::session_errors::{describe, Verb};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use tessel_compiler::hlo_text::parse_module_file;
use tessel_runtime::session::{compile_with_report, Device};

#[derive(Args)]
pub struct CompileArgs {
    /// The HLO module to optimize.
    pub file: PathBuf,
    /// Number of replicas the module is compiled for (a shard_map module needs its mesh's).
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
    // As `tessel run` does, before any work.
    if args.replicas == 0 {
        return super::fail("--replicas must be at least 1");
    }
    let module = match parse_module_file(&args.file) {
        Ok(m) => m,
        Err(e) => return super::fail(e),
    };
    // A shard_map module compiles for its mesh (its per-replica body is what runs).
    let device = Device {
        dump_to: args.dump_to.clone(),
        dump_pass_re: args.dump_pass_re.clone(),
        ..Device::jit()
            .with_replicas(args.replicas)
            .with_replicas_of(&module)
    };
    let compiled = match compile_with_report(&module, &device) {
        Ok(c) => c,
        Err(e) => return super::fail(describe(e, &args.file, Verb::Compile)),
    };
    if let Some(report) = &compiled.report {
        for line in report.summary_lines() {
            println!("{line}");
        }
    }
    if let Some(stats) = compiled.program.stats() {
        println!("jit_compile_ms: {:.3}", stats.compile_ms);
        println!("jit_kernels: {}", stats.kernels);
        println!("jit_arena_bytes: {}", stats.arena_bytes);
        // What the routines took over (docs/jit.md): a user sees whether a layer got them.
        println!("jit_folded_pools: {}", stats.folded_pools);
        println!("jit_paired_convolutions: {}", stats.paired_convolutions);
        println!("jit_chunked_kernels: {}", stats.chunked_kernels);
        println!("jit_pool_choices: {}", stats.pool_choices);
        println!("jit_discarded_outputs: {}", stats.discarded_outputs);
    }
    ExitCode::SUCCESS
}
