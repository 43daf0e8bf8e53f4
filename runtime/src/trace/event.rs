//! [`Trace`]: what a recording holds, named — tracks (a replica's thread, the host's infeed
//! thread) of timed events, ready to write ([`super::chrome`]).

use super::buffer::RawEvent;
use super::recorder::{RawTrace, HOST_INPUT, PROGRAM_RUN};

/// One timed event on a track.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    /// The kernel's symbol or the instruction a routine computes; `program run` for a whole
    /// run of the program (its kernels nest in it); `input batch` on the host.
    pub name: String,
    /// `kernel`, a routine's opcode (`convolution`, `infeed`, `outfeed`, ...), `program` or
    /// `host input`.
    pub category: String,
    /// Nanoseconds on the process's monotonic clock.
    pub start_ns: u64,
    pub duration_ns: u64,
    /// Numbers that say more (the replica a host batch was for).
    pub args: Vec<(String, u64)>,
}

/// The events of one thread, in the order they started.
#[derive(Clone, Debug, PartialEq)]
pub struct Track {
    /// The group the track is shown in: `device` or `host input`.
    pub process: String,
    /// The thread: `replica 0`, ..., `infeed`.
    pub thread: String,
    pub events: Vec<TraceEvent>,
}

/// A recorded trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    pub tracks: Vec<Track>,
    /// Events lost because a track's buffer was full (see `TraceOptions::events_per_track`).
    pub dropped: u64,
    /// When recording started, on the events' clock: the trace's time zero.
    pub origin_ns: u64,
}

/// A profile slot's name and kind.
pub(crate) type SlotName<'a> = (&'a str, &'a str);

impl Trace {
    /// Names the events of `raw`: replica events by their profile slot (`slot(i)`).
    pub(crate) fn from_raw<'a>(
        raw: RawTrace,
        slot: impl Fn(usize) -> Option<SlotName<'a>>,
    ) -> Trace {
        let named =
            |e: &RawEvent, name: &str, category: &str, args: Vec<(String, u64)>| TraceEvent {
                name: name.to_string(),
                category: category.to_string(),
                start_ns: e.start_ns,
                duration_ns: e.duration_ns,
                args,
            };
        let mut tracks: Vec<Track> = raw
            .replicas
            .iter()
            .enumerate()
            .map(|(r, events)| Track {
                process: "device".into(),
                thread: format!("replica {r}"),
                events: events
                    .iter()
                    .map(|e| {
                        let (name, kind) = if e.id == PROGRAM_RUN {
                            ("program run", "program")
                        } else {
                            slot(e.id as usize - 1).unwrap_or(("unknown", "unknown"))
                        };
                        named(e, name, kind, Vec::new())
                    })
                    .collect(),
            })
            .collect();
        tracks.push(Track {
            process: "host input".into(),
            thread: "infeed".into(),
            events: raw
                .host_input
                .iter()
                .filter(|e| e.id == HOST_INPUT)
                .map(|e| {
                    named(
                        e,
                        "input batch",
                        "host input",
                        vec![("replica".into(), u64::from(e.arg))],
                    )
                })
                .collect(),
        });
        for t in &mut tracks {
            sort_nested(&mut t.events);
        }
        Trace {
            tracks,
            dropped: raw.dropped,
            origin_ns: raw.origin_ns,
        }
    }

    /// The kernels and routines of `thread`'s track, without its whole-program spans.
    pub fn kernels<'a>(&'a self, thread: &str) -> impl Iterator<Item = &'a TraceEvent> + 'a {
        self.track(thread)
            .into_iter()
            .flat_map(|t| t.events.iter())
            .filter(|e| e.category != "program")
    }

    /// The track of `thread` (`replica 0`, `infeed`), if recorded.
    pub fn track(&self, thread: &str) -> Option<&Track> {
        self.tracks.iter().find(|t| t.thread == thread)
    }

    /// Every event of every track.
    pub fn events(&self) -> impl Iterator<Item = &TraceEvent> {
        self.tracks.iter().flat_map(|t| t.events.iter())
    }

    /// Adds `other`'s tracks to this trace (events of a track of the same name go together),
    /// e.g. the traces of two programs of one run; time zero is the earlier of the two.
    pub fn merge(&mut self, other: Trace) {
        if self.tracks.is_empty() || other.origin_ns < self.origin_ns {
            self.origin_ns = other.origin_ns;
        }
        for t in other.tracks {
            match self
                .tracks
                .iter_mut()
                .find(|m| m.process == t.process && m.thread == t.thread)
            {
                Some(m) => {
                    m.events.extend(t.events);
                    sort_nested(&mut m.events);
                }
                None => self.tracks.push(t),
            }
        }
        self.dropped += other.dropped;
    }
}

/// By start; of events that start together the longer first, so a span comes before the
/// events nested in it (as trace viewers expect).
pub(crate) fn sort_nested(events: &mut [TraceEvent]) {
    events.sort_by_key(|e| (e.start_ns, std::cmp::Reverse(e.duration_ns)));
}
