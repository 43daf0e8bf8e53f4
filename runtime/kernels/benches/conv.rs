//! Convolution routines against this machine's FMA peak, measured in the same run:
//! `cargo bench -p tessel-kernels --bench conv`.
//!
//! The convolutions of the MNIST CNN training step at batch 128, NHWC f32, 5x5 windows
//! padded by 2: conv1 (28x28, 1 -> 32 channels) and conv2 (14x14, 32 -> 64), forward and
//! weight gradient, and conv2's data gradient. Each on the routine the JIT picks for it
//! (direct loops, Winograd) and on the general patch-matrix GEMM. GFLOP/s count the direct
//! algorithm's multiply-adds (2 flops each), whatever the routine does.
//!
//! Then the 3x3 convolutions of the next models (`3x3` lines): the Fashion-MNIST CNN's second
//! layer (14x14, 32 -> 64, `same`) and ResNet-20's three stages at b128 (32x32x16, 16x16x32,
//! 8x8x64), forward, data and weight gradient on Winograd F(2x2) and F(4x4) and on the patch
//! GEMM; and ResNet-20's down-sampling, a stride-2 3x3 and a stride-2 1x1 projection, on the
//! patch GEMM, their data gradients on the phase split and their weight gradients on the
//! strided weight gradient (one GEMM per tap). `cargo bench -p tessel-kernels
//! --bench conv -- 3x3` runs only those, `-- stride2` only the down-sampling, `-- mnist` only
//! the MNIST lines.

mod common;

use common::{header, median_ms, median_ms_cold, report, scratch_block, values, Peaks, THREADS};
use tessel_kernels::conv_direct::{DirectConv, DirectWeightGradient};
use tessel_kernels::gemm::GemmBackend;
use tessel_kernels::patch_gemm::{ConvGeometry, PatchConv};
use tessel_kernels::phase_conv::{DilatedInputGeometry, PhaseConv};
use tessel_kernels::pooling::{MaxPool, PoolEpilogue, PoolGeometry};
use tessel_kernels::strided_weight_grad::{StridedWeightGradGeometry, StridedWeightGradient};
use tessel_kernels::winograd::{
    KernelLayout, TransformOrder, WinogradConv, WinogradFilterGradient,
};
use tessel_kernels::Conv2dGeometry;

/// The MNIST step's convolution of `size x size x channels` images into `out_channels`.
fn mnist_conv(size: usize, channels: usize, out_channels: usize) -> Conv2dGeometry {
    Conv2dGeometry {
        batch: 128,
        height: size,
        width: size,
        channels,
        window: [5, 5],
        out_channels,
        padding: [(2, 2), (2, 2)],
    }
}

/// Multiply-adds of the forward convolution (and of its gradients) times two.
fn flop(g: &Conv2dGeometry) -> f64 {
    let [oh, ow] = g.output_size().unwrap();
    2.0 * (g.batch * oh * ow * g.out_channels * g.window[0] * g.window[1] * g.channels) as f64
}

/// The forward convolution for the patch GEMM (NHWC input, HWIO kernel: the `Rows` form).
fn patch_forward(g: &Conv2dGeometry) -> ConvGeometry {
    let [oh, ow] = g.output_size().unwrap();
    ConvGeometry {
        batch: g.batch,
        channels: g.channels,
        spatial: vec![g.height, g.width],
        window: g.window.to_vec(),
        in_per_group: g.channels,
        out_features: g.out_channels,
        out_batch: g.batch,
        out_spatial: vec![oh, ow],
        stride: vec![1, 1],
        pad_low: g.padding.iter().map(|p| p.0 as i64).collect(),
        base_dilation: vec![1, 1],
        window_dilation: vec![1, 1],
        reversal: vec![false, false],
        feature_groups: 1,
        batch_groups: 1,
    }
}

/// The weight gradient as the convolution JAX emits (`f01b_i01o->01bf`, the `Columns` form):
/// the images are its features, the channels its batch, `dY` its kernel.
fn patch_weight_gradient(g: &Conv2dGeometry) -> ConvGeometry {
    let [oh, ow] = g.output_size().unwrap();
    ConvGeometry {
        batch: g.channels,
        channels: g.batch,
        spatial: vec![g.height, g.width],
        window: vec![oh, ow],
        in_per_group: g.batch,
        out_features: g.out_channels,
        out_batch: g.channels,
        out_spatial: g.window.to_vec(),
        ..patch_forward(g)
    }
}

