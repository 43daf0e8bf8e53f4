//! What every kernels bench shares: the header (the CPU and its FMA peak, measured in the
//! same run), timing, and one result line per routine as GFLOP/s and a share of the peak.

// Each bench uses a part of it.
#![allow(dead_code)]

use std::time::Instant;
use tessel_kernels::{cpu, fma_peak::fma_peak_gflops};

/// The thread counts every routine is measured at.
pub const THREADS: [usize; 2] = [1, 2];

/// The FMA peak of this machine per entry of [`THREADS`] (GFLOP/s), if it has AVX2+FMA.
pub struct Peaks(Vec<Option<f64>>);

/// Prints the CPU and measures the FMA peak on 1 and 2 threads.
pub fn header(what: &str) -> Peaks {
    println!("{what}");
    println!("{}", cpu::describe());
    let peaks: Vec<Option<f64>> = THREADS.iter().map(|&t| fma_peak_gflops(t)).collect();
    for (t, p) in THREADS.iter().zip(&peaks) {
        match p {
            Some(g) => println!("fma peak, {t} thread(s): {g:.0} GFLOP/s"),
            None => println!("fma peak, {t} thread(s): n/a (no AVX2+FMA)"),
        }
    }
    Peaks(peaks)
}

/// Median wall time of `reps` calls of `f` (after one warm-up call), in milliseconds.
pub fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Median wall time of `reps` calls of `f` with the caches emptied before each (untimed): a
/// 64 MiB buffer, twice the L3 here, is read through, so the operands come from DRAM as they
/// do in the step when their writer used streaming stores or ran long before.
pub fn median_ms_cold(reps: usize, mut f: impl FnMut()) -> f64 {
    let sweep = vec![1u8; 64 << 20];
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let sum: u64 = sweep.iter().step_by(64).map(|&b| b as u64).sum();
            std::hint::black_box(sum);
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Prints one result: `name`, `flop` per call, its median time on `threads` threads.
pub fn report(peaks: &Peaks, name: &str, threads: usize, flop: f64, ms: f64) {
    let gflops = flop / ms / 1e6;
    let at = THREADS.iter().position(|&t| t == threads);
    let share = at
        .and_then(|i| peaks.0[i])
        .map(|p| format!(" = {:>3.0}% of peak", 100.0 * gflops / p))
        .unwrap_or_default();
    println!("{name:<48} {threads} thr {ms:>9.3} ms {gflops:>7.1} GFLOP/s{share}");
}

/// Deterministic values in [-1, 1).
pub fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// A 64-byte aligned scratch block of at least `bytes`.
pub fn scratch_block(bytes: usize) -> Vec<[u64; 8]> {
    vec![[0; 8]; bytes.div_ceil(64) + 1]
}
