//! The Chrome trace event format (the JSON object form that Perfetto's JSON loader,
//! `chrome://tracing` and TensorBoard's trace viewer open): `traceEvents` holds "M" metadata
//! events naming each process and thread, then one "X" complete event per recorded event with
//! `ts` and `dur` in microseconds, sorted by `ts`.

use super::event::Trace;
use crate::durable::write_durably;
use serde_json::{json, Value};
use std::path::Path;

/// The trace as Chrome trace event JSON: processes are numbered from 1 in the order their
/// tracks come, threads from 1; times are microseconds since recording started.
pub fn chrome_trace_json(trace: &Trace) -> String {
    let mut processes: Vec<&str> = Vec::new();
    let mut metadata = Vec::new();
    let mut events = Vec::new();
    for (t, track) in trace.tracks.iter().enumerate() {
        let pid = match processes.iter().position(|p| *p == track.process) {
            Some(i) => i + 1,
            None => {
                processes.push(&track.process);
                let pid = processes.len();
                metadata.push(meta("process_name", pid, None, &track.process));
                metadata.push(json!({"ph": "M", "name": "process_sort_index", "pid": pid,
                    "args": {"sort_index": pid}}));
                pid
            }
        };
        let tid = t + 1;
        metadata.push(meta("thread_name", pid, Some(tid), &track.thread));
        metadata.push(
            json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
            "args": {"sort_index": tid}}),
        );
        for e in &track.events {
            let mut args = serde_json::Map::new();
            for (k, v) in &e.args {
                args.insert(k.clone(), json!(v));
            }
            events.push((
                e.start_ns,
                json!({
                    "ph": "X",
                    "name": e.name,
                    "cat": e.category,
                    "pid": pid,
                    "tid": tid,
                    "ts": micros(e.start_ns.saturating_sub(trace.origin_ns)),
                    "dur": micros(e.duration_ns),
                    "args": args,
                }),
            ));
        }
    }
    // Stable: events that start together keep their track order (a span before what nests
    // in it, see `event::sort_nested`).
    events.sort_by_key(|(start, _)| *start);
    metadata.extend(events.into_iter().map(|(_, e)| e));
    let doc = json!({
        "traceEvents": Value::Array(metadata),
        "displayTimeUnit": "ms",
        "otherData": {"producer": "tessel", "dropped_events": trace.dropped},
    });
    doc.to_string()
}

/// Writes [`chrome_trace_json`] to `path` durably (see `runtime::durable`), making its
/// directory if needed.
pub fn write_chrome_trace(path: &Path, trace: &Trace) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    write_durably(path, chrome_trace_json(trace).as_bytes())
}

fn meta(name: &str, pid: usize, tid: Option<usize>, value: &str) -> Value {
    let mut m = json!({"ph": "M", "name": name, "pid": pid, "args": {"name": value}});
    if let Some(tid) = tid {
        m["tid"] = json!(tid);
    }
    m
}

/// Nanoseconds as microseconds with nanosecond precision (three decimals).
fn micros(ns: u64) -> Value {
    json!(ns as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{TraceEvent, Track};

    fn event(name: &str, category: &str, start_ns: u64, duration_ns: u64) -> TraceEvent {
        TraceEvent {
            name: name.into(),
            category: category.into(),
            start_ns,
            duration_ns,
            args: Vec::new(),
        }
    }

    fn sample() -> Trace {
        Trace {
            tracks: vec![
                Track {
                    process: "device".into(),
                    thread: "replica 0".into(),
                    events: vec![
                        event("k0_fusion", "kernel", 1_500, 2_000),
                        event("convolution.3", "convolution", 4_000, 10_250),
                    ],
                },
                Track {
                    process: "device".into(),
                    thread: "replica 1".into(),
                    events: vec![event("k0_fusion", "kernel", 1_200, 2_100)],
                },
                Track {
                    process: "host input".into(),
                    thread: "infeed".into(),
                    events: vec![TraceEvent {
                        args: vec![("replica".into(), 1)],
                        ..event("input batch", "host input", 1_000, 300)
                    }],
                },
            ],
            dropped: 3,
            origin_ns: 1_000,
        }
    }

    #[test]
    fn the_json_has_named_tracks_and_sorted_complete_events_in_microseconds() {
        let doc: Value = serde_json::from_str(&chrome_trace_json(&sample())).unwrap();
        assert_eq!(doc["displayTimeUnit"], "ms");
        assert_eq!(doc["otherData"]["dropped_events"], 3);
        let events = doc["traceEvents"].as_array().unwrap();
        let named = |what: &str| -> Vec<(u64, Option<u64>, String)> {
            events
                .iter()
                .filter(|e| e["ph"] == "M" && e["name"] == what)
                .map(|e| {
                    (
                        e["pid"].as_u64().unwrap(),
                        e["tid"].as_u64(),
                        e["args"]["name"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        };
        assert_eq!(
            named("process_name"),
            vec![(1, None, "device".into()), (2, None, "host input".into())]
        );
        assert_eq!(
            named("thread_name"),
            vec![
                (1, Some(1), "replica 0".into()),
                (1, Some(2), "replica 1".into()),
                (2, Some(3), "infeed".into())
            ]
        );
        let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(complete.len(), 4);
        let ts: Vec<f64> = complete.iter().map(|e| e["ts"].as_f64().unwrap()).collect();
        assert_eq!(ts, vec![0.0, 0.2, 0.5, 3.0]);
        let conv = complete.iter().find(|e| e["cat"] == "convolution").unwrap();
        assert_eq!(
            (conv["pid"].as_u64(), conv["tid"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(conv["dur"].as_f64(), Some(10.25));
        assert_eq!(conv["name"], "convolution.3");
        assert_eq!(complete[0]["args"]["replica"], 1);
        // Every metadata event comes before the first complete event.
        let first_x = events.iter().position(|e| e["ph"] == "X").unwrap();
        assert!(events[first_x..].iter().all(|e| e["ph"] == "X"));
    }

    #[test]
    fn merged_traces_share_time_zero_and_tracks() {
        let mut a = sample();
        let mut b = sample();
        b.origin_ns = 500;
        b.tracks[0].events = vec![event("k9_late", "kernel", 900, 10)];
        b.dropped = 1;
        a.merge(b);
        assert_eq!((a.origin_ns, a.dropped, a.tracks.len()), (500, 4, 3));
        let replica0 = a.track("replica 0").unwrap();
        assert_eq!(replica0.events[0].name, "k9_late");
        assert_eq!(replica0.events.len(), 3);
    }

    #[test]
    fn it_is_written_durably_into_a_new_directory() {
        let dir = std::env::temp_dir().join(format!("tessel_chrome_{}", std::process::id()));
        let path = dir.join("a/b/trace.json");
        write_chrome_trace(&path, &sample()).unwrap();
        let back: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(back["traceEvents"].is_array());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
