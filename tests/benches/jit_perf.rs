//! Timing of the JIT on the MNIST training step (b128) and a 1024^3 GEMM through a compiled
//! dot, with both GEMM libraries: the whole `Executable::run` and, from the per-kernel
//! profile, the dot routine alone. Prints the numbers recorded in docs/performance.md and
//! checks the results, so it cannot report figures of a broken program:
//! `cargo bench -p tessel-tests --bench jit_perf`. (The routines alone, against the FMA peak:
//! `cargo bench -p tessel-kernels`.)

use std::time::Instant;
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::ir::*;
use tessel_runtime::jit::{compile, GemmBackend, JitOptions};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

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
    c.add(Instruction::new("d", Op::Dot(dn), s), &[a, b]);
    m
}

fn main() {
    let module = tessel_tests::corpus_module("mnist_cnn_train_step_b128");
    let args = tessel_tests::corpus_args("mnist_cnn_train_step_b128.inputs.safetensors");
    let want = tessel_tests::corpus_arrays("mnist_cnn_train_step_b128.outputs.safetensors");
    let mut optimized = module.clone();
    let t = Instant::now();
    optimize(&mut optimized, &CompileOptions::default()).unwrap();
    let optimize_ms = t.elapsed().as_secs_f64() * 1e3;
    println!("optimizer pipeline: {optimize_ms:.1} ms");
    for (what, backend) in [
        ("as parsed", GemmBackend::Gemm),
        ("as parsed", GemmBackend::MatrixMultiply),
        ("optimized", GemmBackend::Gemm),
    ] {
        let opts = JitOptions {
            gemm: backend,
            ..Default::default()
        };
        let m = if what == "optimized" {
            &optimized
        } else {
            &module
        };
        let t = Instant::now();
        let exe = compile(m, &opts).unwrap();
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let out = exe.run(&args).unwrap();
        let loss = out.leaves()[8].data.get_f64(0);
        let jax = want[8].data.get_f64(0);
        assert!(
            (loss - jax).abs() <= 1e-4 * jax.abs().max(1.0),
            "loss {loss} vs JAX {jax}"
        );
        let times: Vec<f64> = (0..5)
            .map(|_| {
                let t = Instant::now();
                exe.run(&args).unwrap();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        let s = exe.stats();
        println!(
            "mnist_cnn_train_step_b128 {what} [{backend:?}]: jit compile_ms {compile_ms:.1} run_ms_median {:.2} kernels {} arena_mb {:.1} peak_rss_mb {:.1}",
            median(times),
            s.kernels,
            s.arena_bytes as f64 / 1e6,
            peak_rss_mb()
        );
    }
    let n = 1024;
    let m = dot_module(n);
    let a: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let b: Vec<f32> = (0..n * n)
        .map(|i| ((i * 104729) % 1000) as f32 / 1000.0)
        .collect();
    let args = [
        Literal::Array(Array::f32(&[n, n], a.clone())),
        Literal::Array(Array::f32(&[n, n], b.clone())),
    ];
    for backend in [GemmBackend::Gemm, GemmBackend::MatrixMultiply] {
        let exe = compile(
            &m,
            &JitOptions {
                gemm: backend,
                profile: true,
                ..Default::default()
            },
        )
        .unwrap();
        let out = exe.run(&args).unwrap();
        // Spot-check one element against a direct sum.
        let (i, j) = (17usize, 901usize);
        let direct: f64 = (0..n as usize)
            .map(|k| a[i * n as usize + k] as f64 * b[k * n as usize + j] as f64)
            .sum();
        let got = out.leaves()[0].data.get_f64(i * n as usize + j);
        assert!(
            (got - direct).abs() <= 1e-3 * direct.abs(),
            "gemm element {got} vs {direct}"
        );
        let profile = exe.profile().unwrap();
        profile.reset();
        let runs = 3;
        let times: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                exe.run(&args).unwrap();
                t.elapsed().as_secs_f64()
            })
            .collect();
        let secs = median(times);
        let routine = profile
            .times()
            .into_iter()
            .find(|t| t.kind == "dot")
            .expect("the dot routine is profiled");
        let routine_s = routine.total_ms / 1e3 / runs as f64;
        let flop = 2.0 * (n as f64).powi(3);
        println!(
            "gemm 1024^3 via compiled dot [{backend:?}]: run {:.1} ms, {:.0} GFLOP/s; dot routine {:.1} ms, {:.0} GFLOP/s",
            secs * 1e3,
            flop / secs / 1e9,
            routine_s * 1e3,
            flop / routine_s / 1e9
        );
    }
}
