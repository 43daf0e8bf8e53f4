//! `tessel run FILE --inputs IN --outputs OUT [--backend interp|jit] [--replicas N] [--loop K --infeed I,J] [--repeat R] [--trace-dir DIR]`
//!
//! Argument parsing and printing around the session API (`tessel_runtime::session`): the
//! module is compiled for a device (backend, replicas, convolution routines, threads) and run.
//! Inputs are keyed `"0"`, `"1"`, ... by entry parameter number; outputs by the flattened
//! leaves of the entry's root. With `--replicas N`, a shard_map module takes and gives the
//! global arrays; a module that is already per-replica takes `"I"` for every replica, `"R/I"`
//! overriding it for replica R, and writes `"R/I"`. `--loop K` is in `run_loop.rs`; under
//! `mpirun` (the `mpi` feature) the hosts split the replicas, see `run_hosts.rs`.
use super::session_errors::{describe, Verb};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tessel_runtime::host_io::read_safetensors;
use tessel_runtime::session::{
    compile, Backend, ConvAlgorithm, Device, ThreadBudget, TraceOptions,
};

#[derive(Args)]
pub struct RunArgs {
    /// The HLO module to run (text, as XLA and JAX print it).
    pub file: PathBuf,
    /// Arguments keyed "0", "1", ... by parameter number ("I" / "R/I" for per-replica modules).
    #[arg(long)]
    pub inputs: PathBuf,
    /// Where to write the results, keyed by the flattened leaves of the root ("0", "1", ...).
    #[arg(long)]
    pub outputs: PathBuf,
    /// `interp` (the reference interpreter) or `jit` (optimizer + Cranelift).
    #[arg(long, default_value = "interp")]
    pub backend: String,
    /// Number of replicas: a shard_map module takes and gives global arrays.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Run the step K times as one compiled while loop (parameters not in --infeed are carried).
    #[arg(long = "loop")]
    pub loop_iterations: Option<usize>,
    /// With --loop: parameters fed one slice per iteration from inputs stacked K deep.
    #[arg(long, value_delimiter = ',')]
    pub infeed: Vec<u32>,
    /// Run R more times after a warm-up and print compile_ms and run_ms_median.
    #[arg(long)]
    pub repeat: Option<usize>,
    /// With --loop: fail if carried float state holds a NaN after the loop.
    #[arg(long)]
    pub nan_check: bool,
    /// With --loop: batches each replica's infeed queue holds ahead of the device.
    #[arg(long)]
    pub infeed_depth: Option<usize>,
    /// With --backend jit: print the time of every kernel and GEMM call, per run, after the runs
    /// (the warm-up run is not counted when --repeat is given).
    #[arg(long)]
    pub profile: bool,
    /// With --profile: rows of the per-kernel table before the cheaper rest is summed in one
    /// line (0: every kernel).
    #[arg(long, default_value_t = 30)]
    pub profile_rows: usize,
    /// With --backend jit: `auto` (specialized convolution routines where they fit) or `gemm`
    /// (always the general patch-matrix GEMM).
    #[arg(long, default_value = "auto")]
    pub conv_algorithm: ConvAlgorithm,
    /// With --backend jit: write a trace of the runs (each kernel per replica, the infeed and
    /// outfeed, the host's input) to DIR/<file stem>.trace.json, in the Chrome trace event
    /// format that Perfetto and chrome://tracing open (the warm-up run is left out when
    /// --repeat is given).
    #[arg(long)]
    pub trace_dir: Option<PathBuf>,
    /// Under mpirun: all-reduce sums over every host use MPI's own all-reduce, which adds the
    /// hosts' partial sums in an order of its own (faster; not bitwise the one-process
    /// result). Every host must be given it.
    #[arg(long)]
    pub fast_allreduce: bool,
}

/// `interp` or `jit`.
pub fn parse_backend(name: &str) -> Result<Backend, String> {
    match name {
        "interp" => Ok(Backend::Interpreter),
        "jit" => Ok(Backend::Jit),
        other => Err(format!(
            "unknown backend \"{other}\" (expected interp or jit)"
        )),
    }
}

pub fn run(args: &RunArgs) -> ExitCode {
    let hosts = match super::run_hosts::Hosts::join() {
        Ok(hosts) => hosts,
        Err(message) => return super::fail(message),
    };
    let fast = tessel_runtime::session::set_fast_allreduce(args.fast_allreduce);
    hosts.finish(fast.and_then(|()| execute(args)))
}

/// The flag combinations that make no sense, rejected before any work.
fn check_flags(args: &RunArgs, backend: Backend) -> Result<(), String> {
    if args.loop_iterations.is_none()
        && (!args.infeed.is_empty() || args.nan_check || args.infeed_depth.is_some())
    {
        return Err("--infeed, --infeed-depth and --nan-check go with --loop K".into());
    }
    if args.infeed_depth == Some(0) {
        return Err("--infeed-depth must be at least 1".into());
    }
    if args.replicas == 0 {
        return Err("--replicas must be at least 1".into());
    }
    if args.profile && backend != Backend::Jit {
        return Err("--profile times the JIT's kernels (use it with --backend jit)".into());
    }
    if args.trace_dir.is_some() && backend != Backend::Jit {
        return Err("--trace-dir traces the JIT's kernels (use it with --backend jit)".into());
    }
    if args.repeat == Some(0) {
        return Err("--repeat must be at least 1".into());
    }
    Ok(())
}

pub(super) fn execute(args: &RunArgs) -> Result<(), String> {
    let backend = parse_backend(&args.backend)?;
    check_flags(args, backend)?;
    super::run_hosts::check_split(args.replicas)?;
    let load_start = Instant::now();
    let module =
        tessel_compiler::hlo_text::parse_module_file(&args.file).map_err(|e| e.to_string())?;
    let device = Device {
        replicas: args.replicas,
        conv_algorithm: args.conv_algorithm,
        threads: ThreadBudget::from_env().map_err(|e| e.to_string())?,
        profile: args.profile,
        trace: args.trace_dir.as_ref().map(|_| TraceOptions::default()),
        ..Device::new(backend)
    };
    let describe = |e| describe(e, &args.file, Verb::Run);
    if let Some(iterations) = args.loop_iterations {
        return super::run_loop::run_loop(args, &module, &device, iterations, load_start);
    }
    let program = compile(&module, &device).map_err(describe)?;
    // The interpreter has no compile step: parsing and verifying is what precedes a run.
    let compile_ms = load_start.elapsed().as_secs_f64() * 1e3;
    let inputs = read_safetensors(&args.inputs).map_err(|e| e.to_string())?;
    let inputs = program.bind(inputs).map_err(describe)?;
    let trace = super::trace_file::TraceRuns::new(args);
    trace
        .start(true, || program.start_trace())
        .map_err(describe)?;
    let outputs = program.run(&inputs).map_err(describe)?;
    trace
        .start(false, || program.start_trace())
        .map_err(describe)?;
    let timing = super::timing::Timing {
        repeat: args.repeat,
        compile_ms,
        iterations: None,
        profile_rows: args.profile_rows,
    };
    timing.print(program.profile(), || {
        program.run(&inputs).map(drop).map_err(describe)
    })?;
    trace.finish(|| program.take_trace())?;
    super::run_hosts::write_outputs(&args.outputs, &outputs.keyed())
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
