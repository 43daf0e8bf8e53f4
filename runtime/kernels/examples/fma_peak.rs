//! Prints this machine's FMA peak on one thread and on all of its threads at once:
//!
//! `fma_peak_gflops threads 1 X threads N Y ratio R`
//!
//! R = Y / X says how much a compute-bound routine can gain from N threads at that minute. A
//! virtual machine's vCPUs may be hyperthreads of one physical core, and the host may move
//! them there and back: two vCPUs sharing one core's FMA pipes give R near 1, not 2. The
//! model suite (`tests/benches/models_vs_tf.sh`) prints R beside each threads ratio.
//!
//! cargo run --release -p tessel-kernels --example fma_peak [-- THREADS]

use tessel_kernels::fma_peak::fma_peak_gflops;

fn main() {
    let threads = match std::env::args().nth(1) {
        Some(arg) => match arg.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                eprintln!("error: THREADS must be a positive integer, got {arg:?}");
                std::process::exit(2);
            }
        },
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let (Some(one), Some(all)) = (fma_peak_gflops(1), fma_peak_gflops(threads)) else {
        eprintln!("error: this CPU has no AVX2+FMA to measure");
        std::process::exit(1);
    };
    println!(
        "fma_peak_gflops threads 1 {one:.1} threads {threads} {all:.1} ratio {:.2}",
        all / one
    );
}
