//! Buffer assignment: golden cases (`tests/golden/passes/buffer-assignment/`, input HLO to
//! the assignment's text), and the MNIST training step's memory against its lower bound.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::passes::assign_buffers;
use tessel_tests::golden::run_suite;
use tessel_tests::{corpus_dir, golden_dir};

#[test]
fn golden() {
    let dir = golden_dir().join("passes").join("buffer-assignment");
    run_suite(&dir, "hlo", "expected", |input| {
        let m = parse_module_file(input).unwrap();
        assign_buffers(&m).to_text()
    });
}

#[test]
fn an_elementwise_chain_runs_in_one_buffer() {
    let m = parse_module_file(&golden_dir().join("passes/buffer-assignment/in_place.hlo")).unwrap();
    let a = assign_buffers(&m);
    let temps: Vec<_> = a
        .buffers
        .iter()
        .filter(|b| b.values.iter().any(|v| v == "a"))
        .collect();
    assert_eq!(temps.len(), 1);
    assert_eq!(temps[0].values, ["a", "b", "c", "d"]);
}

#[test]
fn loop_state_stays_in_place() {
    let m =
        parse_module_file(&golden_dir().join("passes/buffer-assignment/while_state.hlo")).unwrap();
    let a = assign_buffers(&m);
    // exp's result becomes the loop state, and the body's sine writes over it.
    let state = a
        .buffers
        .iter()
        .find(|b| b.values.iter().any(|v| v == "e"))
        .unwrap();
    assert!(
        state.values.iter().any(|v| v == "x2_body"),
        "{:?}",
        state.values
    );
    assert!(
        state.values.iter().any(|v| v == "loop{1}"),
        "{:?}",
        state.values
    );
}

#[test]
fn mnist_step_memory_is_near_the_lower_bound() {
    let path = corpus_dir().unwrap().join("mnist_cnn_train_step_b128.hlo");
    let mut m = parse_module_file(&path).unwrap();
    let report = optimize(&mut m, &CompileOptions::default()).unwrap();
    let b = &report.buffers;
    eprintln!(
        "mnist b128: peak {} lower bound {} total {} (values unshared {}), kernels {} -> {}",
        b.peak_bytes,
        b.lower_bound_bytes,
        b.total_bytes,
        b.unshared_values_bytes,
        report.kernels_before,
        report.kernels_after
    );
    assert!(b.lower_bound_bytes <= b.peak_bytes);
    assert!(
        (b.peak_bytes as f64) <= 1.25 * b.lower_bound_bytes as f64,
        "peak {} vs lower bound {}",
        b.peak_bytes,
        b.lower_bound_bytes
    );
    assert!(b.peak_bytes < b.total_bytes);
    // Sharing buffers never needs more than giving every value its own.
    assert!(b.peak_bytes <= b.unshared_values_bytes);
}
