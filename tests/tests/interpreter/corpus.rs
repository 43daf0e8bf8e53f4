//! The reference interpreter on the JAX corpus: every module (except x64_mean, which must be
//! rejected) evaluates to JAX's numbers. Floats agree when |a - b| <= 1e-5 + 1e-4 |b|; the
//! CNN train steps may need 1e-3 relative on single elements after a convolution's long sums
//! (each such element is printed); integers agree exactly. The data-parallel modules run on
//! 4 replicas through `run_sharded`.

use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, ArrayData, Literal, Module};
use tessel_runtime::session::{compile, Device, Outputs, ReplicaCountError, SessionError};

fn load(name: &str) -> Module {
    let m = tessel_tests::corpus_module(name);
    if let Err(errors) = tessel_compiler::verifier::verify(&m) {
        panic!("{name} does not verify: {errors:?}");
    }
    m
}

/// Compares outputs; `loose` allows 1e-3 relative on single elements (counted and printed).
fn compare(name: &str, got: &[Array], want: &[Array], loose: bool) {
    assert_eq!(got.len(), want.len(), "{name}: number of outputs");
    let mut loose_elements = 0;
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.shape, w.shape, "{name}: output {k} shape");
        match (&g.data, &w.data) {
            (ArrayData::F32(gv), ArrayData::F32(wv)) => {
                for (i, (&a, &b)) in gv.iter().zip(wv).enumerate() {
                    let d = (a - b).abs();
                    if d <= 1e-5 + 1e-4 * b.abs() || (a.is_nan() && b.is_nan()) {
                        continue;
                    }
                    if loose && d <= 1e-5 + 1e-3 * b.abs() {
                        loose_elements += 1;
                        println!(
                            "{name}: output {k} element {i}: {a} vs JAX {b} (within 1e-3 relative)"
                        );
                        continue;
                    }
                    panic!("{name}: output {k} element {i}: got {a}, JAX {b}");
                }
            }
            (gd, wd) => assert_eq!(gd, wd, "{name}: output {k} (exact)"),
        }
    }
    println!("{name}: all outputs match; {loose_elements} elements needed 1e-3 relative");
}

fn literals(arrays: Vec<Array>) -> Vec<Literal> {
    arrays.into_iter().map(Literal::Array).collect()
}

fn leaves(l: &Literal) -> Vec<Array> {
    l.leaves().into_iter().cloned().collect()
}

fn check_single(name: &str, loose: bool) {
    let m = load(name);
    let inputs = tessel_tests::corpus_args(&format!("{name}.inputs.safetensors"));
    let out = evaluate(&m, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    compare(
        name,
        &leaves(&out),
        &tessel_tests::corpus_arrays(&format!("{name}.outputs.safetensors")),
        loose,
    );
}

/// A shard_map module on `replicas` interpreter replicas, through the session API: the
/// entry root's leaves, global.
fn run_sharded(m: &Module, args: &[Array], replicas: usize) -> Result<Vec<Array>, SessionError> {
    let program = compile(m, &Device::interpreter().with_replicas(replicas))?;
    match program.run(&program.bind_ordered(args.to_vec())?)? {
        Outputs::Global(leaves) => Ok(leaves),
        Outputs::PerReplica(_) => unreachable!("a shard_map program gives global arrays"),
    }
}

fn check_sharded(name: &str, loose: bool) {
    let m = load(name);
    let inputs = tessel_tests::corpus_arrays(&format!("{name}.inputs.safetensors"));
    let out = run_sharded(&m, &inputs, 4).unwrap_or_else(|e| panic!("{name}: {e}"));
    compare(
        name,
        &out,
        &tessel_tests::corpus_arrays(&format!("{name}.outputs.safetensors")),
        loose,
    );
}

#[test]
fn tanh_matmul_sum() {
    check_single("tanh_matmul_sum", false);
}

#[test]
fn softmax_rows() {
    check_single("softmax_rows", false);
}

#[test]
fn fori_loop_sin() {
    check_single("fori_loop_sin", false);
}

#[test]
fn threefry_uniform() {
    check_single("threefry_uniform", false);
}

#[test]
fn mnist_cnn_predict_b16() {
    check_single("mnist_cnn_predict_b16", false);
}

#[test]
fn mnist_cnn_train_step_b8() {
    check_single("mnist_cnn_train_step_b8", true);
}

#[test]
fn mnist_cnn_train_step_b128() {
    check_single("mnist_cnn_train_step_b128", true);
}

/// The grad_* modules compute the scalar whose gradient is checked elsewhere: its value is
/// output "0" of the grad outputs.
#[test]
fn grad_modules_compute_their_value() {
    for name in ["grad_softmax_xent", "grad_pool_conv"] {
        let m = load(name);
        let inputs = tessel_tests::corpus_args(&format!("{name}.inputs.safetensors"));
        let out = evaluate(&m, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = tessel_tests::corpus_arrays(&format!("{name}.grad_outputs.safetensors"));
        compare(name, &leaves(&out), &want[..1], false);
    }
}

#[test]
fn dp_tanh_regression_r4() {
    check_sharded("dp_tanh_regression_r4", false);
}

#[test]
fn dp_mnist_cnn_train_step_r4_b32() {
    check_sharded("dp_mnist_cnn_train_step_r4_b32", true);
}

#[test]
fn sharded_runs_are_bitwise_deterministic() {
    let name = "dp_tanh_regression_r4";
    let m = load(name);
    let inputs = tessel_tests::corpus_arrays(&format!("{name}.inputs.safetensors"));
    let a = run_sharded(&m, &inputs, 4).unwrap();
    let b = run_sharded(&m, &inputs, 4).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.data.to_le_bytes(), y.data.to_le_bytes());
    }
}

#[test]
fn a_shard_map_module_needs_its_replicas() {
    let m = load("dp_tanh_regression_r4");
    let inputs = tessel_tests::corpus_arrays("dp_tanh_regression_r4.inputs.safetensors");
    let e = run_sharded(&m, &inputs, 2).unwrap_err();
    assert!(
        matches!(
            e,
            SessionError::ReplicaCount(ReplicaCountError::Mesh { expected: 4, .. })
        ),
        "{e}"
    );
    // Evaluated as one program, the GlobalToLocalShape marker explains what to do instead.
    let e = evaluate(&m, &literals(inputs)).unwrap_err();
    assert!(e.message.contains("tessel_runtime::session"), "{e}");
}
