//! The pooling routines against memory bandwidth, measured in the same run:
//! `cargo bench -p tessel-kernels --bench pooling`.
//!
//! The MNIST step's max-pools at batch 128 (NHWC f32, 2x2 windows, stride 2): forward with
//! the ReLU (28x28x32 -> 14x14x32 and 14x14x64 -> 7x7x64) and the fused gradient (ReLU gate,
//! select-and-scatter, bias sum cut in two at image 64), on every instruction set this machine
//! has, each beside a copy of the same number of bytes (read and written) on as many threads.

mod common;

use common::{median_ms, values};
use tessel_kernels::cpu::Isa;
use tessel_kernels::parallel::{for_each_worker, Shared};
use tessel_kernels::pooling::{BiasSum, MaxPool, MaxPoolGrad, PoolGeometry};

const REPS: usize = 40;

fn pool(size: usize, channels: usize) -> PoolGeometry {
    PoolGeometry {
        batch: 128,
        height: size,
        width: size,
        channels,
        window: [2, 2],
        stride: [2, 2],
    }
}

/// Median time of copying `bytes / 2` bytes (so `bytes` move) split over `threads` workers.
fn copy_ms(bytes: usize, threads: usize) -> f64 {
    let n = bytes / 8;
    let src = values(n, 3);
    let mut dst = vec![0f32; n];
    let (s, d) = (Shared(src.as_ptr() as *mut f32), Shared(dst.as_mut_ptr()));
    median_ms(REPS, || {
        for_each_worker(threads, |w| {
            let (a, b) = (n * w / threads, n * (w + 1) / threads);
            unsafe { std::ptr::copy_nonoverlapping(s.get().add(a), d.get().add(a), b - a) };
        })
    })
}

/// The index of the first element of `v` on a 4 KiB boundary.
fn page_offset(v: &[f32]) -> usize {
    v.as_ptr().align_offset(4096)
}

fn line(name: &str, threads: usize, bytes: usize, ms: f64, copy: f64) {
    let gbs = bytes as f64 / ms / 1e6;
    println!(
        "{name:<40} {threads} thr {ms:>7.3} ms {gbs:>6.1} GB/s  (copy of the same bytes {copy:.3} ms: {:.0}%)",
        100.0 * copy / ms
    );
}

fn main() {
    println!("{}", tessel_kernels::cpu::describe());
    for (size, channels) in [(28, 32), (14, 64)] {
        let g = pool(size, channels);
        let input = g.batch * size * size * channels;
        let output = input / 4;
        // Page-aligned like the arena's large buffers (offsets are multiples of 64 bytes and,
        // for the MNIST step, of 4 KiB); `dz` 1 KiB further when TESSEL_BENCH_SKEW is set.
        let mut z_block = values(input + 1024, 1);
        let z_at = page_offset(&z_block);
        let z = &mut z_block[z_at..z_at + input];
        let gr = values(output, 2);
        let mut out = vec![0f32; output];
        let skew = if std::env::var("TESSEL_BENCH_SKEW").is_ok() {
            256
        } else {
            0
        };
        let mut dz_block = vec![0f32; input + 2048];
        let dz_at = page_offset(&dz_block) + skew;
        let dz = &mut dz_block[dz_at..dz_at + input];
        let (mut bias, mut partial) = (vec![0f32; channels], vec![0f32; channels]);
        for threads in [1, 2] {
            let fwd_bytes = 4 * (input + output);
            let bwd_bytes = 4 * (2 * input + output);
            let (copy_f, copy_b) = (copy_ms(fwd_bytes, threads), copy_ms(bwd_bytes, threads));
            for isa in Isa::available().into_iter().filter(|&i| i != Isa::Portable) {
                let mut p = MaxPool::new(g, true, threads).unwrap();
                p.isa = isa;
                let ms = median_ms(REPS, || unsafe { p.run(z.as_ptr(), out.as_mut_ptr()) });
                let name = format!("max-pool fwd {size}x{size}x{channels} {}", isa.name());
                line(&name, threads, fwd_bytes, ms, copy_f);
                let mut r = MaxPoolGrad::new(g, true, true, threads).unwrap();
                r.isa = isa;
                let ms = median_ms(REPS, || unsafe {
                    let sum = BiasSum {
                        bias: bias.as_mut_ptr(),
                        partial: Some((partial.as_mut_ptr(), 64)),
                    };
                    r.run(z.as_ptr(), gr.as_ptr(), dz.as_mut_ptr(), Some(sum))
                });
                let name = format!("max-pool grad {size}x{size}x{channels} {}", isa.name());
                line(&name, threads, bwd_bytes, ms, copy_b);
                // The same from the window choices the forward records (one byte per output)
                // instead of the pre-activation.
                let mut choices = vec![0u8; output];
                unsafe { p.run_with_choices(z.as_ptr(), out.as_mut_ptr(), choices.as_mut_ptr()) };
                let ms = median_ms(REPS, || unsafe {
                    let sum = BiasSum {
                        bias: bias.as_mut_ptr(),
                        partial: Some((partial.as_mut_ptr(), 64)),
                    };
                    r.run_from_choices(choices.as_ptr(), gr.as_ptr(), dz.as_mut_ptr(), Some(sum))
                });
                let bytes = 4 * (input + output) + output;
                let name = format!(
                    "max-pool grad from choices {size}x{size}x{channels} {}",
                    isa.name()
                );
                line(&name, threads, bytes, ms, copy_ms(bytes, threads));
            }
        }
    }
}
