//! This machine's f32 multiply-add peak, measured, so that GEMM speed is reported as a share of
//! what the cores can do in the same run (the machine is shared and its kind can change: a
//! Zen 4 core runs a 512-bit FMA as two 256-bit halves, a Zen 5 core in one go).

use std::time::Instant;

/// Independent accumulators: enough to cover the FMA latency on two pipes.
const CHAINS: usize = 12;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_loop_avx512(iterations: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_set1_ps(0.0); CHAINS];
    let a = _mm512_set1_ps(0.999_999);
    let b = _mm512_set1_ps(1e-7);
    for _ in 0..iterations {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, a, b);
        }
    }
    acc.iter().map(|x| _mm512_reduce_add_ps(*x)).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_loop_avx2(iterations: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_set1_ps(0.0); CHAINS];
    let a = _mm256_set1_ps(0.999_999);
    let b = _mm256_set1_ps(1e-7);
    for _ in 0..iterations {
        for x in acc.iter_mut() {
            *x = _mm256_fmadd_ps(*x, a, b);
        }
    }
    let mut lanes = [0f32; 8];
    let sum = acc
        .iter()
        .fold(_mm256_set1_ps(0.0), |s, x| _mm256_add_ps(s, *x));
    _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
    lanes.iter().sum()
}

/// A loop of FMA streams: iterations in, a sum out (so it cannot be optimized away).
type FmaLoop = fn(usize) -> f32;

/// Flops of one loop iteration and the loop, for the widest FMA this machine has.
fn widest() -> Option<(f64, FmaLoop)> {
    #[cfg(target_arch = "x86_64")]
    {
        let cpu = crate::cpu::CpuFeatures::detect();
        if cpu.avx512f {
            return Some(((CHAINS * 16 * 2) as f64, |n| unsafe { fma_loop_avx512(n) }));
        }
        if cpu.avx2_fma() {
            return Some(((CHAINS * 8 * 2) as f64, |n| unsafe { fma_loop_avx2(n) }));
        }
    }
    None
}

/// GFLOP/s of dependent-free FMA streams on `threads` threads (best of 3 short runs), or
/// `None` on a machine without AVX2+FMA.
pub fn fma_peak_gflops(threads: usize) -> Option<f64> {
    let (flops_per_iteration, run) = widest()?;
    let iterations = 20_000_000;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let sums: Vec<f32> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| s.spawn(move || run(iterations)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // The sums are used so the loops cannot be optimized away.
        assert!(sums.iter().all(|s| s.is_finite()));
        best = best.min(start.elapsed().as_secs_f64());
    }
    Some(threads as f64 * iterations as f64 * flops_per_iteration / best / 1e9)
}
