//! What a hook sees: the [`RunContext`] of the running call (its global step, the variables'
//! values on the host, stop requests, the log) and each loop's [`RunValues`].

use super::Hook;
use crate::checkpoint::Saver;
use crate::error::EstimatorError;
use crate::estimator::log::Log;
use crate::estimator::loop_runner::LoopRunner;
use crate::estimator::variables_state::HostState;
use crate::model::variables::Variable;
use crate::model::Mode;
use crate::summary::EventWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tessel_compiler::ir::Array;
use tessel_runtime::session::Trace;

/// TF's `SessionRunContext` (and what `MonitoredSession` holds): the running call's state as
/// hooks see it. The variables are the host's copy after the last loop.
pub struct RunContext {
    pub(crate) mode: Mode,
    pub(crate) model_dir: PathBuf,
    /// The step `train` stops at unless a hook stops it earlier (`None` in evaluate and
    /// predict).
    pub(crate) last_step: Option<i64>,
    pub(crate) stop_requested: bool,
    pub(crate) log: Log,
    /// The variables' names, in the order of `state.values`.
    pub(crate) variables: Vec<String>,
    pub(crate) state: HostState,
    /// Training's saver and event file.
    pub(crate) saver: Option<Saver>,
    pub(crate) events: Option<EventWriter>,
    /// Checkpoints written by this call, and the time they took.
    pub(crate) saved: (usize, Duration),
    /// The step of the model_dir's latest checkpoint as this call knows it.
    pub(crate) last_saved_step: i64,
    /// In-process evaluations: the evaluation program (keyed by its step's HLO text), kept
    /// from one evaluation to the next, and the loop programs compiled for them in all.
    pub(crate) eval_runner: Option<(String, LoopRunner)>,
    pub(crate) eval_compiles: usize,
    /// A hook's `before_run` asked for a trace of the next training loop.
    pub(crate) trace_next: bool,
}

impl RunContext {
    pub(crate) fn new(
        mode: Mode,
        model_dir: &Path,
        log: Log,
        variables: &[Variable],
        state: HostState,
    ) -> RunContext {
        let step = state.global_step;
        RunContext {
            mode,
            model_dir: model_dir.to_path_buf(),
            last_step: None,
            stop_requested: false,
            log,
            variables: variables.iter().map(|v| v.name.clone()).collect(),
            state,
            saver: None,
            events: None,
            saved: (0, Duration::ZERO),
            last_saved_step: step,
            eval_runner: None,
            eval_compiles: 0,
            trace_next: false,
        }
    }

    /// TF's `run_context.request_stop()`: the loop ends after the current run (`end` is
    /// still called, and `train` saves its checkpoint there).
    pub fn request_stop(&mut self) {
        self.stop_requested = true;
    }

    pub fn stop_requested(&self) -> bool {
        self.stop_requested
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The global step of the variables the host holds (after the last loop).
    pub fn global_step(&self) -> i64 {
        self.state.global_step
    }

    /// The step `train` stops at unless a hook stops it earlier; `None` outside `train`.
    pub fn last_step(&self) -> Option<i64> {
        self.last_step
    }

    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }

    /// The value of variable `name` after the last loop.
    pub fn variable(&self, name: &str) -> Option<&Array> {
        self.variables
            .iter()
            .position(|v| v == name)
            .and_then(|i| self.state.values.get(i))
    }

    /// Every variable by name, in the step's order.
    pub fn variables(&self) -> impl Iterator<Item = (&str, &Array)> {
        self.variables
            .iter()
            .map(String::as_str)
            .zip(&self.state.values)
    }

    /// A line in the call's log (TF's `logging.info`).
    pub fn info(&mut self, line: impl Into<String>) {
        self.log.info(line);
    }

    pub fn warn(&mut self, line: impl Into<String>) {
        self.log.warn(line);
    }

    /// Training's event file, for summaries.
    pub(crate) fn events(&mut self) -> Option<&mut EventWriter> {
        self.events.as_mut()
    }
}

