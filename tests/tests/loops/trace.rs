//! Traces of compiled loops: every kernel the profile counts is in the trace with the same
//! time, the kernels fill the measured run, each replica has its own track, and the host's
//! input work is on the infeed track.

use super::training_loop::{corpus_loop_inputs, make_loop, sgd_args, sgd_step};
use std::collections::HashMap;
use std::time::Instant;
use tessel_runtime::feed::stacked_source;
use tessel_runtime::session::{Device, LoopOptions, Outfeed, SessionError, Trace, TraceOptions};

/// Per kernel name: summed milliseconds of the trace's events on `thread`.
fn summed_ms(trace: &Trace, thread: &str) -> HashMap<String, f64> {
    let mut sums = HashMap::new();
    for e in trace.kernels(thread) {
        *sums.entry(e.name.clone()).or_insert(0.0) += e.duration_ns as f64 / 1e6;
    }
    sums
}

#[test]
fn a_traced_cnn_loop_has_every_profiled_kernel_with_its_time_filling_the_run() {
    let (step, args, _) = corpus_loop_inputs().expect("the corpus is missing");
    let device = Device::jit().with_trace(TraceOptions::default());
    let lp = make_loop(&step, 5, &[8, 9, 10], device);
    let (carried, fed) = (args[..8].to_vec(), args[8..].to_vec());
    let run = || {
        let sources = vec![stacked_source(fed.clone()).unwrap()];
        let mut sink = |_: usize, _: u64, _| {};
        lp.run_fed(
            vec![carried.clone()],
            sources,
            Outfeed::Callback(&mut sink),
            &LoopOptions::default(),
        )
        .unwrap();
    };
    run(); // warm-up: arenas, routine plans
    let profile = lp.profile().expect("tracing compiles the profile marks in");
    profile.reset();
    lp.start_trace().unwrap();
    let mut wall_ms = 0.0;
    let runs = 3;
    for _ in 0..runs {
        let t = Instant::now();
        run();
        wall_ms += t.elapsed().as_secs_f64() * 1e3;
    }
    lp.stop_trace().unwrap();
    // The profile's times are read now: a mark that counts is a mark that records.
    let times = profile.times();
    run(); // not recorded
    let trace = lp.take_trace().unwrap();
    assert_eq!(trace.dropped, 0);

    // Every kernel and routine the profile counted in the recorded runs, with its time.
    let traced = summed_ms(&trace, "replica 0");
    let mut kernel_ms = 0.0;
    for t in times.iter().filter(|t| t.calls > 0) {
        let got = traced.get(&t.name).copied().unwrap_or_else(|| {
            panic!(
                "{} ({}) is in the profile, not in the trace",
                t.name, t.kind
            )
        });
        assert!(
            (got - t.total_ms).abs() <= 1e-6 * t.total_ms.max(1.0),
            "{}: {got} ms traced, {} ms profiled",
            t.name,
            t.total_ms
        );
        kernel_ms += got;
    }
    assert_eq!(traced.len(), times.iter().filter(|t| t.calls > 0).count());
    // The kernels ran inside the measured runs, and fill most of them (the rest is the host's
    // threads starting and the values going in and out).
    assert!(
        kernel_ms <= wall_ms,
        "{kernel_ms} ms of kernels in {wall_ms} ms"
    );
    assert!(
        kernel_ms >= 0.5 * wall_ms,
        "{kernel_ms} ms of kernels in {wall_ms} ms"
    );
    // One span per run of the program, holding its kernels: each kernel's time runs from the
    // mark before it, so they fill the span but for the copies after the last kernel.
    let runs_traced: Vec<_> = trace
        .track("replica 0")
        .unwrap()
        .events
        .iter()
        .filter(|e| e.category == "program")
        .collect();
    assert_eq!(runs_traced.len(), runs);
    let program_ms: f64 = runs_traced.iter().map(|e| e.duration_ns as f64 / 1e6).sum();
    assert!(
        kernel_ms <= program_ms && kernel_ms >= 0.9 * program_ms,
        "{kernel_ms} ms of kernels in {program_ms} ms of program runs"
    );
    assert!(program_ms <= wall_ms);

    // One infeed dequeue and one outfeed enqueue per iteration, and one host input event per
    // batch, for replica 0.
    let events: Vec<_> = trace.kernels("replica 0").collect();
    let count = |category: &str| events.iter().filter(|e| e.category == category).count();
    assert_eq!(count("infeed"), 5 * runs);
    assert_eq!(count("outfeed"), 5 * runs);
    let host = &trace.track("infeed").unwrap().events;
    assert_eq!(host.len(), 5 * runs);
    assert!(host
        .iter()
        .all(|e| e.category == "host input" && e.args == vec![("replica".to_string(), 0)]));
    // Sorted, and after recording started.
    assert!(events.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
    assert!(events[0].start_ns >= trace.origin_ns);
}

#[test]
fn each_replica_of_a_traced_loop_has_its_own_track() {
    let lp = make_loop(
        &sgd_step(None),
        6,
        &[1],
        Device::jit()
            .with_replicas(4)
            .with_trace(TraceOptions::default()),
    );
    lp.start_trace().unwrap();
    lp.run(sgd_args(4, 6), &LoopOptions::default()).unwrap();
    let trace = lp.take_trace().unwrap();
    for r in 0..4 {
        let events = &trace.track(&format!("replica {r}")).unwrap().events;
        let collectives = events.iter().filter(|e| e.category == "all-reduce").count();
        assert_eq!(collectives, 6, "replica {r}: {events:?}");
    }
    let host = &trace.track("infeed").unwrap().events;
    for r in 0..4u64 {
        let fed = host.iter().filter(|e| e.args[0].1 == r).count();
        assert_eq!(fed, 6, "host input for replica {r}");
    }
    // Taken: nothing is left; not started again, nothing more is recorded... until started.
    assert!(lp.take_trace().unwrap().events().next().is_none());
}

#[test]
fn a_trace_of_a_program_without_trace_buffers_is_an_error() {
    for device in [
        Device::jit(),
        Device::interpreter().with_trace(TraceOptions::default()),
    ] {
        let lp = make_loop(&sgd_step(None), 2, &[1], device.with_replicas(4));
        let e = lp.start_trace().unwrap_err();
        assert!(matches!(e, SessionError::NoTraceBuffers), "{e:?}");
        assert!(e.to_string().contains("with_trace"), "{e}");
        assert!(lp.take_trace().is_err());
    }
}
