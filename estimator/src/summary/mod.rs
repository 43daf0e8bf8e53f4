//! TensorBoard event files: `Event` protos, TFRecord-framed, in
//! `events.out.tfevents.<secs>.<hostname>`, read by TensorBoard's `EventAccumulator`.
//!
//! | module | holds |
//! | --- | --- |
//! | `proto` | `Event`, `Summary`, `SummaryValue` (prost structs of TF's `event.proto`/`summary.proto`) |
//! | `writer` | `EventWriter` (`scalar(tag, step, value)`), `read_events` |

pub(crate) mod proto;
pub mod writer;

pub use proto::{Event, EventKind, Summary, SummaryValue};
pub use writer::{read_events, EventWriter, SummaryError};
