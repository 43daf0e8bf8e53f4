//! `--trace-dir DIR` for `tessel run`: the recorded runs as a Chrome trace event file,
//! `DIR/<module file stem>.trace.json`, which Perfetto and `chrome://tracing` open.

use super::run::RunArgs;
use super::session_errors::{describe, Verb};
use std::path::{Path, PathBuf};
use tessel_runtime::session::{write_chrome_trace, SessionError, Trace};

/// `--trace-dir`: when to start recording (before the first run, or after it when `--repeat`
/// times the runs after it) and where the trace goes once the runs are done.
pub(super) struct TraceRuns<'a> {
    args: &'a RunArgs,
}

impl<'a> TraceRuns<'a> {
    pub(super) fn new(args: &'a RunArgs) -> Self {
        TraceRuns { args }
    }

    /// Called before the first run (`first`) and before the `--repeat` runs.
    pub(super) fn start(
        &self,
        first: bool,
        start: impl FnOnce() -> Result<(), SessionError>,
    ) -> Result<(), SessionError> {
        match &self.args.trace_dir {
            Some(_) if first == self.args.repeat.is_none() => start(),
            _ => Ok(()),
        }
    }

    /// Writes the trace, if asked for.
    pub(super) fn finish(
        &self,
        take: impl FnOnce() -> Result<Trace, SessionError>,
    ) -> Result<(), String> {
        let Some(dir) = &self.args.trace_dir else {
            return Ok(());
        };
        let trace = take().map_err(|e| describe(e, &self.args.file, Verb::Run))?;
        write_trace(dir, &self.args.file, &trace).map(drop)
    }
}

/// Writes `trace` for `module_file` into `dir` and says where, with its size.
pub fn write_trace(dir: &Path, module_file: &Path, trace: &Trace) -> Result<PathBuf, String> {
    let stem = module_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "module".into());
    let path = dir.join(format!("{stem}.trace.json"));
    write_chrome_trace(&path, trace)
        .map_err(|e| format!("--trace-dir: {}: {e}", path.display()))?;
    let events = trace.events().count();
    let dropped = if trace.dropped > 0 {
        format!(", {} dropped: the trace buffers were full", trace.dropped)
    } else {
        String::new()
    };
    println!("trace: {} ({events} events{dropped})", path.display());
    Ok(path)
}
