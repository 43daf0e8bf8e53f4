//! The one compile driver: verify, check legality for the device (the interpreter is the
//! reference and runs any well-formed module), then the optimization pipeline and the JIT —
//! or the interpreter as it is. [`compile`] makes a [`Program`], [`compile_loop`] wraps a
//! step in a compiled loop first and makes a [`LoopProgram`].

use super::bind::entry_parameters;
use super::device::{Backend, Device};
use super::engine::Engine;
use super::error::{ReplicaCountError, SessionError};
use super::loop_program::{LoopProgram, LoopSpec};
use super::program::{Form, Program};
use crate::memory;
use crate::shard_map::{is_shard_map_module, Mesh, ShardMap};
use tessel_compiler::compile::{optimize, CompileReport};
use tessel_compiler::ir::Module;
use tessel_compiler::legality::{check_legality, render};

/// A compiled program with what the compiler reports about it.
pub struct Compiled {
    pub program: Program,
    /// The optimization pipeline's report (JIT only): counts and sizes before and after.
    pub report: Option<CompileReport>,
}

/// Compiles `module` for `device`.
pub fn compile(module: &Module, device: &Device) -> Result<Program, SessionError> {
    compile_with_report(module, device).map(|c| c.program)
}

/// [`compile`], keeping the pipeline's report. A shard_map module is compiled as its
/// per-replica body (what every replica runs).
pub fn compile_with_report(module: &Module, device: &Device) -> Result<Compiled, SessionError> {
    check_for_device(module, device)?;
    let parameters = entry_parameters(module)?;
    let (form, per_replica) = if is_shard_map_module(module) {
        check_mesh(module, device.replicas)?;
        let sharded = ShardMap::new(module, device.replicas)?;
        let body = sharded.body().clone();
        (Form::ShardMap(Box::new(sharded)), body)
    } else if device.replicas == 1 {
        (Form::Single, module.clone())
    } else {
        (Form::PerReplica, module.clone())
    };
    let (engine, report) = build_engine(per_replica, device)?;
    Ok(Compiled {
        program: Program {
            form,
            engine,
            parameters,
            replicas: device.replicas,
            this_host_only: device.this_host_only,
        },
        report,
    })
}

/// Wraps `step` in a `while` loop of `spec.iterations` iterations fed with the parameters
/// `spec.infeed` (see `tessel_compiler::training_loop`) and compiles it for `device`. A
/// shard_map step loops its per-replica body on every replica.
pub fn compile_loop(
    step: &Module,
    spec: &LoopSpec,
    device: &Device,
) -> Result<LoopProgram, SessionError> {
    check_for_device(step, device)?;
    if is_shard_map_module(step) {
        check_mesh(step, device.replicas)?;
    }
    LoopProgram::new(step, spec, device)
}

/// The module optimized as `device` would run it, after the checks [`compile`] makes
/// (verification, memory, and on the JIT the device's legality rules), without compiling
/// it: what an export writes for another runtime (XLA) to compile.
pub fn optimize_for_device(module: &Module, device: &Device) -> Result<Module, SessionError> {
    check_for_device(module, device)?;
    let mut optimized = module.clone();
    optimize(&mut optimized, &device.pipeline_options()).map_err(SessionError::Optimize)?;
    Ok(optimized)
}

/// Verification, the replica count, the memory a value needs, and (on the JIT) the device's
/// legality rules.
fn check_for_device(module: &Module, device: &Device) -> Result<(), SessionError> {
    if device.replicas == 0 {
        return Err(ReplicaCountError::Zero.into());
    }
    memory::check_replicas(device.replicas)?;
    tessel_compiler::verifier::verify(module).map_err(SessionError::Invalid)?;
    // A value larger than the machine's memory can never be computed here: say so before
    // the optimizer or the JIT try to allocate it.
    memory::check_module(module)?;
    // The JIT stands for the device: what a TPU cannot run is rejected. The interpreter is
    // the reference and runs any well-formed module.
    if device.backend == Backend::Jit {
        let diagnostics = check_legality(module);
        if !diagnostics.is_empty() {
            let rendered = render(&diagnostics, module);
            return Err(SessionError::NotLegal {
                diagnostics,
                rendered,
            });
        }
    }
    Ok(())
}

/// A shard_map module runs on exactly its mesh's devices.
fn check_mesh(module: &Module, replicas: usize) -> Result<(), SessionError> {
    let mesh = Mesh::of_module(module)?;
    if mesh.device_count() != replicas {
        return Err(ReplicaCountError::Mesh {
            expected: mesh.device_count(),
            got: replicas,
            mesh: mesh
                .axes
                .iter()
                .map(|(n, s)| format!("\"{n}\"={s}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
        .into());
    }
    Ok(())
}

/// The per-replica module made runnable: as it is for the interpreter; optimized, then
/// compiled, for the JIT.
pub(crate) fn build_engine(
    module: Module,
    device: &Device,
) -> Result<(Engine, Option<CompileReport>), SessionError> {
    match device.backend {
        Backend::Interpreter => Ok((Engine::Interpreter(Box::new(module)), None)),
        Backend::Jit => {
            let mut optimized = module;
            let report = optimize(&mut optimized, &device.pipeline_options())
                .map_err(SessionError::Optimize)?;
            // The report's buffer assignment was made with the JIT's needs
            // (`Device::pipeline_options`): it is the arena's plan, not computed again.
            let exe = crate::jit::compile_with_plan(
                &optimized,
                &device.jit_options(),
                report.buffers.clone(),
            )
            .map_err(SessionError::Compile)?;
            Ok((Engine::Jit(Box::new(exe)), Some(report)))
        }
    }
}
