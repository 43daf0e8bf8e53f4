//! [`LoopProgram`]: a step wrapped in one compiled `while` of K iterations (see
//! `tessel_compiler::training_loop`), run on the device's replicas with each replica's
//! carried state, an infeed source per replica and an outfeed sink. It can be run again and
//! again (an estimator runs it once per `iterations_per_loop`, with the state the previous run
//! returned). A shard_map step is one of its forms: its per-replica body loops on every
//! replica, and [`LoopProgram::run_global`] takes and gives the global arrays.

use super::bind::{bind_inputs, bind_replica_inputs, entry_parameters, Parameter};
use super::compile::build_engine;
use super::device::Device;
use super::engine::Engine;
use super::error::{ReplicaCountError, SessionError};
use super::loop_host::{run_host_loop, Outfeed};
use super::program::Outputs;
use crate::feed::{stacked_source, FeedSource};
use crate::jit::profile::ProfileCounters;
use crate::jit::program::executable::Executable;
use crate::memory::bytes_text;
use crate::replicas::Numbering;
use crate::shard_map::{is_shard_map_module, ShardMap};
use crate::trace::Trace;
use tessel_compiler::ir::{Array, ArrayShape, Module};
use tessel_compiler::training_loop::{loop_signature, wrap_in_training_loop, LoopSignature};

/// Which loop to build around a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopSpec {
    /// K: iterations per run of the loop.
    pub iterations: u64,
    /// The step parameters fed one slice per iteration from the infeed; the others are
    /// carried (their new values are the step's first outputs).
    pub infeed: Vec<u32>,
}

/// How a loop runs.
#[derive(Clone, Debug)]
pub struct LoopOptions {
    /// Values each replica's infeed queue holds ahead of the device.
    pub queue_depth: usize,
    /// After the loop, fail if any carried float state (or per-iteration value) holds a NaN.
    pub nan_check: bool,
    /// The carried values are exactly those the run that gave this token returned
    /// ([`LoopOutputs::carried`], unchanged and in the same order): where the device still
    /// holds them, as a TPU keeps a training loop's variables, they are not written again.
    /// A token of another program or of an earlier run finds nothing held and costs nothing;
    /// a token passed with other values gives a wrong result.
    pub carried_on_device: Option<CarriedOnDevice>,
}

impl Default for LoopOptions {
    fn default() -> Self {
        LoopOptions {
            queue_depth: 2,
            nan_check: false,
            carried_on_device: None,
        }
    }
}

/// Names the carried values a loop run left on its device (see
/// [`LoopOptions::carried_on_device`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CarriedOnDevice(pub(crate) u64);

/// What a loop leaves, per replica. Two are equal when their values are (the token names
/// where a run's state is kept, not what it is).
#[derive(Clone, Debug)]
pub struct LoopOutputs {
    /// `carried[r]`: replica r's final carried parameters, in parameter order.
    pub carried: Vec<Vec<Array>>,
    /// `per_iteration[r]`: replica r's per-iteration outputs, each stacked K deep (empty
    /// when an [`Outfeed::Callback`] took them).
    pub per_iteration: Vec<Vec<Array>>,
    /// What the next run may start from instead of writing `carried` again (`None` where
    /// the device keeps nothing: the interpreter).
    pub on_device: Option<CarriedOnDevice>,
}

impl PartialEq for LoopOutputs {
    fn eq(&self, other: &LoopOutputs) -> bool {
        self.carried == other.carried && self.per_iteration == other.per_iteration
    }
}

impl LoopOutputs {
    /// Replica r's outputs as the step orders them: carried values, then stacked values.
    pub fn replica_outputs(&self, r: usize) -> Vec<Array> {
        let mut v = self.carried[r].clone();
        v.extend(self.per_iteration[r].iter().cloned());
        v
    }
}

/// Loop arguments bound to a loop's step parameters (see [`LoopProgram::bind`]).
#[derive(Clone, Debug)]
pub enum LoopInputs {
    /// `[r]`: replica r's arguments, fed ones stacked K deep.
    PerReplica(Vec<Vec<Array>>),
    /// A shard_map step's global arguments, fed ones stacked K deep.
    Global(Vec<Array>),
}