/// The data gradient: `dY` convolved with the reversed kernel, output and input channels
/// swapped (`b01f_01oi->b01f`; here with the kernel already as HWIO).
fn patch_data_gradient(g: &Conv2dGeometry) -> ConvGeometry {
    let [oh, ow] = g.output_size().unwrap();
    ConvGeometry {
        channels: g.out_channels,
        spatial: vec![oh, ow],
        in_per_group: g.out_channels,
        out_features: g.channels,
        out_spatial: vec![g.height, g.width],
        reversal: vec![true, true],
        pad_low: g
            .window
            .iter()
            .zip(&g.padding)
            .map(|(&k, p)| k as i64 - 1 - p.0 as i64)
            .collect(),
        ..patch_forward(g)
    }
}

/// Times the patch GEMM on `geometry` with operands of `sizes` floats.
fn bench_patch(peaks: &Peaks, name: &str, geometry: ConvGeometry, sizes: [usize; 3], flop: f64) {
    let (x, k) = (values(sizes[0], 1), values(sizes[1], 2));
    let mut y = vec![0f32; sizes[2]];
    for threads in THREADS {
        let plan = PatchConv::new(geometry.clone(), GemmBackend::Gemm, threads).unwrap();
        let mut scratch = scratch_block(plan.scratch_bytes());
        let ms = median_ms(10, || unsafe {
            plan.run(
                x.as_ptr(),
                k.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr() as *mut u8,
            )
        });
        report(peaks, &format!("{name} [patch GEMM]"), threads, flop, ms);
    }
}

/// Sizes of the input, kernel and output of the forward convolution.
fn forward_sizes(g: &Conv2dGeometry) -> [usize; 3] {
    let [oh, ow] = g.output_size().unwrap();
    [
        g.batch * g.height * g.width * g.channels,
        g.window[0] * g.window[1] * g.channels * g.out_channels,
        g.batch * oh * ow * g.out_channels,
    ]
}

/// Milliseconds of a forward convolution followed by the MNIST step's ReLU + 2x2 max-pool as
/// a separate pass, and with the pool in the convolution's epilogue; `conv(y, pool)` runs the
/// convolution into `y`.
fn pooled(
    g: &Conv2dGeometry,
    threads: usize,
    mut conv: impl FnMut(*mut f32, Option<PoolEpilogue>),
) -> [f64; 2] {
    let [oh, ow] = g.output_size().unwrap();
    let geometry = PoolGeometry {
        batch: g.batch,
        height: oh,
        width: ow,
        channels: g.out_channels,
        window: [2, 2],
        stride: [2, 2],
    };
    let pool = MaxPool::new(geometry, true, threads).unwrap();
    let mut y = vec![0f32; g.batch * oh * ow * g.out_channels];
    let mut p = vec![0f32; g.batch * (oh / 2) * (ow / 2) * g.out_channels];
    let separate = median_ms(10, || {
        conv(y.as_mut_ptr(), None);
        unsafe { pool.run(y.as_ptr(), p.as_mut_ptr()) };
    });
    let epilogue = PoolEpilogue {
        pool,
        output: p.as_mut_ptr(),
        choices: std::ptr::null_mut(),
        discard_output: false,
    };
    let fused = median_ms(10, || conv(y.as_mut_ptr(), Some(epilogue)));
    [separate, fused]
}

fn main() {
    // `cargo bench` passes `--bench`; the first other argument picks the sections.
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let runs = |section: &str| only.as_deref().is_none_or(|o| section.contains(o));
    let peaks = header("convolution routines (tessel_kernels), b128, f32 NHWC");
    if runs("mnist") {
        mnist(&peaks);
    }
    if runs("3x3") {
        three_by_three(&peaks);
    }
    if runs("3x3 stride2") {
        down_sampling(&peaks);
    }
}

