//! The b128 MNIST training step (JAX's, optimized) gives bitwise the same outputs on 1, 2 and
//! 3 threads: every routine cuts its work by the shape, not by the thread count (the kernels'
//! halves, the products' column blocks, the Winograd filter gradient's fixed shares).
//! Regression test: the filter gradient's partial sums used to be one per worker. (The patch
//! GEMM's weight gradient, which this step does not use, sums fixed groups too: its unit test
//! in `runtime/kernels/src/patch_gemm`.)

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_runtime::jit::{compile, JitOptions};

#[test]
fn mnist_step_is_bitwise_the_same_on_1_2_and_3_threads() {
    let mut module = tessel_tests::corpus_module("mnist_cnn_train_step_b128");
    optimize(&mut module, &CompileOptions::default()).unwrap();
    let args = tessel_tests::corpus_args("mnist_cnn_train_step_b128.inputs.safetensors");
    let run = |threads: usize| {
        let options = JitOptions {
            gemm_threads: threads,
            ..Default::default()
        };
        let out = compile(&module, &options).unwrap().run(&args).unwrap();
        out.leaves()
            .iter()
            .map(|a| a.data.to_le_bytes())
            .collect::<Vec<_>>()
    };
    let one = run(1);
    for threads in [2, 3] {
        let got = run(threads);
        for (leaf, (a, b)) in one.iter().zip(&got).enumerate() {
            assert!(
                a == b,
                "output {leaf} on {threads} threads differs from one thread"
            );
        }
    }
}
