//! The compiler's driver: the default pass pipeline, then buffer assignment, with the dump
//! directory written along the way. The passes know nothing of dumps; the dumper reads the
//! passes' records, and this module joins the two.

use crate::dump::{DumpError, Dumper};
use crate::ir::Module;
use crate::passes::buffer_assignment::{
    assign_buffers_with, BufferAssignment, BufferNeeds, ReportNeeds,
};
use crate::passes::pipeline::{default_pipeline, PassRecord};
use crate::passes::stats::{fusion_count, kernel_count};
use crate::passes::PassError;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why [`optimize`] failed: a pass (or the verifier after it), or the dump directory.
#[derive(Debug, Error)]
pub enum CompileError {
    #[error(transparent)]
    Pass(#[from] PassError),
    #[error("dump: {0}")]
    Dump(#[from] DumpError),
}

/// What `tessel compile` and the library callers ask of the pipeline.
#[derive(Clone, Default)]
pub struct CompileOptions {
    /// Write `module_NNNN.NAME.*` dump files into this directory.
    pub dump_to: Option<PathBuf>,
    /// Dump only after passes whose name matches this regular expression.
    pub dump_pass_re: Option<String>,
    /// The needs of the code generator that will run the module: the buffer assignment
    /// reported and dumped is made with them (the JIT's make it the arena that runs). `None`:
    /// the compiler's own report needs ([`ReportNeeds`]).
    pub buffer_needs: Option<Arc<dyn BufferNeeds + Send + Sync>>,
    /// Passes of the pipeline not to run, by name (XLA's `--xla_disable_hlo_passes`), e.g.
    /// `all-reduce-combiner`. A name the pipeline does not have is an error.
    pub disabled_passes: Vec<String>,
}

impl std::fmt::Debug for CompileOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileOptions")
            .field("dump_to", &self.dump_to)
            .field("dump_pass_re", &self.dump_pass_re)
            .field("disabled_passes", &self.disabled_passes)
            .field(
                "buffer_needs",
                &self.buffer_needs.as_ref().map(|_| "custom"),
            )
            .finish()
    }
}

/// What the pipeline did and what the optimized module needs.
#[derive(Clone, Debug)]
pub struct CompileReport {
    pub compile_time: Duration,
    pub instructions_before: usize,
    pub instructions_after: usize,
    pub kernels_before: usize,
    pub kernels_after: usize,
    pub fusions: usize,
    pub passes: Vec<PassRecord>,
    pub buffers: BufferAssignment,
}

impl CompileReport {
    /// `key: value` lines as `tessel compile` prints them.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut lines = vec![
            format!("compile_ms: {:.3}", self.compile_time.as_secs_f64() * 1e3),
            format!("instructions_before: {}", self.instructions_before),
            format!("instructions_after: {}", self.instructions_after),
            format!("fusions: {}", self.fusions),
            format!("kernels_before: {}", self.kernels_before),
            format!("kernels: {}", self.kernels_after),
            format!("buffers_total_bytes: {}", self.buffers.total_bytes),
            format!("buffers_peak_bytes: {}", self.buffers.peak_bytes),
            format!(
                "buffers_lower_bound_bytes: {}",
                self.buffers.lower_bound_bytes
            ),
            format!("passes_run: {}", self.passes.len()),
            format!(
                "passes_changed: {}",
                self.passes.iter().filter(|p| p.changed).count()
            ),
        ];
        lines.extend(
            self.pass_times()
                .into_iter()
                .map(|(pass, time)| format!("pass_ms.{pass}: {:.3}", time.as_secs_f64() * 1e3)),
        );
        lines
    }

    /// Time spent in each pass, summed over its runs (a fixed point runs a pass several
    /// times), in the order the passes first ran.
    pub fn pass_times(&self) -> Vec<(String, Duration)> {
        let mut times: Vec<(String, Duration)> = Vec::new();
        for record in &self.passes {
            match times.iter_mut().find(|(pass, _)| *pass == record.pass) {
                Some((_, time)) => *time += record.duration,
                None => times.push((record.pass.clone(), record.duration)),
            }
        }
        times
    }
}

/// Optimizes `m` in place with the default pipeline, assigns buffers, and writes dumps when
/// `opts.dump_to` is set.
pub fn optimize(m: &mut Module, opts: &CompileOptions) -> Result<CompileReport, CompileError> {
    let start = Instant::now();
    let instructions_before = m.instruction_count();
    let kernels_before = kernel_count(m);
    let mut dumper = match &opts.dump_to {
        Some(dir) => Some(Dumper::new(dir, m, opts.dump_pass_re.as_deref())?),
        None => None,
    };
    let mut pipeline = default_pipeline();
    pipeline.disable(&opts.disabled_passes)?;
    let mut dump_error: Option<DumpError> = None;
    let passes = {
        let mut hook = |r: &PassRecord, m: &Module| {
            if let Some(d) = dumper.as_mut() {
                if let Err(e) = d.after_pass(r, m) {
                    dump_error.get_or_insert(e);
                }
            }
        };
        pipeline.run(m, Some(&mut hook))?
    };
    if let Some(e) = dump_error {
        return Err(e.into());
    }
    let buffers = match &opts.buffer_needs {
        Some(needs) => assign_buffers_with(m, needs.as_ref()),
        None => assign_buffers_with(m, &ReportNeeds),
    };
    let report = CompileReport {
        compile_time: start.elapsed(),
        instructions_before,
        instructions_after: m.instruction_count(),
        kernels_before,
        kernels_after: kernel_count(m),
        fusions: fusion_count(m),
        passes,
        buffers,
    };
    if let Some(d) = dumper.as_mut() {
        d.finish(m, &report.buffers)?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo_text::parse_module;

    /// Each pass appears once, at its first run, with the time of all its runs.
    #[test]
    fn pass_times_sum_each_pass_over_its_runs() {
        let text = "HloModule m\n\nENTRY e {\n  a = f32[4] parameter(0)\n  \
             c = f32[] constant(2)\n  d = f32[] add(c, c)\n  \
             b = f32[4] broadcast(d), dimensions={}\n  \
             m = f32[4] multiply(a, b)\n  ROOT n = f32[4] negate(m)\n}\n";
        let mut m = parse_module(text, None).unwrap();
        let report = optimize(&mut m, &CompileOptions::default()).unwrap();
        let times = report.pass_times();
        let mut first_runs: Vec<&str> = Vec::new();
        for record in &report.passes {
            if !first_runs.contains(&record.pass.as_str()) {
                first_runs.push(&record.pass);
            }
        }
        let names: Vec<&str> = times.iter().map(|(pass, _)| pass.as_str()).collect();
        assert_eq!(names, first_runs);
        // Folding `d` makes the fixed point run the simplifier again.
        let simplifier_runs = report
            .passes
            .iter()
            .filter(|r| r.pass == "algebraic-simplifier")
            .count();
        assert!(simplifier_runs > 1, "{:?}", report.passes);
        for (pass, time) in &times {
            let runs: Duration = report
                .passes
                .iter()
                .filter(|r| &r.pass == pass)
                .map(|r| r.duration)
                .sum();
            assert_eq!(*time, runs, "{pass}");
        }
        let lines = report.summary_lines();
        assert!(
            lines.iter().any(|l| l.starts_with("pass_ms.fusion: ")),
            "{lines:?}"
        );
    }
}