/// What `before_run` asks of the next loop (TF's `SessionRunArgs`). A loop always outfeeds
/// its values to every hook; what may be asked is where it ends, and a trace of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunArgs {
    end_at_step: Option<i64>,
    trace: bool,
}

impl RunArgs {
    /// The next loop ends at global step `step` at the latest (the loop is shortened; a
    /// shorter loop is compiled once, the first time it is needed).
    pub fn end_at_step(step: i64) -> RunArgs {
        RunArgs {
            end_at_step: Some(step),
            trace: false,
        }
    }

    /// TF's `RunOptions(trace_level=FULL_TRACE)`: record the next training loop as a trace
    /// (each kernel per shard, the infeed and outfeed, the host's input), which every hook's
    /// `after_run` then finds in [`RunValues::trace`].
    pub fn with_trace(self) -> RunArgs {
        RunArgs {
            trace: true,
            ..self
        }
    }
}

/// One loop's values (TF's `SessionRunValues`): the per-step values the device outfed, as
/// means over the shards, and the global step after the loop.
#[derive(Clone, Debug, PartialEq)]
pub struct RunValues {
    pub(crate) first_step: i64,
    pub(crate) global_step: i64,
    pub(crate) steps: u64,
    pub(crate) names: Vec<String>,
    pub(crate) per_step: Vec<Vec<f64>>,
    pub(crate) elapsed: Duration,
    /// The loop's trace, when a hook asked for one ([`RunArgs::with_trace`]).
    pub(crate) trace: Option<Trace>,
}

impl RunValues {
    /// The global step after the loop (in evaluate and predict, the step evaluated).
    pub fn global_step(&self) -> i64 {
        self.global_step
    }

    /// The global step of the loop's first step (training).
    pub fn first_step(&self) -> i64 {
        self.first_step
    }

    /// Steps the loop ran.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The names of the outfed scalars: `loss`, then the `host_call` names (training).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Every step's values, in the order of [`RunValues::names`].
    pub fn per_step(&self) -> &[Vec<f64>] {
        &self.per_step
    }

    /// The value `name` at each step of the loop.
    pub fn values(&self, name: &str) -> Option<Vec<f64>> {
        let i = self.names.iter().position(|n| n == name)?;
        Some(
            self.per_step
                .iter()
                .filter_map(|s| s.get(i).copied())
                .collect(),
        )
    }

    /// The loss of each step of the loop.
    pub fn loss(&self) -> Vec<f64> {
        self.values("loss").unwrap_or_default()
    }

    /// The device time of the loop.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The loop's trace (TF's `run_metadata.step_stats`), when a hook asked for one.
    pub fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref()
    }
}

/// The hooks of one call, run in order at each moment.
pub(crate) struct HookList<'a> {
    hooks: Vec<Box<dyn Hook + 'a>>,
}

impl<'a> HookList<'a> {
    pub(crate) fn new(hooks: Vec<Box<dyn Hook + 'a>>) -> HookList<'a> {
        HookList { hooks }
    }

    pub(crate) fn begin(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        self.hooks.iter_mut().try_for_each(|h| h.begin(ctx))
    }

    pub(crate) fn after_create_session(
        &mut self,
        ctx: &mut RunContext,
    ) -> Result<(), EstimatorError> {
        self.hooks
            .iter_mut()
            .try_for_each(|h| h.after_create_session(ctx))
    }

    /// The earliest step a hook wants the next loop to end at.
    pub(crate) fn before_run(
        &mut self,
        ctx: &mut RunContext,
    ) -> Result<Option<i64>, EstimatorError> {
        let mut end = None::<i64>;
        for h in &mut self.hooks {
            let args = h.before_run(ctx)?;
            if let Some(step) = args.end_at_step {
                end = Some(end.map_or(step, |e| e.min(step)));
            }
            ctx.trace_next |= args.trace;
        }
        Ok(end)
    }

    pub(crate) fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        self.hooks
            .iter_mut()
            .try_for_each(|h| h.after_run(ctx, values))
    }

    pub(crate) fn end(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        self.hooks.iter_mut().try_for_each(|h| h.end(ctx))
    }
}