/// The MNIST step's 5x5 convolutions.
fn mnist(peaks: &Peaks) {
    let (conv1, conv2) = (mnist_conv(28, 1, 32), mnist_conv(14, 32, 64));
    for (name, g) in [
        ("conv1 5x5x1->32 28x28", conv1),
        ("conv2 5x5x32->64 14x14", conv2),
    ] {
        let [xs, ks, ys] = forward_sizes(&g);
        let (x, k, dy) = (values(xs, 1), values(ks, 2), values(ys, 3));
        let (mut y, mut dk) = (vec![0f32; ys], vec![0f32; ks]);
        for threads in THREADS {
            let run = |ms: f64, routine: &str| {
                report(peaks, &format!("{name} {routine}"), threads, flop(&g), ms)
            };
            if let Ok(plan) = DirectConv::new(&g, threads) {
                let mut s = scratch_block(plan.scratch_bytes());
                let ms = median_ms(10, || unsafe {
                    plan.run(
                        x.as_ptr(),
                        k.as_ptr(),
                        y.as_mut_ptr(),
                        s.as_mut_ptr() as *mut u8,
                    )
                });
                run(ms, "forward [direct]");
            }
            if let Ok(plan) = DirectConv::new(&g, threads) {
                let mut s = scratch_block(plan.scratch_bytes());
                let [sep, fused] = pooled(&g, threads, |y, pool| unsafe {
                    let s = s.as_mut_ptr() as *mut u8;
                    plan.run_fused(x.as_ptr(), k.as_ptr(), None, pool, y, s)
                });
                run(sep, "forward, then ReLU + 2x2 max-pool [direct]");
                run(
                    fused,
                    "forward with ReLU + 2x2 max-pool in the epilogue [direct]",
                );
            }
            if let Ok(plan) = DirectWeightGradient::new(&g, threads) {
                let mut s = scratch_block(plan.scratch_bytes());
                let mut call = || unsafe {
                    plan.run(
                        x.as_ptr(),
                        dy.as_ptr(),
                        dk.as_mut_ptr(),
                        s.as_mut_ptr() as *mut u8,
                    )
                };
                run(median_ms(10, &mut call), "weight grad [direct]");
                // Its gradient operand comes from DRAM in the step (the pool gradient writes it
                // with streaming stores): the case its prefetch is for.
                let cold = median_ms_cold(10, &mut call);
                run(cold, "weight grad [direct], operands out of cache");
            }
            // F(2x2), the routine's default, and F(4x4), the JIT's choice for 5x5 windows.
            for tile in [2, 4] {
                if let Ok(plan) = WinogradConv::with_tile(&g, KernelLayout::hwio(&g), threads, tile)
                {
                    let mut s = scratch_block(plan.scratch_bytes());
                    let ms = median_ms(10, || unsafe {
                        plan.run(
                            x.as_ptr(),
                            k.as_ptr(),
                            y.as_mut_ptr(),
                            s.as_mut_ptr() as *mut u8,
                        )
                    });
                    run(ms, &format!("forward [winograd F({tile}x{tile})]"));
                    if tile == 4 {
                        let [sep, fused] = pooled(&g, threads, |y, pool| unsafe {
                            let s = s.as_mut_ptr() as *mut u8;
                            plan.run_fused(x.as_ptr(), k.as_ptr(), None, pool, y, s)
                        });
                        let what = "ReLU + 2x2 max-pool [winograd F(4x4)]";
                        run(sep, &format!("forward, then {what}"));
                        run(fused, &format!("forward with {what} in the epilogue"));
                    }
                }
            }
            let hwio = [
                g.window[1] * g.channels * g.out_channels,
                g.channels * g.out_channels,
                g.out_channels,
                1,
            ];
            for tile in [2, 4] {
                if let Ok(plan) = WinogradFilterGradient::with_tile(&g, hwio, threads, tile) {
                    let mut s = scratch_block(plan.scratch_bytes());
                    let mut call = || unsafe {
                        plan.run(
                            x.as_ptr(),
                            dy.as_ptr(),
                            dk.as_mut_ptr(),
                            s.as_mut_ptr() as *mut u8,
                        )
                    };
                    let ms = median_ms(10, &mut call);
                    run(ms, &format!("weight grad [winograd F({tile}x{tile})]"));
                    // In the step dY comes from DRAM (streaming stores): what the prefetch of
                    // the next block's images is for.
                    let cold = median_ms_cold(10, &mut call);
                    let what =
                        format!("weight grad [winograd F({tile}x{tile})], operands out of cache");
                    run(cold, &what);
                }
            }
        }
        bench_patch(
            peaks,
            &format!("{name} forward"),
            patch_forward(&g),
            [xs, ks, ys],
            flop(&g),
        );
        bench_patch(
            peaks,
            &format!("{name} weight grad"),
            patch_weight_gradient(&g),
            [xs, ys, ks],
            flop(&g),
        );
    }
    let [xs, ks, ys] = forward_sizes(&conv2);
    bench_patch(
        peaks,
        "conv2 5x5x32->64 14x14 data grad",
        patch_data_gradient(&conv2),
        [ys, ks, xs],
        flop(&conv2),
    );
}

/// A b128 `same` 3x3 convolution of `size x size x channels` images into `out_channels`.
fn same_3x3(size: usize, channels: usize, out_channels: usize) -> Conv2dGeometry {
    Conv2dGeometry {
        window: [3, 3],
        padding: [(1, 1), (1, 1)],
        ..mnist_conv(size, channels, out_channels)
    }
}

