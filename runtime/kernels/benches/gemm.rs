//! GEMM speed against this machine's FMA peak, measured in the same run:
//! `cargo bench -p tessel-kernels --bench gemm`.
//!
//! The products of the MNIST CNN training step at batch 128 (`mnist_cnn_train_step_b128.hlo`:
//! the dense layers forward and backward, N = normal, T = transposed operand) and a
//! 1024^3 product, with both GEMM libraries on 1 and 2 threads.

mod common;

use common::{header, median_ms, report, values, THREADS};
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

const PRODUCTS: [Product; 7] = [
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
];

fn main() {
    let peaks = header("GEMM (tessel_kernels::gemm::sgemm), f32, median of timed calls");
    for p in &PRODUCTS {
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
    }
}
