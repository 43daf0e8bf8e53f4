//! A program started by an MPI launcher among several processes but built without the `mpi`
//! feature would train a model of its own in every process; the estimator says so through
//! the log facade, once. Its own test binary: it sets the launcher's variable for the process.
#![cfg(not(feature = "mpi"))]

use std::sync::Mutex;
use tessel_estimator::{EstimatorError, Params, RunConfig, TpuEstimator};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        let line = format!("{}:{}", record.level(), record.args());
        LINES.lock().unwrap().push(line);
    }

    fn flush(&self) {}
}

fn estimator() -> TpuEstimator {
    let dir = std::env::temp_dir().join(format!("tessel_launcher_warning_{}", std::process::id()));
    TpuEstimator::new(
        |_, _, _, _, _| Err(EstimatorError::ModelFn("not traced by this test".into())),
        RunConfig {
            model_dir: Some(dir),
            ..RunConfig::default()
        },
        Params::new(),
        false,
        8,
        Some(8),
        None,
    )
    .unwrap()
}

#[test]
fn a_launcher_without_the_mpi_feature_is_warned_about_once() {
    static CAPTURE: Capture = Capture;
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let est = estimator();
    assert!(est.is_chief());
    let warnings = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("built without the `mpi` feature"))
            .count()
    };
    assert_eq!(
        warnings(&LINES.lock().unwrap()),
        0,
        "no launcher, no warning"
    );
    std::env::set_var("OMPI_COMM_WORLD_SIZE", "2");
    assert!(est.is_chief());
    assert!(est.is_chief());
    let lines = LINES.lock().unwrap().clone();
    assert_eq!(warnings(&lines), 1, "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("WARN:") && l.contains("OMPI_COMM_WORLD_SIZE=2")),
        "{lines:?}"
    );
}