/// A compiled loop. Build it with [`super::compile_loop`].
pub struct LoopProgram {
    /// The wrapped module (before any optimization).
    module: Module,
    signature: LoopSignature,
    /// The step's parameters (global ones for a shard_map step).
    parameters: Vec<Parameter>,
    engine: Engine,
    /// Bytes of one iteration's fed values on one replica: an infeed queue entry.
    fed_bytes: u64,
    /// For a shard_map step: how global arrays split and assemble.
    sharded: Option<ShardMap>,
    replicas: usize,
    /// Every replica runs in this process, even in an MPI job of several hosts.
    this_host_only: bool,
}

impl LoopProgram {
    pub(crate) fn new(
        step: &Module,
        spec: &LoopSpec,
        device: &Device,
    ) -> Result<LoopProgram, SessionError> {
        let parameters = entry_parameters(step)?;
        let sharded = if is_shard_map_module(step) {
            Some(ShardMap::new(step, device.replicas)?)
        } else {
            None
        };
        let body = match &sharded {
            Some(s) => {
                super::loop_global::check_loopable(s, parameters.len())?;
                s.body()
            }
            None => step,
        };
        let signature = loop_signature(body, spec.iterations, &spec.infeed)?;
        let body_parameters = entry_parameters(body)?;
        let fed_bytes = signature
            .fed
            .iter()
            .filter_map(|&i| body_parameters.get(i as usize))
            .map(|p| {
                p.shape
                    .checked_byte_size()
                    .map_or(u64::MAX, |b| b.max(0) as u64)
            })
            .fold(0u64, u64::saturating_add);
        let module = wrap_in_training_loop(body, spec.iterations, &spec.infeed)?;
        let (engine, _) = build_engine(module.clone(), device)?;
        Ok(LoopProgram {
            module,
            signature,
            parameters,
            engine,
            fed_bytes,
            sharded,
            replicas: device.replicas,
            this_host_only: device.this_host_only,
        })
    }

    /// The wrapped loop module, as the interpreter runs it (before any optimization).
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Which parameters are fed and carried, and how many outputs each iteration gives.
    pub fn signature(&self) -> &LoopSignature {
        &self.signature
    }

    /// The step's parameters, in order (the global ones for a shard_map step).
    pub fn parameters(&self) -> &[Parameter] {
        &self.parameters
    }

    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// Whether the step is a shard_map module (run it with [`LoopProgram::run_global`]).
    pub(crate) fn is_sharded(&self) -> bool {
        self.sharded.is_some()
    }

    /// The JIT's executable (`None` on the interpreter).
    pub fn executable(&self) -> Option<&Executable> {
        self.engine.executable()
    }

    /// The JIT's per-kernel time counters, when the device profiles.
    pub fn profile(&self) -> Option<&ProfileCounters> {
        self.executable().and_then(|exe| exe.profile())
    }

    /// Starts recording this program's runs as a trace (emptying what was recorded); an
    /// error unless its device was made [`with_trace`](super::Device::with_trace).
    pub fn start_trace(&self) -> Result<(), SessionError> {
        self.engine.start_trace()
    }

    /// Stops recording; the events stay until [`Self::take_trace`].
    pub fn stop_trace(&self) -> Result<(), SessionError> {
        self.engine.stop_trace()
    }

    /// The events recorded since [`Self::start_trace`], named; the buffers are empty
    /// afterwards.
    pub fn take_trace(&self) -> Result<Trace, SessionError> {
        self.engine.take_trace()
    }

