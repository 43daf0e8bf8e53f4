//! The products behind a compiled `dot` and the MNIST step on each GEMM library and thread
//! count, checked against direct sums and JAX's loss. (These are the checks that came with
//! the GEMM timings, which are benches now: `cargo bench -p tessel-kernels --bench gemm` and
//! `cargo bench -p tessel-tests --bench jit_perf`.)

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::interpreter::evaluate;
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
/// gradient reads its kernel so; with `lhs_transposed` the left operand is `[b.., k, m]`): a
/// large product transposes the right operand band by band into per-thread buffers. Against
/// the interpreter on every element, and bitwise the same on 1 and 2 threads, for sizes that
/// are and are not multiples of the bands and tiles, single rows and columns, a `k` of 1 and
/// the MLP's data gradient.
#[test]
fn dot_with_a_transposed_rhs_matches_the_interpreter() {
    for (batch, m, n, k, lhs_transposed) in [
        (None, 40usize, 300usize, 257usize, false),
        (Some(2), 33, 70, 129, false),
        (None, 1, 1000, 300, false),
        (None, 700, 1, 400, false),
        (None, 129, 200, 1, false),
        (None, 2000, 40, 160, false),
        (None, 256, 1024, 1024, false),
        (None, 97, 300, 257, true),
        (Some(2), 65, 130, 48, true),
    ] {
        let lead: Vec<i64> = batch.iter().map(|&b| b as i64).collect();
        let dims = |r: usize, c: usize| [lead.as_slice(), &[r as i64, c as i64]].concat();
        let nb = batch.unwrap_or(1);
        let lhs_dims = if lhs_transposed {
            dims(k, m)
        } else {
            dims(m, k)
        };
        let mut module = Module::new("nt");
        let c = module.entry_mut();
        let ls = Shape::array(ElementType::F32, &lhs_dims);
        let rs = Shape::array(ElementType::F32, &dims(n, k));
        let a = c.add(Instruction::new("a", Op::Parameter(0), ls), &[]);
        let b = c.add(Instruction::new("b", Op::Parameter(1), rs), &[]);
        let bd: Vec<i64> = (0..lead.len() as i64).collect();
        let last = lead.len() as i64 + 1;
        let dn = DotDimensionNumbers {
            lhs_batch: bd.clone(),
            rhs_batch: bd,
            lhs_contracting: vec![if lhs_transposed { last - 1 } else { last }],
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
            Literal::Array(Array::f32(&lhs_dims, x)),
            Literal::Array(Array::f32(&dims(n, k), y)),
        ];
        let values = |out: &Literal| {
            let d = &out.leaves()[0].data;
            (0..nb * m * n).map(|i| d.get_f64(i)).collect::<Vec<f64>>()
        };
        let run = |threads: usize| {
            let options = JitOptions {
                gemm_threads: threads,
                ..Default::default()
            };
            values(&compile(&module, &options).unwrap().run(&args).unwrap())
        };
        let (one, two) = (run(1), run(2));
        assert!(
            one.iter()
                .zip(&two)
                .all(|(p, q)| p.to_bits() == q.to_bits()),
            "{m}x{n}x{k}: 1 and 2 threads differ"
        );
        let want = values(&evaluate(&module, &args).expect("interpreter"));
        // Terms lie in [-1, 1]: a sum of `k` of them rounds by far less than 1e-5 per term,
        // and a misplaced element is off by about the size of a sum.
        let tol = 1e-5 * k as f64;
        for (i, (got, want)) in one.iter().zip(&want).enumerate() {
            assert!(
                (got - want).abs() <= tol,
                "{m}x{n}x{k} lhs transposed {lhs_transposed}, element {i}: {got} vs {want}"
            );
        }
    }
}
