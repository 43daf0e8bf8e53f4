//! The data-parallel corpus modules on the JIT: the session compiles the shard_map body once
//! and runs it on 4 replicas (each replica's GEMM on the thread budget's share), and must give JAX's numbers (floats within 1e-5 + 1e-4 |b|, 1e-3
//! relative after the CNN's convolutions), bitwise the same on a second run.

use tessel_compiler::ir::Array;
use tessel_runtime::session::{compile, Device, Outputs, Program};
use tessel_runtime::shard_map::ShardMap;
use tessel_runtime::threads::ThreadBudget;

fn compare(name: &str, got: &[Array], want: &[Array], rel: f64) {
    assert_eq!(got.len(), want.len(), "{name}: output count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.shape, w.shape, "{name}: output {i} shape");
        for j in 0..w.len() {
            let (a, b) = (g.data.get_f64(j), w.data.get_f64(j));
            if w.element_type().is_float() {
                let ok = (a - b).abs() <= 1e-5 + rel * b.abs() || (a.is_nan() && b.is_nan());
                assert!(ok, "{name}: output {i}[{j}] = {a}, JAX {b}");
            } else {
                assert_eq!(
                    g.data.get_i64(j),
                    w.data.get_i64(j),
                    "{name}: output {i}[{j}]"
                );
            }
        }
    }
}

/// The program's global outputs on `inputs`, in parameter order.
fn run(program: &Program, inputs: &[Array]) -> Result<Vec<Array>, String> {
    let bound = program
        .bind_ordered(inputs.to_vec())
        .map_err(|e| e.to_string())?;
    match program.run(&bound).map_err(|e| e.to_string())? {
        Outputs::Global(leaves) => Ok(leaves),
        Outputs::PerReplica(_) => Err("a shard_map program gives global arrays".into()),
    }
}

fn check(name: &str, rel: f64) {
    let module = tessel_tests::corpus_module(name);
    let device = Device {
        threads: ThreadBudget::new(2),
        ..Device::jit().with_replicas(4)
    };
    let program = compile(&module, &device).unwrap_or_else(|e| panic!("{name}: {e}"));
    let inputs = tessel_tests::corpus_arrays(&format!("{name}.inputs.safetensors"));
    let a = run(&program, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    compare(
        name,
        &a,
        &tessel_tests::corpus_arrays(&format!("{name}.outputs.safetensors")),
        rel,
    );
    let b = run(&program, &inputs).unwrap();
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(
            x.data.to_le_bytes(),
            y.data.to_le_bytes(),
            "{name}: output {k} differs between two runs"
        );
    }
}

#[test]
fn dp_tanh_regression_r4_on_the_jit() {
    check("dp_tanh_regression_r4", 1e-4);
}

#[test]
fn dp_mnist_cnn_train_step_r4_b32_on_the_jit() {
    check("dp_mnist_cnn_train_step_r4_b32", 1e-3);
}

#[test]
fn the_jit_needs_the_meshs_replica_count() {
    let e = ShardMap::new(&tessel_tests::corpus_module("dp_tanh_regression_r4"), 2)
        .err()
        .unwrap();
    assert!(e.message.contains("4 devices"), "{e}");
}
