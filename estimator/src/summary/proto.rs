//! The parts of TF's `event.proto` and `summary.proto` that scalar summaries use, as prost
//! structs (no `protoc`): `Event { wall_time, step, file_version | summary }` and
//! `Summary { value: [{ tag, simple_value }] }`. Unknown fields (graphs, histograms) are skipped
//! when reading.

use prost::Message;

/// `tensorflow.Event`.
#[derive(Clone, PartialEq, Message)]
pub struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(oneof = "EventKind", tags = "3, 5")]
    pub what: Option<EventKind>,
}

/// The `what` oneof of `tensorflow.Event`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum EventKind {
    /// `"brain.Event:2"` in the first event of a file.
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
}

/// `tensorflow.Summary`.
#[derive(Clone, PartialEq, Message)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// `tensorflow.Summary.Value` with a scalar (`simple_value`).
#[derive(Clone, PartialEq, Message)]
pub struct SummaryValue {
    #[prost(string, tag = "1")]
    pub tag: String,
    #[prost(float, optional, tag = "2")]
    pub simple_value: Option<f32>,
}
