//! Traces of chosen runs: each kernel and routine a replica ran (infeed dequeues and outfeed
//! enqueues among them) and the host's input work, with start and duration, written in the
//! Chrome trace event format.
//!
//! - `buffer.rs`: a bounded, lock-free event buffer;
//! - [`recorder`]: a program's buffers (per replica, host) and the switch that records;
//! - [`event`]: the named [`Trace`];
//! - [`chrome`]: the Chrome trace event JSON and its durable file.
//!
//! A device records only when made with tracing on (`session::Device::trace`), which compiles
//! the profile marks in (`jit/host/profile.rs`); without it nothing of this runs.

mod buffer;
pub mod chrome;
pub mod event;
pub mod recorder;

pub use chrome::{chrome_trace_json, write_chrome_trace};
pub use event::{Trace, TraceEvent, Track};
pub(crate) use recorder::{enter_replica, now_nanos};
pub use recorder::{TraceOptions, TraceRecorder};
