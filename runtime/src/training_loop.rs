//! Running a compiled training loop on one or more replicas: the step is wrapped in one
//! `while` (see `tessel_compiler::training_loop`), an infeed thread feeds every replica's queue
//! ahead of the device, an outfeed thread collects the per-iteration values, and an optional
//! NaN check looks at the state after the loop. The loop module runs on the interpreter or,
//! optimized and compiled once, on the Cranelift JIT ([`LoopBackend`]); the host side is the
//! same for both.

use crate::executable::Executable;
use crate::feed::{drain_outfeed, fill_infeed, stack, stacked_source, FeedSource, HostQueues};
use crate::jit::host::infeed_outfeed::with_host_feed;
use crate::jit::JitOptions;
use crate::replicas::ReplicaOptions;
use tessel_compiler::interpreter::{
    evaluate_replicated_with_feed, evaluate_with_feed, EvalError, HostFeed,
};
use tessel_compiler::ir::{Array, ArrayData, Literal, Module};
use tessel_compiler::training_loop::{loop_signature, wrap_in_training_loop, LoopSignature};

/// What runs the loop module.
#[derive(Clone, Debug)]
pub enum LoopBackend {
    /// The reference interpreter, on the wrapped module as it is.
    Interpreter,
    /// The optimizer's pipeline, then the Cranelift JIT with these options.
    Jit(JitOptions),
}

/// The loop module ready to run.
enum Engine {
    Interpreter,
    Jit(Box<Executable>),
}

/// How a loop runs.
#[derive(Clone, Debug)]
pub struct LoopOptions {
    /// Values each replica's infeed queue holds ahead of the device.
    pub queue_depth: usize,
    /// After the loop, fail if any carried float state (or per-iteration value) holds a NaN.
    pub nan_check: bool,
}

impl Default for LoopOptions {
    fn default() -> Self {
        LoopOptions {
            queue_depth: 2,
            nan_check: false,
        }
    }
}

/// What a loop leaves, per replica.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopOutputs {
    /// `carried[r]`: replica r's final carried parameters, in parameter order.
    pub carried: Vec<Vec<Array>>,
    /// `per_iteration[r]`: replica r's per-iteration outputs, each stacked K deep.
    pub per_iteration: Vec<Vec<Array>>,
}

impl LoopOutputs {
    /// Replica r's outputs as the step orders them: carried values, then stacked values.
    pub fn replica_outputs(&self, r: usize) -> Vec<Array> {
        let mut v = self.carried[r].clone();
        v.extend(self.per_iteration[r].iter().cloned());
        v
    }
}

/// A step wrapped for a K-iteration loop, with what the host needs to run it.
pub struct TrainingLoop {
    /// The wrapped module (before any optimization).
    pub module: Module,
    pub signature: LoopSignature,
    /// Names of the step's parameters (for messages).
    pub parameter_names: Vec<String>,
    engine: Engine,
}

impl TrainingLoop {
    /// A loop run by the interpreter.
    pub fn new(step: &Module, iterations: u64, infeed: &[u32]) -> Result<TrainingLoop, String> {
        Self::with_backend(step, iterations, infeed, &LoopBackend::Interpreter)
    }

    /// A loop run by `backend`; for the JIT the wrapped module is optimized and compiled here,
    /// once, and every [`TrainingLoop::run`] reuses the executable.
    pub fn with_backend(
        step: &Module,
        iterations: u64,
        infeed: &[u32],
        backend: &LoopBackend,
    ) -> Result<TrainingLoop, String> {
        let signature = loop_signature(step, iterations, infeed).map_err(|e| e.to_string())?;
        let module = wrap_in_training_loop(step, iterations, infeed).map_err(|e| e.to_string())?;
        let engine = match backend {
            LoopBackend::Interpreter => Engine::Interpreter,
            LoopBackend::Jit(options) => {
                let mut optimized = module.clone();
                tessel_compiler::passes::pipeline::optimize(&mut optimized, &Default::default())
                    .map_err(|e| format!("optimizing the loop: {e}"))?;
                let exe = crate::jit::compile(&optimized, options)
                    .map_err(|e| format!("compiling the loop: {e}"))?;
                Engine::Jit(Box::new(exe))
            }
        };
        let e = step.entry();
        let parameter_names = e
            .parameters()
            .into_iter()
            .map(|p| e.get(p).name.clone())
            .collect();
        Ok(TrainingLoop {
            module,
            signature,
            parameter_names,
            engine,
        })
    }

