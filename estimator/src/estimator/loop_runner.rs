//! Runs a traced step as compiled loops of `iterations_per_loop` steps.
//!
//! The step is compiled once per loop length: the full `iterations_per_loop`, and the one
//! shorter loop that stops training exactly at `max_steps`. Each run takes the shards' carried
//! state and returns it; the fed batches come from one infeed source per shard, and each step's outfed values
//! reach a callback as they arrive.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use tessel_compiler::ir::{Array, Module};
use tessel_runtime::feed::FeedSource;
use tessel_runtime::session::{
    compile_loop, CarriedOnDevice, Device, LoopOptions, LoopProgram, LoopSpec, Outfeed,
    SessionError, Trace, TraceOptions,
};

pub struct LoopRunner {
    step: Module,
    fed: Vec<u32>,
    device: Device,
    programs: HashMap<u64, LoopProgram>,
    /// Time spent compiling loops so far.
    pub compile_time: Duration,
}

/// Called with `(shard, iteration within the loop, outfed values)` on the outfeed thread.
pub type StepCallback<'a> = &'a mut (dyn FnMut(usize, u64, Vec<Array>) + Send);

impl LoopRunner {
    /// `fed`: the step's parameters read from the infeed (features and labels); every other
    /// parameter is carried state.
    pub fn new(step: Module, fed: Vec<u32>, device: Device) -> LoopRunner {
        super::dump::dump_step(&step);
        LoopRunner {
            step,
            fed,
            device,
            programs: HashMap::new(),
            compile_time: Duration::ZERO,
        }
    }

    /// Compiles the loop of `iterations` steps if it is not compiled yet.
    pub fn prepare(&mut self, iterations: u64) -> Result<(), SessionError> {
        if !self.programs.contains_key(&iterations) {
            let start = Instant::now();
            let spec = LoopSpec {
                iterations,
                infeed: self.fed.clone(),
            };
            let program = compile_loop(&self.step, &spec, &self.device)?;
            self.compile_time += start.elapsed();
            self.programs.insert(iterations, program);
        }
        Ok(())
    }

    /// Loop programs compiled so far (one per loop length).
    pub fn compiled(&self) -> usize {
        self.programs.len()
    }

    /// Runs one loop of `iterations` steps on every shard from `state[shard]`; returns the
    /// carried state after it.
    pub fn run(
        &mut self,
        iterations: u64,
        state: Vec<Vec<Array>>,
        sources: Vec<FeedSource>,
        on_step: StepCallback<'_>,
    ) -> Result<Vec<Vec<Array>>, SessionError> {
        Ok(self.run_kept(iterations, state, None, sources, on_step)?.0)
    }

    /// [`LoopRunner::run`] from a state the device may still hold: `on_device` is the token
    /// of the run that returned `state` (unchanged since), and the returned token names the
    /// state returned now (see `LoopOptions::carried_on_device`).
    pub fn run_kept(
        &mut self,
        iterations: u64,
        state: Vec<Vec<Array>>,
        on_device: Option<CarriedOnDevice>,
        sources: Vec<FeedSource>,
        on_step: StepCallback<'_>,
    ) -> Result<(Vec<Vec<Array>>, Option<CarriedOnDevice>), SessionError> {
        self.prepare(iterations)?;
        let program = &self.programs[&iterations];
        let options = LoopOptions {
            queue_depth: 2,
            nan_check: false,
            carried_on_device: on_device,
        };
        let out = program.run_fed(state, sources, Outfeed::Callback(on_step), &options)?;
        Ok((out.carried, out.on_device))
    }

    /// Compiles loops with trace buffers from now on (those compiled without are dropped, to
    /// be compiled again when needed).
    pub fn enable_trace(&mut self) {
        if self.device.trace.is_none() {
            self.device.trace = Some(TraceOptions::default());
            self.programs.clear();
        }
    }

    /// [`LoopRunner::run`], recorded as a trace. The loops are compiled with trace buffers
    /// from the first traced run on (loops compiled without them are compiled again, once).
    pub fn run_traced(
        &mut self,
        iterations: u64,
        state: Vec<Vec<Array>>,
        sources: Vec<FeedSource>,
        on_step: StepCallback<'_>,
    ) -> Result<(Vec<Vec<Array>>, Trace), SessionError> {
        self.enable_trace();
        self.prepare(iterations)?;
        self.programs[&iterations].start_trace()?;
        let carried = self.run(iterations, state, sources, on_step);
        let program = &self.programs[&iterations];
        program.stop_trace()?;
        let trace = program.take_trace()?;
        Ok((carried?, trace))
    }
}
