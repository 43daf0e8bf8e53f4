//! TF's `ProfilerHook(save_steps, output_dir)`: a trace of chosen training loops, each
//! kernel per shard with its start and duration, the infeed dequeues and outfeed enqueues, and
//! the host's input work, in the Chrome trace event format (Perfetto, `chrome://tracing`).

use super::{Hook, RunArgs, RunContext, RunValues};
use crate::error::EstimatorError;
use std::io::Write;
use std::path::{Path, PathBuf};
use tessel_runtime::durable::write_durably;
use tessel_runtime::session::{chrome_trace_json, write_chrome_trace, Trace};

/// TF's `ProfilerHook`: traces the first loop and then the first loop at or past every
/// `save_steps` steps after the last trace began, `loops` consecutive loops per trace (1 by
/// default). Each trace is written as `output_dir/timeline-<global step>.json` (TF's name, the
/// step after its last loop) and, for TensorBoard's profile plugin, as
/// `output_dir/plugins/profile/step_<global step>/<host>.trace.json.gz`.
pub struct ProfilerHook {
    save_steps: i64,
    output_dir: PathBuf,
    loops: usize,
    /// The step at or past which the next trace begins (`None`: at the first loop).
    next: Option<i64>,
    /// The trace being gathered: its loops so far, and the step it began at.
    pending: Option<(Trace, usize, i64)>,
    written: Vec<PathBuf>,
}

impl ProfilerHook {
    /// `save_steps` of 0 is taken as 1.
    pub fn new(save_steps: u64, output_dir: impl Into<PathBuf>) -> ProfilerHook {
        ProfilerHook {
            save_steps: i64::try_from(save_steps.max(1)).unwrap_or(i64::MAX),
            output_dir: output_dir.into(),
            loops: 1,
            next: None,
            pending: None,
            written: Vec::new(),
        }
    }

    /// Gathers `loops` consecutive loops into each trace (at least 1).
    pub fn with_loops(self, loops: usize) -> ProfilerHook {
        ProfilerHook {
            loops: loops.max(1),
            ..self
        }
    }

    /// Begins the first trace with the first loop at or past global step `step` (not with
    /// the first loop, whose run also allocates the device's buffers).
    pub fn starting_at_step(self, step: i64) -> ProfilerHook {
        ProfilerHook {
            next: Some(step),
            ..self
        }
    }

    /// The `timeline-*.json` files written so far.
    pub fn written(&self) -> &[PathBuf] {
        &self.written
    }

    fn write(
        &mut self,
        trace: &Trace,
        step: i64,
        ctx: &mut RunContext,
    ) -> Result<(), EstimatorError> {
        let path = self.output_dir.join(format!("timeline-{step}.json"));
        let failed = |what: &Path, e: std::io::Error| EstimatorError::Write {
            what: format!("the trace {}", what.display()),
            message: e.to_string(),
        };
        write_chrome_trace(&path, trace).map_err(|e| failed(&path, e))?;
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        let tensorboard = self
            .output_dir
            .join("plugins/profile")
            .join(format!("step_{step}"))
            .join(format!("{host}.trace.json.gz"));
        write_gzipped(&tensorboard, chrome_trace_json(trace).as_bytes())
            .map_err(|e| failed(&tensorboard, e))?;
        let dropped = match trace.dropped {
            0 => String::new(),
            n => format!(" ({n} events dropped: the trace buffers were full)"),
        };
        ctx.info(format!("Saved trace to {}{dropped}", path.display()));
        self.written.push(path);
        Ok(())
    }
}

fn write_gzipped(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes)?;
    write_durably(path, &gz.finish()?)
}

impl Hook for ProfilerHook {
    fn before_run(&mut self, ctx: &mut RunContext) -> Result<RunArgs, EstimatorError> {
        let due = self.pending.is_some() || self.next.is_none_or(|n| ctx.global_step() >= n);
        Ok(if due {
            RunArgs::default().with_trace()
        } else {
            RunArgs::default()
        })
    }

    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        let Some(trace) = values.trace() else {
            return Ok(());
        };
        let (mut gathered, loops, began) =
            self.pending
                .take()
                .unwrap_or((Trace::default(), 0, values.first_step() - 1));
        gathered.merge(trace.clone());
        if loops + 1 < self.loops {
            self.pending = Some((gathered, loops + 1, began));
            return Ok(());
        }
        self.next = Some(began.saturating_add(self.save_steps));
        self.write(&gathered, values.global_step(), ctx)
    }

    /// A trace cut short by the end of training is written with the loops it has.
    fn end(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        match self.pending.take() {
            Some((trace, _, _)) => self.write(&trace, ctx.global_step(), ctx),
            None => Ok(()),
        }
    }
}
