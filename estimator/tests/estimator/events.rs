//! What a TF user looks at: the event files in model_dir (loss at save_summary_steps,
//! global_step/sec, examples/sec, host_call scalars; eval results under model_dir/eval),
//! read back with `summary::read_events`, and TF's log lines, kept by `quiet()`.

use crate::support::tiny::{self, config, estimator, files, temp_dir};
use std::collections::BTreeMap;
use std::path::Path;
use tessel_estimator::summary::{read_events, EventKind};
use tessel_estimator::Params;

/// Every scalar of every event file in `dir`: tag -> [(step, value)], in file order.
fn scalars(dir: &Path) -> BTreeMap<String, Vec<(i64, f32)>> {
    let mut out: BTreeMap<String, Vec<(i64, f32)>> = BTreeMap::new();
    let event_files: Vec<String> = files(dir)
        .into_iter()
        .filter(|f| f.starts_with("events.out.tfevents."))
        .collect();
    assert!(
        !event_files.is_empty(),
        "no event file in {}",
        dir.display()
    );
    for f in event_files {
        let events = read_events(dir.join(&f)).unwrap();
        assert!(
            matches!(&events[0].what, Some(EventKind::FileVersion(v)) if v == "brain.Event:2"),
            "{f} starts with {:?}",
            events[0].what
        );
        for e in &events[1..] {
            let Some(EventKind::Summary(s)) = &e.what else {
                panic!("{f}: an event that is not a summary")
            };
            for v in &s.value {
                out.entry(v.tag.clone())
                    .or_default()
                    .push((e.step, v.simple_value.expect("a scalar")));
            }
        }
    }
    out
}

fn steps(v: &[(i64, f32)]) -> Vec<i64> {
    v.iter().map(|(s, _)| *s).collect()
}

/// The number in a log line after `prefix` (up to a space, comma or final period).
fn number_after(line: &str, prefix: &str) -> Option<f64> {
    let rest = line.strip_prefix(prefix)?;
    let end = rest.find([' ', ',']).unwrap_or(rest.len());
    rest[..end].trim_end_matches('.').parse().ok()
}

#[test]
fn train_and_eval_events_and_tf_log_lines() {
    let dir = temp_dir("events");
    let mut c = config(&dir, 10, 1000);
    c.save_summary_steps = 25;
    c.log_step_count_steps = 25;
    let est = estimator(c, Params::new().with("learning_rate", 0.05));
    let r = est.train(tiny::train_input, None, Some(100)).unwrap();

    let s = scalars(&dir);
    // Every save_summary_steps: the loss and the host_call scalars.
    for tag in ["loss", "learning_rate", "batch_accuracy"] {
        assert_eq!(steps(&s[tag]), vec![25, 50, 75, 100], "{tag}");
    }
    assert!(s["learning_rate"].iter().all(|(_, v)| *v == 0.05));
    assert!(s["batch_accuracy"]
        .iter()
        .all(|(_, v)| (0.0..=1.0).contains(v) && (v * 8.0).fract() == 0.0));
    let last_loss = s["loss"].last().unwrap().1;
    assert_eq!(last_loss, r.final_loss.unwrap() as f32);
    assert!(s["loss"][0].1 > last_loss, "{:?}", s["loss"]);
    // Rates at the log cadence, after the first log line (which has no interval yet): at
    // the ends of the loops that pass 25, 50, 75 and at 100.
    assert_eq!(steps(&s["global_step/sec"]), vec![30, 50, 80, 100]);
    for ((_, rate), (_, examples)) in s["global_step/sec"].iter().zip(&s["examples/sec"]) {
        assert!(*rate > 0.0 && rate.is_finite());
        assert!((examples / rate - 8.0).abs() < 1e-3, "{examples} / {rate}");
    }

    // TF's lines.
    let log = &r.log;
    assert_eq!(log[0], "Calling model_fn.");
    assert_eq!(log[1], "Done calling model_fn.");
    assert!(log
        .iter()
        .any(|l| l.starts_with("loss = ") && l.ends_with(", step = 10")));
    let timed: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("loss = ") && l.contains(", step = ") && l.ends_with(" sec)"))
        .collect();
    assert_eq!(timed.len(), 4, "{log:?}");
    assert!(timed[0].contains(", step = 30 ("), "{}", timed[0]);
    assert_eq!(
        log.iter()
            .filter(|l| l.starts_with("global_step/sec: "))
            .count(),
        4
    );
    let ex = log
        .iter()
        .filter_map(|l| number_after(l, "examples/sec: "))
        .collect::<Vec<_>>();
    assert_eq!(ex.len(), 4);
    assert!(ex.iter().all(|v| *v > 0.0));
    let saved = format!(
        "Saving checkpoints for 100 into {}.",
        dir.join("model.ckpt").display()
    );
    assert!(log.contains(&saved), "{log:?}");
    let final_line = log.last().unwrap();
    let logged = number_after(final_line, "Loss for final step: ").expect(final_line);
    let loss = r.final_loss.unwrap();
    assert!(
        (logged - loss).abs() <= 1e-5 * loss.abs().max(1.0),
        "{final_line} vs {loss}"
    );

    // Evaluation: TF's result line and events in model_dir/eval at the global step.
    let e = est.evaluate(tiny::eval_input, Some(12)).unwrap();
    let dict = e
        .log
        .iter()
        .find(|l| l.starts_with("Saving dict for global step 100: "))
        .expect("the result line");
    assert!(
        dict.starts_with("Saving dict for global step 100: accuracy = ")
            && dict.contains(", global_step = 100, label_mean = ")
            && dict.contains(", loss = "),
        "{dict}"
    );
    assert!(e.log.iter().any(|l| l == "Evaluation [12/12]"));
    assert!(e
        .log
        .iter()
        .any(|l| l.starts_with("Restoring parameters from ")));
    let ev = scalars(&dir.join("eval"));
    assert_eq!(
        ev.keys().cloned().collect::<Vec<_>>(),
        vec!["accuracy", "label_mean", "loss"]
    );
    assert_eq!(
        ev["accuracy"],
        vec![(100, e.metric("accuracy").unwrap() as f32)]
    );
    assert_eq!(ev["loss"], vec![(100, e.loss as f32)]);
}

/// The library draws no progress bar: it reports each loop to the program's callback (the
/// examples draw their bar with it), from the start step to the target, then once as done.
#[test]
fn progress_goes_to_the_programs_callback() {
    use std::sync::{Arc, Mutex};
    use tessel_estimator::estimator::Progress;
    let dir = temp_dir("progress");
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = Arc::clone(&seen);
    estimator(config(&dir, 5, 1000), Params::new())
        .with_progress(move |p: &Progress| sink.lock().unwrap().push(*p))
        .train(tiny::train_input, None, Some(20))
        .unwrap();
    let seen = seen.lock().unwrap();
    let steps: Vec<(u64, bool)> = seen.iter().map(|p| (p.step, p.done)).collect();
    assert_eq!(
        steps,
        vec![
            (0, false),
            (5, false),
            (10, false),
            (15, false),
            (20, false),
            (20, true)
        ]
    );
    assert!(seen.iter().all(|p| p.target == 20));
    assert!(seen[1..]
        .iter()
        .all(|p| p.loss.is_finite() && p.examples_per_sec > 0.0));
}
