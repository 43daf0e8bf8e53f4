//! Threefry-2x32's 20 rounds (`tessel_kernels::threefry`) on the MLP step's dropout counters
//! (131072 pairs of words per mask): `cargo bench -p tessel-kernels --bench threefry`. Prints
//! the time per call and per pair of words of the widest path this CPU has (AVX-512, else
//! AVX2) on 1 and 2 threads, and of the scalar rounds on one, beside the CPU and its FMA peak
//! for context.

mod common;

use common::{header, median_ms, THREADS};
use tessel_kernels::threefry::{rounds_scalar, threefry_rounds, Words};

const PAIRS: usize = 131_072;

fn main() {
    header("threefry-2x32 rounds");
    let added: [u32; 12] = std::array::from_fn(|k| 0x9e37_79b9u32.wrapping_mul(k as u32 + 1));
    let counters: Vec<u32> = (0..PAIRS as u32).collect();
    let (mut x0, mut x1) = (vec![0u32; PAIRS], vec![0u32; PAIRS]);
    for threads in THREADS {
        let ms = median_ms(50, || unsafe {
            threefry_rounds(
                Words::Array(counters.as_ptr()),
                Words::Splat(7),
                &added,
                x0.as_mut_ptr(),
                x1.as_mut_ptr(),
                PAIRS,
                threads,
            )
        });
        println!(
            "threefry {PAIRS} pairs, widest path  {threads} thr  {ms:8.3} ms  {:6.2} ns/pair",
            ms * 1e6 / PAIRS as f64
        );
    }
    let ms = median_ms(10, || {
        for (i, (a, b)) in x0.iter_mut().zip(x1.iter_mut()).enumerate() {
            [*a, *b] = rounds_scalar(counters[i], 7, &added);
        }
        std::hint::black_box(&x0);
    });
    println!(
        "threefry {PAIRS} pairs, scalar        1 thr  {ms:8.3} ms  {:6.2} ns/pair",
        ms * 1e6 / PAIRS as f64
    );
}
