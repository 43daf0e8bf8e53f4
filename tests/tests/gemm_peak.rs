//! GEMM speed as a share of this machine's measured FMA peak, in one run:
//! `cargo test --release -p tessel-tests --test gemm_peak -- --nocapture`.
//!
//! Times a 1024x1024x1024 f32 `dot` compiled by the JIT, both the whole `Executable::run`
//! (arguments copied in, result copied out) and the GEMM routine alone (from the per-kernel
//! profile), and checks the product, so it cannot pass on a wrong GEMM. It prints figures and
//! asserts no speed: the machine is shared.

use std::time::Instant;
use tessel_compiler::ir::*;
use tessel_runtime::jit::{compile, GemmBackend, JitOptions};
use tessel_tests::fma_peak::fma_peak_gflops;

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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn gemm_1024_against_the_fma_peak() {
    let peak1 = fma_peak_gflops(1);
    let peak2 = fma_peak_gflops(2);
    let show = |p: Option<f64>| p.map_or("n/a (no AVX2+FMA)".into(), |g| format!("{g:.0} GFLOP/s"));
    eprintln!(
        "fma peak: 1 thread {}, 2 threads {}",
        show(peak1),
        show(peak2)
    );
    let n = 1024usize;
    let flop = 2.0 * (n as f64).powi(3);
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
            profile: true,
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
                "[{i},{j}]: {got} vs {direct}"
            );
        }
        let profile = exe.profile().unwrap();
        profile.reset();
        let runs = 5;
        let whole = median(
            (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    exe.run(&args).unwrap();
                    t.elapsed().as_secs_f64()
                })
                .collect(),
        );
        let routine = profile
            .times()
            .into_iter()
            .find(|t| t.kind == "dot")
            .expect("the dot routine is profiled");
        let routine_s = routine.total_ms / 1e3 / runs as f64;
        let share = |g: f64, peak: Option<f64>| {
            peak.map(|p| format!(" = {:.0}% of the {threads}-thread peak", 100.0 * g / p))
                .unwrap_or_default()
        };
        let peak = if threads == 1 { peak1 } else { peak2 };
        let (g_whole, g_routine) = (flop / whole / 1e9, flop / routine_s / 1e9);
        eprintln!(
            "gemm 1024^3 [{backend:?}, {threads} thread(s)]: run {:.2} ms {g_whole:.0} GFLOP/s; dot routine {:.2} ms {g_routine:.0} GFLOP/s{}",
            whole * 1e3,
            routine_s * 1e3,
            share(g_routine, peak)
        );
    }
}