    /// Binds inputs keyed by step parameter number: a carried parameter's value has its
    /// shape, a fed one is stacked K deep on a new leading axis. For a per-replica step
    /// `"R/I"` overrides `"I"` for replica R; a shard_map step takes global arrays.
    pub fn bind(&self, inputs: Vec<(String, Array)>) -> Result<LoopInputs, SessionError> {
        let k = self.signature.iterations as i64;
        let params: Vec<Parameter> = self
            .parameters
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if !self.signature.fed.contains(&(i as u32)) {
                    return p.clone();
                }
                let mut dims = vec![k];
                dims.extend(p.shape.dims.iter().copied());
                Parameter {
                    name: format!("{}, fed: stacked {k} deep", p.name),
                    shape: ArrayShape::new(p.shape.element_type, &dims),
                }
            })
            .collect();
        Ok(if self.is_sharded() {
            LoopInputs::Global(bind_inputs(&params, inputs)?)
        } else {
            LoopInputs::PerReplica(bind_replica_inputs(&params, inputs, self.replicas)?)
        })
    }

    /// Runs bound inputs: the outputs global for one replica or a shard_map step, else per
    /// replica; each set is the final carried values, then the per-iteration outputs stacked
    /// K deep.
    pub fn run_bound(
        &self,
        inputs: &LoopInputs,
        options: &LoopOptions,
    ) -> Result<Outputs, SessionError> {
        match inputs {
            LoopInputs::Global(args) => Ok(Outputs::Global(self.run_global(args, options)?)),
            LoopInputs::PerReplica(args) => {
                let out = self.run(args.clone(), options)?;
                let mut sets: Vec<Vec<Array>> =
                    (0..self.replicas).map(|r| out.replica_outputs(r)).collect();
                Ok(if sets.len() == 1 {
                    Outputs::Global(sets.remove(0))
                } else {
                    Outputs::PerReplica(sets)
                })
            }
        }
    }

    /// Runs the loop; `args[r]` are replica r's step arguments in parameter order, the fed
    /// ones stacked K deep on a leading axis. For a shard_map step these are the per-replica
    /// pieces.
    pub fn run(
        &self,
        args: Vec<Vec<Array>>,
        options: &LoopOptions,
    ) -> Result<LoopOutputs, SessionError> {
        let k = self.signature.iterations as i64;
        let mut carried = Vec::with_capacity(args.len());
        let mut sources = Vec::with_capacity(args.len());
        for (r, replica_args) in args.into_iter().enumerate() {
            let mut state = Vec::new();
            let mut fed = Vec::new();
            for (i, a) in replica_args.into_iter().enumerate() {
                if self.signature.fed.contains(&(i as u32)) {
                    if a.shape.dims.first() != Some(&k) {
                        return Err(SessionError::on_replica(
                            r,
                            format!(
                                "fed parameter {i} must be stacked {k} deep on a leading axis, got {:?}",
                                a.shape.dims
                            ),
                        ));
                    }
                    fed.push(a);
                } else {
                    state.push(a);
                }
            }
            carried.push(state);
            sources.push(stacked_source(fed).map_err(|m| SessionError::on_replica(r, m))?);
        }
        self.run_fed(carried, sources, Outfeed::Collect, options)
    }

    /// Runs the loop with each replica's carried state (`carried[r]`, in parameter order)
    /// and infeed source (one tuple of the fed parameters per iteration), delivering the
    /// per-iteration outputs to `outfeed`.
    pub fn run_fed(
        &self,
        carried: Vec<Vec<Array>>,
        sources: Vec<FeedSource>,
        outfeed: Outfeed<'_>,
        options: &LoopOptions,
    ) -> Result<LoopOutputs, SessionError> {
        if carried.len() != self.replicas || sources.len() != self.replicas {
            return Err(ReplicaCountError::Arguments {
                expected: self.replicas,
                got: carried.len().max(sources.len()),
            }
            .into());
        }
        // Refused before anything is allocated: the arenas, and the infeed queue's entries
        // (its depth, plus one being filled and one being read).
        let queued = (options.queue_depth as u64).saturating_add(2);
        self.engine.check_memory(
            self.replicas,
            self.fed_bytes.saturating_mul(queued),
            &format!("{queued} infeed batches of {}", bytes_text(self.fed_bytes)),
        )?;
        let names: Vec<&str> = self.parameters.iter().map(|p| p.name.as_str()).collect();
        run_host_loop(
            &self.engine,
            &self.signature,
            &names,
            carried,
            sources,
            outfeed,
            options,
            self.this_host_only,
            // A shard_map step's body is SPMD: one replica of the mesh's devices as partitions.
            if self.sharded.is_some() {
                Numbering::Partitions
            } else {
                Numbering::Replicas
            },
        )
    }

    /// Runs a shard_map step's loop on the entry's global arguments in parameter order (fed
    /// ones stacked K deep on a leading axis); returns the entry's outputs, global: the final
    /// carried values, then the per-iteration outputs stacked K deep.
    pub fn run_global(
        &self,
        global: &[Array],
        options: &LoopOptions,
    ) -> Result<Vec<Array>, SessionError> {
        let sharded = self
            .sharded
            .as_ref()
            .ok_or_else(|| SessionError::run("global arguments are for a shard_map step's loop"))?;
        let loop_args = super::loop_global::split_loop_args(sharded, &self.signature, global)?;
        let out = self.run(loop_args, options)?;
        super::loop_global::assemble_loop_outputs(sharded, &self.signature, &out)
    }
}
