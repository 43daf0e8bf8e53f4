//! [`Device`]: what a program is compiled for — the backend, the number of replicas, the
//! convolution routines and threads the JIT may use, profiling, and where to write dumps.
//! [`Backend`] is the one notion of backend in the API.

use crate::jit::arena_plan::JitBufferNeeds;
use crate::jit::{ConvAlgorithm, JitOptions, TraceBuffers};
use crate::shard_map::{is_shard_map_module, Mesh};
use crate::threads::ThreadBudget;
use crate::trace::TraceOptions;
use std::path::PathBuf;
use std::sync::Arc;
use tessel_compiler::compile::CompileOptions;
use tessel_compiler::ir::Module;
use tessel_compiler::passes::BufferNeeds;

/// What executes a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The reference interpreter: runs any well-formed module as it is.
    Interpreter,
    /// The device: legality, the optimization pipeline, then the Cranelift JIT.
    Jit,
}

/// The device description a program is compiled for.
#[derive(Clone, Debug)]
pub struct Device {
    pub backend: Backend,
    /// Replicas the program runs on (one thread each).
    pub replicas: usize,
    /// Which convolution routines the JIT may use.
    pub conv_algorithm: ConvAlgorithm,
    /// Compute threads of the whole run; each of N replicas gets `per_replica(N)` of them.
    pub threads: ThreadBudget,
    /// With the JIT: count the time of every kernel and routine call.
    pub profile: bool,
    /// With the JIT: keep trace buffers, so chosen runs can be recorded as a trace
    /// (`Program::start_trace`); compiles the profile marks in.
    pub trace: Option<TraceOptions>,
    /// Write the module after each pass (and the JIT's CLIF, in `jit/`) into this directory.
    pub dump_to: Option<PathBuf>,
    /// Dump only after the passes whose name matches this regular expression.
    pub dump_pass_re: Option<String>,
    /// Run every replica in this process even inside an MPI job of several hosts (see
    /// [`Device::on_this_host`]).
    pub this_host_only: bool,
    /// Optimization passes not to run, by name (`CompileOptions::disabled_passes`).
    pub disabled_passes: Vec<String>,
}

impl Device {
    /// One replica of `backend`, automatic convolution routines, every core, no profile, no
    /// dumps.
    pub fn new(backend: Backend) -> Device {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Device {
            backend,
            replicas: 1,
            conv_algorithm: ConvAlgorithm::Auto,
            threads: ThreadBudget::new(cores),
            profile: false,
            trace: None,
            dump_to: None,
            dump_pass_re: None,
            this_host_only: false,
            disabled_passes: Vec::new(),
        }
    }

    /// The reference interpreter on one replica.
    pub fn interpreter() -> Device {
        Device::new(Backend::Interpreter)
    }

    /// The JIT on one replica.
    pub fn jit() -> Device {
        Device::new(Backend::Jit)
    }

    /// The same device with `replicas` replicas.
    pub fn with_replicas(self, replicas: usize) -> Device {
        Device { replicas, ..self }
    }

    /// The same device run by this process alone, all its replicas here, even inside an MPI
    /// job of several hosts: the other hosts take no part in its runs, which have no
    /// cross-host collective and do not count in the job's run numbering (an evaluation on
    /// the chief only). Without a job of several hosts it changes nothing.
    pub fn on_this_host(self) -> Device {
        Device {
            this_host_only: true,
            ..self
        }
    }

    /// The same device with trace buffers (see [`Device::trace`]).
    pub fn with_trace(self, options: TraceOptions) -> Device {
        Device {
            trace: Some(options),
            ..self
        }
    }

    /// The same device with the replicas `module` runs on: its mesh's device count for a
    /// shard_map module (whose per-replica body is what runs), this device's otherwise.
    pub fn with_replicas_of(self, module: &Module) -> Device {
        match Mesh::of_module(module) {
            Ok(mesh) if is_shard_map_module(module) => self.with_replicas(mesh.device_count()),
            _ => self,
        }
    }

    /// The JIT's options on this device: each replica's GEMM gets its share of the threads,
    /// so N replicas do not oversubscribe the machine.
    pub(crate) fn jit_options(&self) -> JitOptions {
        JitOptions {
            dump_to: self.dump_to.as_ref().map(|d| d.join("jit")),
            gemm_threads: self.threads.per_replica(self.replicas),
            profile: self.profile,
            trace: self.trace.map(|options| TraceBuffers {
                replicas: self.replicas,
                options,
            }),
            conv_algorithm: self.conv_algorithm,
            ..JitOptions::default()
        }
    }

    /// The optimization pipeline's options on this device.
    pub(crate) fn pipeline_options(&self) -> CompileOptions {
        // The JIT lays its arena out with the assignment under its needs: reported and
        // dumped, it is the memory that runs.
        let buffer_needs: Option<Arc<dyn BufferNeeds + Send + Sync>> = match self.backend {
            Backend::Jit => Some(Arc::new(JitBufferNeeds::new(self.jit_options()))),
            Backend::Interpreter => None,
        };
        CompileOptions {
            dump_to: self.dump_to.clone(),
            dump_pass_re: self.dump_pass_re.clone(),
            buffer_needs,
            disabled_passes: self.disabled_passes.clone(),
        }
    }
}
