//! Recording traces of chosen runs of a program compiled for a device with trace buffers
//! (`Device::with_trace`): start, stop, take the events (see `crate::trace`). `Program` and
//! `LoopProgram` delegate here; a loop's host input work is timed by wrapping its infeed
//! sources ([`time_host_input`]).

use super::engine::Engine;
use super::error::SessionError;
use crate::feed::FeedSource;
use crate::trace::{now_nanos, Trace, TraceRecorder};
use std::sync::Arc;

impl Engine {
    /// The program's trace recorder, or why it has none.
    pub(crate) fn recorder(&self) -> Result<&Arc<TraceRecorder>, SessionError> {
        self.executable()
            .and_then(|exe| exe.profile())
            .and_then(|p| p.recorder())
            .ok_or(SessionError::NoTraceBuffers)
    }

    /// Empties the trace buffers and records the runs from now on.
    pub(crate) fn start_trace(&self) -> Result<(), SessionError> {
        self.recorder()?.start();
        Ok(())
    }

    /// Stops recording; the events stay until taken.
    pub(crate) fn stop_trace(&self) -> Result<(), SessionError> {
        self.recorder()?.stop();
        Ok(())
    }

    /// The events recorded since [`Engine::start_trace`], named; the buffers are empty
    /// afterwards (recording goes on if it was on).
    pub(crate) fn take_trace(&self) -> Result<Trace, SessionError> {
        self.recorder()?;
        self.executable()
            .and_then(|exe| exe.profile())
            .and_then(|p| p.take_trace())
            .ok_or(SessionError::NoTraceBuffers)
    }
}

/// `sources` as they are, or, while `engine` records, each timed: the time the infeed thread
/// spends getting replica r's next value from its source (the input pipeline's work, or its
/// wait for a prefetching pipeline) becomes a host input event.
pub(crate) fn time_host_input(engine: &Engine, sources: Vec<FeedSource>) -> Vec<FeedSource> {
    let Ok(recorder) = engine.recorder() else {
        return sources;
    };
    if !recorder.is_recording() {
        return sources;
    }
    sources
        .into_iter()
        .enumerate()
        .map(|(r, mut source)| {
            let recorder = recorder.clone();
            let timed: FeedSource = Box::new(std::iter::from_fn(move || {
                let start = now_nanos();
                let item = source.next();
                recorder.record_host_input(r, start, now_nanos());
                item
            }));
            timed
        })
        .collect()
}
