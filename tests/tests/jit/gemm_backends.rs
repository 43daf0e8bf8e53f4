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

/// `[b.., m, k] x [b.., n, k]`, contracting dimension `k` of both (a dense layer's data
/// gradient reads its kernel so): the right operand is copied to `[k, n]` before the product
/// when the product is large. Against direct sums, and bitwise the same on 1 and 2 threads.
#[test]
fn dot_with_a_transposed_rhs_matches_direct_sums() {
    for (batch, m, n, k) in [(None, 40usize, 300usize, 257usize), (Some(2), 33, 70, 129)] {
        let lead: Vec<i64> = batch.iter().map(|&b| b as i64).collect();
        let dims = |r: usize, c: usize| [lead.as_slice(), &[r as i64, c as i64]].concat();
        let nb = batch.unwrap_or(1);
        let mut module = Module::new("nt");
        let c = module.entry_mut();
        let ls = Shape::array(ElementType::F32, &dims(m, k));
        let rs = Shape::array(ElementType::F32, &dims(n, k));
        let a = c.add(Instruction::new("a", Op::Parameter(0), ls), &[]);
        let b = c.add(Instruction::new("b", Op::Parameter(1), rs), &[]);
        let bd: Vec<i64> = (0..lead.len() as i64).collect();
        let last = lead.len() as i64 + 1;
        let dn = DotDimensionNumbers {
            lhs_batch: bd.clone(),
            rhs_batch: bd,
            lhs_contracting: vec![last],
            rhs_contracting: vec![last],
        };
        let out = Shape::array(ElementType::F32, &dims(m, n));
        c.add(Instruction::new("product", Op::Dot(dn), out), &[a, b]);
        let x: Vec<f32> = (0..nb * m * k)
            .map(|i| ((i * 7919) % 997) as f32 / 500.0 - 1.0)
            .collect();
        let y: Vec<f32> = (0..nb * n * k)
            .map(|i| ((i * 104729) % 991) as f32 / 500.0 - 1.0)
            .collect();
        let args = [
            Literal::Array(Array::f32(&dims(m, k), x.clone())),
            Literal::Array(Array::f32(&dims(n, k), y.clone())),
        ];
        let run = |threads: usize| {
            let options = JitOptions {
                gemm_threads: threads,
                ..Default::default()
            };
            let out = compile(&module, &options).unwrap().run(&args).unwrap();
            let d = &out.leaves()[0].data;
            (0..nb * m * n).map(|i| d.get_f64(i)).collect::<Vec<f64>>()
        };
        let (one, two) = (run(1), run(2));
        assert!(
            one.iter()
                .zip(&two)
                .all(|(p, q)| p.to_bits() == q.to_bits()),
            "{m}x{n}x{k}: 1 and 2 threads differ"
        );
        for bi in 0..nb {
            for (i, j) in [(0, 0), (m - 1, n - 1), (m / 2, n / 3), (7, n - 2)] {
                let direct: f64 = (0..k)
                    .map(|p| x[(bi * m + i) * k + p] as f64 * y[(bi * n + j) * k + p] as f64)
                    .sum();
                let got = one[(bi * m + i) * n + j];
                assert!(
                    (got - direct).abs() <= 1e-4 * direct.abs().max(1.0),
                    "[{bi},{i},{j}]: {got} vs {direct}"
                );
            }
        }
    }
}