    /// The compiled program, when the loop runs on the JIT.
    pub fn executable(&self) -> Option<&Executable> {
        match &self.engine {
            Engine::Jit(exe) => Some(exe),
            Engine::Interpreter => None,
        }
    }

    /// Runs the loop on `args.len()` replicas; `args[r]` are replica r's step arguments in
    /// parameter order, the fed ones stacked K deep on a leading axis.
    pub fn run(
        &self,
        args: Vec<Vec<Array>>,
        options: &LoopOptions,
    ) -> Result<LoopOutputs, EvalError> {
        let k = self.signature.iterations as i64;
        let mut carried = Vec::with_capacity(args.len());
        let mut sources = Vec::with_capacity(args.len());
        for (r, replica_args) in args.into_iter().enumerate() {
            let mut state = Vec::new();
            let mut fed = Vec::new();
            for (i, a) in replica_args.into_iter().enumerate() {
                if self.signature.fed.contains(&(i as u32)) {
                    if a.shape.dims.first() != Some(&k) {
                        return Err(replica_error(
                            r,
                            format!(
                                "fed parameter {i} ({}) must be stacked {k} deep on a leading axis, got {:?}",
                                self.parameter_names[i], a.shape.dims
                            ),
                        ));
                    }
                    fed.push(a);
                } else {
                    state.push(Literal::Array(a));
                }
            }
            carried.push(state);
            sources.push(stacked_source(fed).map_err(|m| replica_error(r, m))?);
        }
        self.run_with_sources(carried, sources, options)
    }

    /// Runs the loop with each replica's carried state and infeed source (one tuple of the
    /// fed parameters per iteration).
    pub fn run_with_sources(
        &self,
        carried: Vec<Vec<Literal>>,
        sources: Vec<FeedSource>,
        options: &LoopOptions,
    ) -> Result<LoopOutputs, EvalError> {
        let n = carried.len();
        if n == 0 || sources.len() != n {
            return Err(EvalError::new(format!(
                "a loop needs one state and one infeed source per replica ({} and {} given)",
                n,
                sources.len()
            )));
        }
        let iterations = self.signature.iterations;
        let (queues, rx) = HostQueues::new(n, options.queue_depth);
        let (result, outfed) = std::thread::scope(|s| {
            let queues = &queues;
            let infeed = std::thread::Builder::new()
                .name("infeed".into())
                .spawn_scoped(s, move || fill_infeed(queues, sources, iterations))
                .map_err(|e| EvalError::new(format!("starting the infeed thread: {e}")))?;
            let outfeed = std::thread::Builder::new()
                .name("outfeed".into())
                .spawn_scoped(s, move || drain_outfeed(rx, n))
                .map_err(|e| EvalError::new(format!("starting the outfeed thread: {e}")))?;
            let result = self.execute(carried, queues);
            if let Err(e) = &result {
                // Already done by the evaluator; repeated so the host threads surely stop.
                queues.abort(e.replica.unwrap_or(0), &e.message);
            }
            queues.finish();
            let infeed_ok = infeed.join().is_ok();
            let outfed = outfeed.join().unwrap_or_default();
            if !infeed_ok && result.is_ok() {
                return Err(EvalError::new("the infeed thread panicked"));
            }
            Ok((result, outfed))
        })?;
        let finals = result?;
        let mut out = LoopOutputs {
            carried: Vec::with_capacity(n),
            per_iteration: Vec::with_capacity(n),
        };
        for (r, (state, values)) in finals.into_iter().zip(outfed).enumerate() {
            out.carried
                .push(state.leaves().into_iter().cloned().collect());
            out.per_iteration.push(self.stack_outputs(r, values)?);
        }
        if options.nan_check {
            self.check_nan(&out)?;
        }
        Ok(out)
    }