/// The 3x3 convolutions of the Fashion-MNIST CNN and ResNet-20, each use on Winograd F(2x2)
/// and F(4x4) and on the patch GEMM.
fn three_by_three(peaks: &Peaks) {
    for (name, g) in [
        ("3x3 fashion 14x14x32->64", same_3x3(14, 32, 64)),
        ("3x3 resnet 32x32x16->16", same_3x3(32, 16, 16)),
        ("3x3 resnet 16x16x32->32", same_3x3(16, 32, 32)),
        ("3x3 resnet 8x8x64->64", same_3x3(8, 64, 64)),
    ] {
        let [xs, ks, ys] = forward_sizes(&g);
        let (x, k, dy) = (values(xs, 1), values(ks, 2), values(ys, 3));
        let (mut y, mut dk, mut dx) = (vec![0f32; ys], vec![0f32; ks], vec![0f32; xs]);
        let (c, o) = (g.channels, g.out_channels);
        // The data gradient: dY convolved with the reversed HWIO kernel, its output channels
        // read as input channels (the JIT's `b01f_01oi->b01f`).
        let data_grad = Conv2dGeometry {
            channels: o,
            out_channels: c,
            ..g
        };
        let reversed = KernelLayout {
            strides: [3 * c * o, c * o, 1, o],
            reversed: [true, true],
        };
        let hwio = [3 * c * o, c * o, o, 1];
        for threads in THREADS {
            let run = |ms: f64, routine: &str| {
                report(peaks, &format!("{name} {routine}"), threads, flop(&g), ms)
            };
            for tile in [2, 4] {
                let f = format!("F({tile}x{tile})");
                if let Ok(plan) = WinogradConv::with_tile(&g, KernelLayout::hwio(&g), threads, tile)
                {
                    let mut s = scratch_block(plan.scratch_bytes());
                    let ms = median_ms(10, || unsafe {
                        let s = s.as_mut_ptr() as *mut u8;
                        plan.run(x.as_ptr(), k.as_ptr(), y.as_mut_ptr(), s)
                    });
                    run(ms, &format!("forward [winograd {f}]"));
                }
                if let Ok(plan) = WinogradConv::with_tile(&data_grad, reversed, threads, tile) {
                    let plan = plan.with_transform_order(TransformOrder::Factored);
                    let mut s = scratch_block(plan.scratch_bytes());
                    let ms = median_ms(10, || unsafe {
                        let s = s.as_mut_ptr() as *mut u8;
                        plan.run(dy.as_ptr(), k.as_ptr(), dx.as_mut_ptr(), s)
                    });
                    run(ms, &format!("data grad [winograd {f}]"));
                }
                if let Ok(plan) = WinogradFilterGradient::with_tile(&g, hwio, threads, tile) {
                    let mut s = scratch_block(plan.scratch_bytes());
                    let ms = median_ms(10, || unsafe {
                        let s = s.as_mut_ptr() as *mut u8;
                        plan.run(x.as_ptr(), dy.as_ptr(), dk.as_mut_ptr(), s)
                    });
                    run(ms, &format!("weight grad [winograd {f}]"));
                }
            }
        }
        let f = flop(&g);
        bench_patch(
            peaks,
            &format!("{name} forward"),
            patch_forward(&g),
            [xs, ks, ys],
            f,
        );
        let (geometry, sizes) = (patch_data_gradient(&g), [ys, ks, xs]);
        bench_patch(peaks, &format!("{name} data grad"), geometry, sizes, f);
        let (geometry, sizes) = (patch_weight_gradient(&g), [xs, ys, ks]);
        bench_patch(peaks, &format!("{name} weight grad"), geometry, sizes, f);
    }
}

