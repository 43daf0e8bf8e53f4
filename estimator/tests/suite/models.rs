//! Each suite model, through the bench's own `run`, on a tiny batch that repeats: it traces,
//! compiles and trains with finite losses that fall; and the bench's flag errors.

#[allow(dead_code)] // the test calls `run`, not `main`
#[path = "../../examples/models_bench.rs"]
pub(crate) mod models_bench;

use clap::Parser;
use models_bench::models::NAMES;

fn flags(args: &[&str]) -> models_bench::Flags {
    let mut all = vec!["models_bench"];
    all.extend_from_slice(args);
    models_bench::Flags::parse_from(all)
}

/// A batch of 4 from 4 examples: every step sees the same batch, so training must lower
/// its loss. 3 loops of 4 steps: one warm-up, two timed.
fn trains(name: &str) {
    let f = flags(&[
        "--model",
        name,
        "--batch",
        "4",
        "--examples",
        "4",
        "--warmup-steps",
        "4",
        "--steps",
        "8",
        "--iterations",
        "4",
    ]);
    let m = models_bench::run(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(m.steps, 12, "{name}: global step");
    assert!(
        m.loss_first_loop.is_finite() && m.loss_last_loop.is_finite(),
        "{name}: losses {} then {}",
        m.loss_first_loop,
        m.loss_last_loop
    );
    assert!(
        m.loss_last_loop < m.loss_first_loop,
        "{name}: the loss did not fall: {} then {}",
        m.loss_first_loop,
        m.loss_last_loop
    );
    assert!(
        m.ms_per_step > 0.0 && m.ms_per_step.is_finite(),
        "{name}: ms_per_step {}",
        m.ms_per_step
    );
    assert!(m.compile_ms > 0.0, "{name}: compile_ms {}", m.compile_ms);
}

#[test]
fn mnist_trains() {
    trains("mnist");
}

#[test]
fn fashion_trains() {
    trains("fashion");
}

#[test]
fn resnet20_trains() {
    trains("resnet20");
}

#[test]
fn mlp_trains() {
    trains("mlp");
}

#[test]
fn textcnn_trains() {
    trains("textcnn");
}

#[test]
fn the_suite_lists_its_five_models_with_their_batches() {
    let batches: Vec<(&str, usize)> = NAMES
        .iter()
        .map(|n| (*n, models_bench::models::model(n).expect(n).batch))
        .collect();
    assert_eq!(
        batches,
        [
            ("mnist", 128),
            ("fashion", 128),
            ("resnet20", 128),
            ("mlp", 256),
            ("textcnn", 64)
        ]
    );
}

#[test]
fn bad_flags_are_clear_errors() {
    let err = |args: &[&str]| match models_bench::run(&flags(args)) {
        Ok(_) => panic!("{args:?} ran"),
        Err(e) => e.to_string(),
    };
    let e = err(&["--model", "vgg"]);
    assert!(
        e.contains("unknown --model vgg") && e.contains("resnet20"),
        "{e}"
    );
    let e = err(&["--model", "mlp", "--steps", "15", "--iterations", "10"]);
    assert!(e.contains("multiples of --iterations 10"), "{e}");
    let e = err(&["--model", "mlp", "--warmup-steps", "0"]);
    assert!(e.contains("at least 1"), "{e}");
    let e = err(&["--model", "mlp", "--examples", "100"]);
    assert!(e.contains("less than a batch (256)"), "{e}");
}