    /// Runs the loop module on every replica with `feed`; each replica's final loop state.
    fn execute(
        &self,
        carried: Vec<Vec<Literal>>,
        feed: &HostQueues,
    ) -> Result<Vec<Literal>, EvalError> {
        let n = carried.len();
        match &self.engine {
            Engine::Interpreter if n == 1 => {
                let args = carried.into_iter().next().unwrap_or_default();
                evaluate_with_feed(&self.module, &args, feed).map(|l| vec![l])
            }
            Engine::Interpreter => evaluate_replicated_with_feed(&self.module, carried, feed),
            Engine::Jit(exe) if n > 1 => exe
                .run_replicated_fed(carried, feed, &ReplicaOptions::default())
                .map_err(|e| EvalError {
                    replica: e.replica,
                    ..EvalError::new(e.message)
                }),
            Engine::Jit(exe) => {
                let args = carried.into_iter().next().unwrap_or_default();
                with_host_feed(feed, 0, || exe.run(&args))
                    .map(|l| vec![l])
                    .map_err(|e| {
                        // Wake the host threads: nothing will read or send any more.
                        let e = EvalError::new(e.to_string());
                        feed.abort(0, &e.message);
                        e
                    })
            }
        }
    }

    fn stack_outputs(&self, r: usize, values: Vec<Literal>) -> Result<Vec<Array>, EvalError> {
        let m = self.signature.per_iteration_outputs;
        if m == 0 {
            return Ok(Vec::new());
        }
        if values.len() as u64 != self.signature.iterations {
            return Err(replica_error(
                r,
                format!(
                    "the outfeed gave {} values for {} iterations",
                    values.len(),
                    self.signature.iterations
                ),
            ));
        }
        (0..m)
            .map(|j| {
                let parts: Vec<Array> = values
                    .iter()
                    .map(|v| v.leaves().get(j).map(|a| (*a).clone()))
                    .collect::<Option<_>>()
                    .ok_or_else(|| replica_error(r, format!("outfeed value lacks output {j}")))?;
                stack(&parts).map_err(|e| replica_error(r, e))
            })
            .collect()
    }

    /// Fails on the first NaN in carried float state, naming replica and parameter; else on
    /// the first NaN in a per-iteration output, naming its iteration.
    fn check_nan(&self, out: &LoopOutputs) -> Result<(), EvalError> {
        let k = self.signature.iterations;
        for (r, state) in out.carried.iter().enumerate() {
            for (a, &p) in state.iter().zip(&self.signature.carried) {
                if let Some(at) = first_nan(a) {
                    return Err(replica_error(
                        r,
                        format!(
                            "NaN check: carried parameter {p} ({}) holds NaN (first at element {at}) after the loop of {k} iterations",
                            self.parameter_names[p as usize]
                        ),
                    ));
                }
            }
        }
        let c = self.signature.carried.len();
        for (r, stacked) in out.per_iteration.iter().enumerate() {
            for (j, a) in stacked.iter().enumerate() {
                if let Some(at) = first_nan(a) {
                    let per = a.len() / (k as usize).max(1);
                    return Err(replica_error(
                        r,
                        format!(
                            "NaN check: output {} (per-iteration) is NaN first at iteration {}",
                            c + j,
                            at / per.max(1)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn replica_error(r: usize, message: String) -> EvalError {
    EvalError {
        replica: Some(r),
        ..EvalError::new(message)
    }
}

/// The index of the first NaN element of a float array.
fn first_nan(a: &Array) -> Option<usize> {
    match &a.data {
        ArrayData::F32(v) => v.iter().position(|x| x.is_nan()),
        ArrayData::F64(v) => v.iter().position(|x| x.is_nan()),
        ArrayData::F16(v) => v.iter().position(|x| x.is_nan()),
        ArrayData::BF16(v) => v.iter().position(|x| x.is_nan()),
        _ => None,
    }
}
