//! The products behind a compiled `dot` and the MNIST step on each GEMM library and thread
//! count, checked against direct sums and JAX's loss. (These are the checks that came with
//! the GEMM timings, which are benches now: `cargo bench -p tessel-kernels --bench gemm` and
//! `cargo bench -p tessel-tests --bench jit_perf`.)

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::ir::*;
use tessel_runtime::jit::{compile, GemmBackend, JitOptions};

fn dot_module(n: i64) -> Module {
    let mut m = Module::new("gemm");
    let s = Shape::array(ElementType::F32, &[n, n]);
    let c = m.entry_mut();
    let a = c.add(Instruction::new("a", Op::Parameter(0), s.clone()), &[]);
    let b = c.add(Instruction::new("b", Op::Parameter(1), s.clone()), &[]);
    let dn = DotDimensionNumbers {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
    };
    c.add(Instruction::new("product", Op::Dot(dn), s), &[a, b]);
    m
}

#[test]
fn dot_1024_on_each_gemm_backend() {
    let n = 1024usize;
    let a: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let b: Vec<f32> = (0..n * n)
        .map(|i| ((i * 104729) % 1000) as f32 / 1000.0)
        .collect();
    let args = [
        Literal::Array(Array::f32(&[n as i64, n as i64], a.clone())),
        Literal::Array(Array::f32(&[n as i64, n as i64], b.clone())),
    ];
    for (backend, threads) in [
        (GemmBackend::Gemm, 1),
        (GemmBackend::Gemm, 2),
        (GemmBackend::MatrixMultiply, 2),
    ] {
        let options = JitOptions {
            gemm: backend,
            gemm_threads: threads,
            ..Default::default()
        };
        let exe = compile(&dot_module(n as i64), &options).unwrap();
        let out = exe.run(&args).unwrap();
        for (i, j) in [(0, 0), (17, 901), (1023, 5), (512, 1023)] {
            let direct: f64 = (0..n)
                .map(|k| a[i * n + k] as f64 * b[k * n + j] as f64)
                .sum();
            let got = out.leaves()[0].data.get_f64(i * n + j);
            assert!(
                (got - direct).abs() <= 1e-4 * direct.abs(),
                "{backend:?} {threads} thread(s) [{i},{j}]: {got} vs {direct}"
            );
        }
    }
}

#[test]
fn mnist_step_on_each_gemm_backend_matches_jax() {
    let module = tessel_tests::corpus_module("mnist_cnn_train_step_b128");
    let args = tessel_tests::corpus_args("mnist_cnn_train_step_b128.inputs.safetensors");
    let want = tessel_tests::corpus_arrays("mnist_cnn_train_step_b128.outputs.safetensors");
    let mut optimized = module.clone();
    optimize(&mut optimized, &CompileOptions::default()).unwrap();
    for (m, backend) in [
        (&module, GemmBackend::Gemm),
        (&module, GemmBackend::MatrixMultiply),
        (&optimized, GemmBackend::Gemm),
    ] {
        let opts = JitOptions {
            gemm: backend,
            ..Default::default()
        };
        let out = compile(m, &opts).unwrap().run(&args).unwrap();
        let loss = out.leaves()[8].data.get_f64(0);
        let jax = want[8].data.get_f64(0);
        assert!(
            (loss - jax).abs() <= 1e-4 * jax.abs().max(1.0),
            "{backend:?}: loss {loss} vs JAX {jax}"
        );
    }
}