/// ResNet-20's down-sampling (32x32x16 -> 16x16x32 and 16x16x32 -> 8x8x64): the stride-2 3x3
/// of the block's first convolution and the stride-2 1x1 projection of its shortcut (TF's
/// `same`: no low padding), forward and both gradients as XLA writes them: the data gradient
/// dilates dY by the stride (3/4 of the patch GEMM's entries are holes; the phase split skips
/// them), the weight gradient dilates the window.
fn down_sampling(peaks: &Peaks) {
    for (size, c, o) in [(32usize, 16usize, 32usize), (16, 32, 64)] {
        let half = size / 2;
        for r in [3usize, 1] {
            let name = format!("{r}x{r} resnet s2 {size}x{size}x{c}->{o}");
            let forward = ConvGeometry {
                window: vec![r; 2],
                out_features: o,
                out_spatial: vec![half, half],
                stride: vec![2, 2],
                pad_low: vec![0; 2],
                ..patch_forward(&mnist_conv(size, c, o))
            };
            let data_grad = ConvGeometry {
                channels: o,
                spatial: vec![half, half],
                in_per_group: o,
                out_features: c,
                out_spatial: vec![size, size],
                stride: vec![1, 1],
                pad_low: vec![r as i64 - 1; 2],
                base_dilation: vec![2, 2],
                reversal: vec![true, true],
                ..forward.clone()
            };
            let weight_grad = ConvGeometry {
                batch: c,
                channels: 128,
                spatial: vec![size, size],
                window: vec![half, half],
                in_per_group: 128,
                out_features: o,
                out_batch: c,
                out_spatial: vec![r; 2],
                stride: vec![1, 1],
                window_dilation: vec![2, 2],
                ..forward.clone()
            };
            let [xs, ks, ys] = [128 * size * size * c, r * r * c * o, 128 * half * half * o];
            let f = 2.0 * (128 * half * half * o * r * r * c) as f64;
            bench_patch(peaks, &format!("{name} forward"), forward, [xs, ks, ys], f);
            bench_patch(
                peaks,
                &format!("{name} data grad"),
                data_grad,
                [ys, ks, xs],
                f,
            );
            bench_phase(peaks, &format!("{name} data grad"), r, [size, c, o], f);
            bench_patch(
                peaks,
                &format!("{name} weight grad"),
                weight_grad,
                [xs, ys, ks],
                f,
            );
            bench_strided_wgrad(peaks, &format!("{name} weight grad"), r, [size, c, o], f);
        }
    }
}

/// Times the strided weight gradient ([`StridedWeightGradient`]) of a stride-2 `r x r`
/// convolution of `size x size x c` images into `o` channels as XLA writes it: TF's `same`
/// pads a 3x3 window 0_1, and a 1x1 window's gradient is a 2x2 window of which the step
/// slices one tap (`flop` counts that one).
fn bench_strided_wgrad(peaks: &Peaks, name: &str, r: usize, [size, c, o]: [usize; 3], flop: f64) {
    let half = size / 2;
    let pad = if r == 3 { (0, 1) } else { (0, 0) };
    let window = StridedWeightGradGeometry::window_for(size, pad, 2, half).unwrap();
    let g = StridedWeightGradGeometry {
        images: 128,
        height: size,
        width: size,
        channels: c,
        out_channels: o,
        window: [window; 2],
        stride: [2, 2],
        padding: [pad; 2],
        grad: [half, half],
    };
    let (x, dy) = (
        values(128 * size * size * c, 1),
        values(128 * half * half * o, 2),
    );
    let mut dw = vec![0f32; window * window * c * o];
    let strides = [window * c * o, c * o, o, 1];
    for threads in THREADS {
        let plan = StridedWeightGradient::new(&g, strides, threads).unwrap();
        let mut scratch = scratch_block(plan.scratch_bytes());
        let ms = median_ms(10, || unsafe {
            plan.run(
                x.as_ptr(),
                dy.as_ptr(),
                dw.as_mut_ptr(),
                scratch.as_mut_ptr() as *mut u8,
            )
        });
        let label = format!("{name} [strided, {window}x{window} taps]");
        report(peaks, &label, threads, flop, ms);
    }
}

/// Times the phase split ([`PhaseConv`]) on the data gradient of a stride-2 `r x r`
/// convolution of `size x size x c` images into `o` channels (`dY` dilated by 2 and padded
/// `r - 1` low, the HWIO kernel reversed), as XLA writes it.
fn bench_phase(peaks: &Peaks, name: &str, r: usize, [size, c, o]: [usize; 3], flop: f64) {
    let half = size / 2;
    let g = DilatedInputGeometry {
        batch: 128,
        height: half,
        width: half,
        channels: o,
        window: [r, r],
        out_channels: c,
        out_size: [size, size],
        dilation: [2, 2],
        pad_low: [r as isize - 1; 2],
    };
    let layout = KernelLayout {
        strides: [r * c * o, c * o, 1, o],
        reversed: [true, true],
    };
    let (dy, k) = (values(128 * half * half * o, 1), values(r * r * c * o, 2));
    let mut dx = vec![0f32; 128 * size * size * c];
    for threads in THREADS {
        let plan = PhaseConv::new(g, layout, threads).unwrap();
        let mut scratch = scratch_block(plan.scratch_bytes());
        let ms = median_ms(10, || unsafe {
            plan.run(
                dy.as_ptr(),
                k.as_ptr(),
                dx.as_mut_ptr(),
                scratch.as_mut_ptr() as *mut u8,
            )
        });
        report(peaks, &format!("{name} [phase split]"), threads, flop, ms);
    }
}
