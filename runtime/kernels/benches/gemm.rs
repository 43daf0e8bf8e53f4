//! GEMM speed against this machine's FMA peak, measured in the same run:
//! `cargo bench -p tessel-kernels --bench gemm`.
//!
//! The products of the MNIST CNN training step at batch 128 (`mnist_cnn_train_step_b128.hlo`:
//! the dense layers forward and backward, N = normal, T = transposed operand) and a
//! 1024^3 product, with both GEMM libraries on 1 and 2 threads; then the MLP step's products
//! (784-1024-1024-10 at batch 256), the transposed-`b` one also through
//! `sgemm_transposed_rhs`. `-- mlp` runs only those whose name holds `mlp`.

mod common;

use common::{header, median_ms, report, values, THREADS};
use tessel_kernels::gemm::transposed_rhs::{sgemm_transposed_rhs, transposed_rhs_scratch_len};
use tessel_kernels::gemm::{sgemm, GemmBackend};

/// A product `m x k` times `k x n`, either operand stored transposed.
struct Product {
    name: &'static str,
    m: usize,
    n: usize,
    k: usize,
    a_transposed: bool,
    b_transposed: bool,
    reps: usize,
}

const fn product(name: &'static str, mnk: [usize; 3], t: [bool; 2], reps: usize) -> Product {
    Product {
        name,
        m: mnk[0],
        n: mnk[1],
        k: mnk[2],
        a_transposed: t[0],
        b_transposed: t[1],
        reps,
    }
}

const PRODUCTS: [Product; 12] = [
    product(
        "dense1 forward 128x128x3136 NN",
        [128, 128, 3136],
        [false, false],
        30,
    ),
    product(
        "dense2 forward 128x10x128 NN",
        [128, 10, 128],
        [false, false],
        200,
    ),
    product(
        "dense2 data grad 128x128x10 NT",
        [128, 128, 10],
        [false, true],
        200,
    ),
    product(
        "dense1 data grad 128x3136x128 NT",
        [128, 3136, 128],
        [false, true],
        30,
    ),
    product(
        "dense1 weight grad 128x3136x128 TN",
        [128, 3136, 128],
        [true, false],
        30,
    ),
    product(
        "dense2 weight grad 10x128x128 TN",
        [10, 128, 128],
        [true, false],
        200,
    ),
    product(
        "square 1024x1024x1024 NN",
        [1024, 1024, 1024],
        [false, false],
        5,
    ),
    product(
        "mlp dense1 forward 256x1024x784 NN",
        [256, 1024, 784],
        [false, false],
        20,
    ),
    product(
        "mlp dense2 forward 256x1024x1024 NN",
        [256, 1024, 1024],
        [false, false],
        20,
    ),
    product(
        "mlp dense2 data grad 256x1024x1024 NT",
        [256, 1024, 1024],
        [false, true],
        20,
    ),
    product(
        "mlp dense2 weight grad 1024x1024x256 TN",
        [1024, 1024, 256],
        [true, false],
        20,
    ),
    product(
        "mlp dense1 weight grad 784x1024x256 TN",
        [784, 1024, 256],
        [true, false],
        20,
    ),
];

/// This thread's time on a CPU so far (`/proc/thread-self/schedstat`, Linux), in ms: on a
/// loaded machine a one-thread routine's on-CPU time varies far less than its wall time.
fn on_cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e6)
}

