//! One module run one way: on the interpreter or the JIT, as parsed or after the optimization
//! pipeline, on one replica or on a shard_map module's mesh. The session (`tessel run`'s
//! driver) runs the interpreter as parsed and the JIT optimized; the other two ways build the
//! same program by hand from the session's parts.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, Literal, Module};
use tessel_runtime::jit::{compile as jit_compile, JitOptions};
use tessel_runtime::replicas::{evaluate_on_devices, Numbering, ReplicaOptions};
use tessel_runtime::session::{compile, Device, Outputs};
use tessel_runtime::shard_map::{is_shard_map_module, ShardMap};
use tessel_runtime::threads::ThreadBudget;

/// How a module is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The reference interpreter on the module as parsed (the session's interpreter).
    Interpreter,
    /// The interpreter on the module after the optimization pipeline.
    InterpreterOptimized,
    /// The JIT on the module as parsed (its own fusion only).
    Jit,
    /// The session's JIT: legality, the optimization pipeline, Cranelift.
    JitOptimized,
}

pub const MODES: [Mode; 4] = [
    Mode::Interpreter,
    Mode::InterpreterOptimized,
    Mode::Jit,
    Mode::JitOptimized,
];

/// The module's flattened outputs on `inputs` (global arrays for a shard_map module).
pub fn run(
    module: &Module,
    inputs: &[Array],
    replicas: usize,
    mode: Mode,
) -> Result<Vec<Array>, String> {
    match mode {
        Mode::Interpreter => through_session(module, inputs, Device::interpreter(), replicas),
        Mode::JitOptimized => through_session(module, inputs, Device::jit(), replicas),
        Mode::InterpreterOptimized | Mode::Jit => by_hand(module, inputs, replicas, mode),
    }
}

fn through_session(
    module: &Module,
    inputs: &[Array],
    device: Device,
    replicas: usize,
) -> Result<Vec<Array>, String> {
    // The machine is shared: 2 compute threads in all.
    let device = Device {
        threads: ThreadBudget::new(2),
        ..device.with_replicas(replicas)
    };
    let program = compile(module, &device).map_err(|e| e.to_string())?;
    let bound = program
        .bind_ordered(inputs.to_vec())
        .map_err(|e| e.to_string())?;
    match program.run(&bound).map_err(|e| e.to_string())? {
        Outputs::Global(leaves) => Ok(leaves),
        Outputs::PerReplica(mut per) if per.len() == 1 => Ok(per.remove(0)),
        Outputs::PerReplica(_) => Err("a per-replica program has no single set of outputs".into()),
    }
}

fn by_hand(
    module: &Module,
    inputs: &[Array],
    replicas: usize,
    mode: Mode,
) -> Result<Vec<Array>, String> {
    let sharded = if is_shard_map_module(module) {
        Some(ShardMap::new(module, replicas).map_err(|e| e.to_string())?)
    } else if replicas == 1 {
        None
    } else {
        return Err("only shard_map modules run on several replicas here".into());
    };
    let mut body = sharded.as_ref().map_or(module, |s| s.body()).clone();
    if mode == Mode::InterpreterOptimized {
        optimize(&mut body, &CompileOptions::default()).map_err(|e| e.to_string())?;
    }
    let args: Vec<Vec<Literal>> = match &sharded {
        Some(s) => s.split(inputs).map_err(|e| e.to_string())?,
        None => vec![inputs.iter().cloned().map(Literal::Array).collect()],
    };
    // A shard_map body is SPMD: one replica of the mesh's devices as partitions.
    let numbering = Numbering::Partitions;
    let results: Vec<Literal> = match (mode, &sharded) {
        (Mode::InterpreterOptimized, None) => {
            vec![evaluate(&body, &args[0]).map_err(|e| e.to_string())?]
        }
        (Mode::InterpreterOptimized, Some(_)) => {
            evaluate_on_devices(&body, args, numbering, None).map_err(|e| e.to_string())?
        }
        (_, sharded) => {
            let options = JitOptions {
                gemm_threads: 1,
                ..JitOptions::default()
            };
            let exe = jit_compile(&body, &options).map_err(|e| e.to_string())?;
            match sharded {
                None => vec![exe.run(&args[0]).map_err(|e| e.to_string())?],
                Some(_) => {
                    let options = ReplicaOptions {
                        numbering,
                        ..ReplicaOptions::default()
                    };
                    exe.run_replicated_with(args, &options)
                        .map_err(|e| e.to_string())?
                }
            }
        }
    };
    match &sharded {
        Some(s) => s.assemble(&results).map_err(|e| e.to_string()),
        None => Ok(results[0].leaves().into_iter().cloned().collect()),
    }
}
