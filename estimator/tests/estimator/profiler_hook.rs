//! TF's `ProfilerHook`: traces of chosen training loops, written as Chrome trace event files
//! (and gzipped where TensorBoard's profile plugin looks), without changing what trains.

use crate::support::tiny::{self, config, estimator, temp_dir};
use serde_json::Value;
use std::io::Read;
use std::path::Path;
use tessel_estimator::hooks::ProfilerHook;
use tessel_estimator::Params;

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The "X" events of `doc`, and the names of its threads.
fn complete_events(doc: &Value) -> (Vec<&Value>, Vec<String>) {
    let events = doc["traceEvents"].as_array().unwrap();
    let threads = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    (events.iter().filter(|e| e["ph"] == "X").collect(), threads)
}

fn program_runs(events: &[&Value]) -> usize {
    events.iter().filter(|e| e["cat"] == "program").count()
}

#[test]
fn the_profiler_hook_traces_the_first_loop_and_every_save_steps_after() {
    let dir = temp_dir("profiler_every");
    let traces = dir.as_path().join("traces");
    let hook = ProfilerHook::new(20, &traces);
    let traced = estimator(config(&dir, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(40),
            None,
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap();
    // Loops begin at 0, 5, ..., 35: the one at 0 is traced, then the first at or past 20.
    let mut names: Vec<String> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["plugins", "timeline-25.json", "timeline-5.json"]);
    assert!(traced
        .log
        .iter()
        .any(|l| l.starts_with("Saved trace to ") && l.ends_with("timeline-5.json")));
    let doc = read_json(&traces.join("timeline-5.json"));
    assert_eq!(doc["displayTimeUnit"], "ms");
    let (events, threads) = complete_events(&doc);
    assert_eq!(threads, ["replica 0", "infeed"]);
    assert_eq!(program_runs(&events), 1);
    // A loop of 5 steps: 5 infeed dequeues, 5 outfeed enqueues, 5 batches of host input.
    for (category, n) in [("infeed", 5), ("outfeed", 5), ("host input", 5)] {
        let got = events.iter().filter(|e| e["cat"] == category).count();
        assert_eq!(got, n, "{category}");
    }
    let ts: Vec<f64> = events.iter().map(|e| e["ts"].as_f64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));

    // TensorBoard's copy: plugins/profile/<run>/<host>.trace.json.gz, the same JSON.
    let run_dir = traces.join("plugins/profile/step_5");
    let gz = std::fs::read_dir(&run_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(gz.to_string_lossy().ends_with(".trace.json.gz"), "{gz:?}");
    let mut json = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
        .read_to_string(&mut json)
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), doc);

    // Tracing changes nothing that trains.
    let plain_dir = temp_dir("profiler_plain");
    let plain = estimator(config(&plain_dir, 5, 1000), Params::new())
        .train(tiny::train_input, Some(40), None)
        .unwrap();
    assert_eq!(plain.final_loss, traced.final_loss);
}

#[test]
fn consecutive_loops_go_into_one_trace_and_the_end_writes_a_short_one() {
    let dir = temp_dir("profiler_loops");
    let hook = ProfilerHook::new(15, dir.as_path())
        .with_loops(2)
        .starting_at_step(5);
    estimator(config(&dir, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(30),
            None,
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap();
    // Loops at 5 and 10 in one trace (ending at 15); the next begins at 20 and training ends
    // at 30 with both of its loops, at 20 and 25.
    for (file, runs) in [("timeline-15.json", 2), ("timeline-30.json", 2)] {
        let doc = read_json(&dir.as_path().join(file));
        assert_eq!(program_runs(&complete_events(&doc).0), runs, "{file}");
    }

    let cut = temp_dir("profiler_cut");
    let hook = ProfilerHook::new(100, cut.as_path())
        .with_loops(3)
        .starting_at_step(20);
    estimator(config(&cut, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(30),
            None,
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap();
    // Only the loops at 20 and 25 were left: written at the end, at step 30.
    let doc = read_json(&cut.as_path().join("timeline-30.json"));
    assert_eq!(program_runs(&complete_events(&doc).0), 2);
}