/// The MLP's transposed-`b` product on one thread against its untransposed twin, in place and
/// with `b` copied, alternating, 5 rounds: the least on-CPU time of each.
fn transposed_b_on_cpu() {
    let (m, n, k) = (256, 1024, 1024);
    let a = values(m * k, 1);
    let b = values(k * n, 2);
    let mut c = vec![0f32; m * n];
    let mut scratch = vec![0f32; transposed_rhs_scratch_len(1, n, k)];
    let names = ["NN", "NT in place", "NT banded b"];
    let mut best = [f64::INFINITY; 3];
    for _ in 0..5 {
        for (v, best) in best.iter_mut().enumerate() {
            let mut run = || unsafe {
                let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
                let (ki, ni) = (k as isize, n as isize);
                match v {
                    0 => sgemm(
                        GemmBackend::Gemm,
                        1,
                        m,
                        n,
                        k,
                        ap,
                        ki,
                        1,
                        bp,
                        ni,
                        1,
                        cp,
                        ni,
                        1,
                        false,
                    ),
                    1 => sgemm(
                        GemmBackend::Gemm,
                        1,
                        m,
                        n,
                        k,
                        ap,
                        ki,
                        1,
                        bp,
                        1,
                        ki,
                        cp,
                        ni,
                        1,
                        false,
                    ),
                    _ => sgemm_transposed_rhs(
                        1,
                        m,
                        n,
                        k,
                        ap,
                        ki,
                        1,
                        bp,
                        k,
                        cp,
                        ni,
                        1,
                        false,
                        scratch.as_mut_ptr(),
                    ),
                }
            };
            run();
            let Some(t0) = on_cpu_ms() else { return };
            for _ in 0..5 {
                run();
            }
            let t = (on_cpu_ms().unwrap_or(t0) - t0) / 5.0;
            *best = best.min(t);
        }
    }
    for (name, ms) in names.iter().zip(best) {
        let gflops = 2.0 * (m * n * k) as f64 / ms / 1e6;
        println!("mlp 256x1024x1024 {name:<12} 1 thr on-CPU {ms:>8.3} ms {gflops:>7.1} GFLOP/s");
    }
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    if only.as_deref() == Some("mlp-on-cpu") {
        return transposed_b_on_cpu();
    }
    let peaks = header("GEMM (tessel_kernels::gemm::sgemm), f32, median of timed calls");
    for p in PRODUCTS
        .iter()
        .filter(|p| only.as_ref().is_none_or(|o| p.name.contains(o.as_str())))
    {
        let a = values(p.m * p.k, 1);
        let b = values(p.k * p.n, 2);
        let mut c = vec![0f32; p.m * p.n];
        // Row and column strides of the operands as stored.
        let (rsa, csa) = if p.a_transposed { (1, p.m) } else { (p.k, 1) };
        let (rsb, csb) = if p.b_transposed { (1, p.k) } else { (p.n, 1) };
        let flop = 2.0 * (p.m * p.n * p.k) as f64;
        for backend in [GemmBackend::Gemm, GemmBackend::MatrixMultiply] {
            for threads in THREADS {
                let ms = median_ms(p.reps, || unsafe {
                    sgemm(
                        backend,
                        threads,
                        p.m,
                        p.n,
                        p.k,
                        a.as_ptr(),
                        rsa as isize,
                        csa as isize,
                        b.as_ptr(),
                        rsb as isize,
                        csb as isize,
                        c.as_mut_ptr(),
                        p.n as isize,
                        1,
                        false,
                    )
                });
                let name = format!("{} [{backend:?}]", p.name);
                report(&peaks, &name, threads, flop, ms);
            }
        }
        if p.b_transposed && !p.a_transposed {
            let mut scratch =
                vec![
                    0f32;
                    transposed_rhs_scratch_len(THREADS.into_iter().max().unwrap_or(1), p.n, p.k)
                ];
            for threads in THREADS {
                let ms = median_ms(p.reps, || unsafe {
                    sgemm_transposed_rhs(
                        threads,
                        p.m,
                        p.n,
                        p.k,
                        a.as_ptr(),
                        p.k as isize,
                        1,
                        b.as_ptr(),
                        p.k,
                        c.as_mut_ptr(),
                        p.n as isize,
                        1,
                        false,
                        scratch.as_mut_ptr(),
                    )
                });
                let name = format!("{} [banded b]", p.name);
                report(&peaks, &name, threads, flop, ms);
            }
        }
    }
}
