//! The pooling routines on every instruction set this machine has, against definitions written
//! from the HLO semantics (sums in f64), on odd and empty shapes, with NaN, signed zeros and
//! ties in the data.

use super::*;

fn geo(n: usize, h: usize, w: usize, c: usize, k: [usize; 2], s: [usize; 2]) -> PoolGeometry {
    PoolGeometry {
        batch: n,
        height: h,
        width: w,
        channels: c,
        window: k,
        stride: s,
    }
}

/// Values with many ties, zeros of both signs, negatives and a few NaN.
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 23 {
                0 => f32::NAN,
                1 => -0.0,
                2 => 0.0,
                3..=8 => (x % 5) as f32 - 2.0,
                _ => ((x >> 20) % 2000) as f32 / 1000.0 - 1.0,
            }
        })
        .collect()
}

fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// `maximum` as HLO defines it (NaN wins; `x >= y ? x : y`).
fn hlo_max(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else if x >= y {
        x
    } else {
        y
    }
}

fn at(g: &PoolGeometry, n: usize, h: usize, w: usize, c: usize) -> usize {
    ((n * g.height + h) * g.width + w) * g.channels + c
}

fn forward_def(g: &PoolGeometry, relu: bool, x: &[f32]) -> Vec<f32> {
    let [oh, ow] = g.output_hw();
    let mut out = Vec::new();
    for n in 0..g.batch {
        for i in 0..oh {
            for j in 0..ow {
                for c in 0..g.channels {
                    let mut acc = f32::NEG_INFINITY;
                    for a in 0..g.window[0] {
                        for b in 0..g.window[1] {
                            let v = x[at(g, n, i * g.stride[0] + a, j * g.stride[1] + b, c)];
                            acc = hlo_max(acc, if relu { hlo_max(v, 0.0) } else { v });
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    out
}

/// select-and-scatter (select `>=`, scatter add into 0), the gate and the f64 bias sum.
fn backward_def(
    g: &PoolGeometry,
    relu: bool,
    gate: bool,
    z: &[f32],
    gr: &[f32],
) -> (Vec<f32>, Vec<f64>) {
    let [oh, ow] = g.output_hw();
    let mut dz = vec![0f32; z.len()];
    let mut bias = vec![0f64; g.channels];
    for n in 0..g.batch {
        for i in 0..oh {
            for j in 0..ow {
                for c in 0..g.channels {
                    let mut sel: Option<(usize, f32)> = None;
                    for a in 0..g.window[0] {
                        for b in 0..g.window[1] {
                            let p = at(g, n, i * g.window[0] + a, j * g.window[1] + b, c);
                            let m = if relu { hlo_max(z[p], 0.0) } else { z[p] };
                            match sel {
                                Some((_, v)) if v >= m => {}
                                _ => sel = Some((p, m)),
                            }
                        }
                    }
                    let p = sel.unwrap().0;
                    dz[p] = 0.0 + gr[((n * oh + i) * ow + j) * g.channels + c];
                }
            }
        }
    }
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    for (p, d) in dz.iter_mut().enumerate() {
        if gate && !(z[p] > 0.0) {
            *d = 0.0;
        }
        bias[p % g.channels.max(1)] += *d as f64;
    }
    (dz, bias)
}

fn shapes() -> Vec<PoolGeometry> {
    vec![
        geo(3, 28, 28, 32, [2, 2], [2, 2]),
        geo(2, 14, 14, 64, [2, 2], [2, 2]),
        geo(2, 6, 4, 17, [2, 2], [2, 2]),
        geo(3, 6, 6, 3, [3, 3], [3, 3]),
        geo(2, 4, 6, 33, [2, 3], [2, 3]),
        geo(1, 2, 2, 1, [1, 1], [1, 1]),
        geo(2, 8, 8, 40, [4, 4], [4, 4]),
    ]
}

/// [`shapes`] and forward-only ones: windows that overlap or leave rows unused.
fn forward_shapes() -> Vec<PoolGeometry> {
    let mut shapes = shapes();
    shapes.push(geo(2, 7, 9, 5, [3, 3], [2, 2])); // overlapping, odd sizes
    shapes.push(geo(1, 5, 5, 24, [2, 2], [2, 2])); // last row and column unused
    shapes
}

#[test]
fn forward_matches_the_definition() {
    let mut shapes = forward_shapes();
    // More window positions than a choice holds: pooled, never chosen.
    shapes.push(geo(2, 10, 10, 11, [5, 5], [5, 5]));
    for g in shapes {
        let x = data(g.batch * g.in_image(), 7);
        for relu in [false, true] {
            let want = forward_def(&g, relu, &x);
            for isa in Isa::available() {
                for threads in [1, 2] {
                    let mut p = MaxPool::new(g, relu, threads).unwrap();
                    p.isa = isa;
                    let mut out = vec![7f32; want.len()];
                    unsafe { p.run(x.as_ptr(), out.as_mut_ptr()) };
                    for (k, (&a, &b)) in out.iter().zip(&want).enumerate() {
                        assert!(same(a, b), "{g:?} relu {relu} {isa:?} at {k}: {a} vs {b}");
                    }
                }
            }
        }
    }
}

/// Pooling block by block, as a convolution's epilogue does, gives the whole pass's bits: for
/// each block size `fits_blocks` accepts, every block of every image, in an arbitrary order.
#[test]
fn block_by_block_equals_the_whole_pass() {
    let cases = [
        (geo(2, 14, 14, 64, [2, 2], [2, 2]), [4, 4]),
        (geo(2, 13, 11, 17, [2, 2], [2, 2]), [4, 4]), // odd sizes: a row and column unused
        (geo(2, 28, 28, 32, [2, 2], [2, 2]), [4, usize::MAX]), // whole rows
        (geo(1, 6, 7, 33, [2, 2], [2, 2]), [2, 2]),
        (geo(2, 9, 9, 5, [3, 3], [3, 3]), [3, 3]),
        (geo(1, 8, 12, 3, [2, 3], [2, 3]), [4, 6]),
        (geo(1, 8, 8, 20, [1, 1], [2, 2]), [4, 4]), // windows smaller than their stride
    ];
    for (g, block) in cases {
        let x = data(g.batch * g.in_image(), 11);
        for relu in [false, true] {
            let want = forward_def(&g, relu, &x);
            for isa in Isa::available() {
                let mut p = MaxPool::new(g, relu, 1).unwrap();
                p.isa = isa;
                assert!(p.fits_blocks(block), "{g:?} {block:?}");
                let mut out = vec![7f32; want.len()];
                let step = |d: usize, n: usize| block[d].min(n);
                let mut blocks = Vec::new();
                for n in 0..g.batch {
                    for y in (0..g.height).step_by(step(0, g.height)) {
                        for xx in (0..g.width).step_by(step(1, g.width)) {
                            let rows = [y, (y + step(0, g.height)).min(g.height)];
                            let cols = [xx, (xx + step(1, g.width)).min(g.width)];
                            blocks.push((n, rows, cols));
                        }
                    }
                }
                // Workers take blocks in any order.
                blocks.reverse();
                for (n, rows, cols) in blocks {
                    unsafe { p.run_block(x.as_ptr(), out.as_mut_ptr(), n, rows, cols) };
                }
                for (k, (&a, &b)) in out.iter().zip(&want).enumerate() {
                    assert!(
                        same(a, b),
                        "{g:?} {block:?} relu {relu} {isa:?} at {k}: {a} vs {b}"
                    );
                }
            }
        }
    }
    // Windows that straddle blocks are refused.
    let overlapping = MaxPool::new(geo(1, 8, 8, 4, [3, 3], [2, 2]), false, 1).unwrap();
    assert!(!overlapping.fits_blocks([4, 4]));
    let odd_stride = MaxPool::new(geo(1, 9, 9, 4, [3, 3], [3, 3]), false, 1).unwrap();
    assert!(!odd_stride.fits_blocks([4, 4]));
    assert!(odd_stride.fits_blocks([6, usize::MAX]));
}

#[test]
fn backward_matches_the_definition_on_every_path_and_thread_count() {
    for g in shapes() {
        let z = data(g.batch * g.in_image(), 3);
        let gr = data(g.batch * g.out_image(), 5);
        for (relu, gate) in [(true, true), (false, true), (true, false), (false, false)] {
            let (want, want_bias) = backward_def(&g, relu, gate, &z, &gr);
            let mut first_bias: Option<Vec<f32>> = None;
            for (isa, stream) in Isa::available()
                .into_iter()
                .flat_map(|i| [(i, false), (i, true)])
            {
                for threads in [1, 2] {
                    let mut r = MaxPoolGrad::new(g, relu, gate, threads).unwrap();
                    r.isa = isa;
                    r.stream = stream;
                    // 64-byte aligned, so that the streaming stores are taken where asked.
                    let mut dz_block = vec![7f32; z.len() + 16];
                    let skip = dz_block.as_ptr().align_offset(64);
                    let dz = &mut dz_block[skip..skip + z.len()];
                    let mut bias = vec![7f32; g.channels];
                    let mut partial = vec![7f32; g.channels];
                    let sum = BiasSum {
                        bias: bias.as_mut_ptr(),
                        partial: Some((partial.as_mut_ptr(), g.batch / 2)),
                    };
                    unsafe { r.run(z.as_ptr(), gr.as_ptr(), dz.as_mut_ptr(), Some(sum)) };
                    for (k, (&a, &b)) in dz.iter().zip(&want).enumerate() {
                        assert!(same(a, b), "{g:?} {isa:?} dz at {k}: {a} vs {b}");
                    }
                    for (c, (&a, &b)) in bias.iter().zip(&want_bias).enumerate() {
                        assert!(
                            same(a, b as f32) || (a as f64 - b).abs() <= 1e-5 * (1.0 + b.abs()),
                            "{g:?} {isa:?} bias {c}: {a} vs {b}"
                        );
                    }
                    // The same bits on every path and thread count.
                    match &first_bias {
                        None => first_bias = Some(bias.clone()),
                        Some(f) => assert!(f.iter().zip(&bias).all(|(&a, &b)| same(a, b))),
                    }
                    // In place (`dz` over `z`) and without the bias: the same gradient.
                    let mut inplace = z.clone();
                    let p = inplace.as_mut_ptr();
                    unsafe { r.run(p, gr.as_ptr(), p, None) };
                    assert!(inplace.iter().zip(&want).all(|(&a, &b)| same(a, b)));
                }
            }
        }
    }
}

/// The window choice of each output as the definition makes it: the select's position (`>=`,
/// first wins, NaN loses to what follows) and whether the value there is above 0.
fn choices_def(g: &PoolGeometry, relu: bool, z: &[f32]) -> Vec<u8> {
    let [oh, ow] = g.output_hw();
    let mut out = Vec::new();
    for n in 0..g.batch {
        for i in 0..oh {
            for j in 0..ow {
                for c in 0..g.channels {
                    let mut sel: Option<(usize, f32, f32)> = None;
                    let mut k = 0;
                    for a in 0..g.window[0] {
                        for b in 0..g.window[1] {
                            let v = z[at(g, n, i * g.stride[0] + a, j * g.stride[1] + b, c)];
                            let m = if relu { hlo_max(v, 0.0) } else { v };
                            match sel {
                                Some((_, best, _)) if best >= m => {}
                                _ => sel = Some((k, m, v)),
                            }
                            k += 1;
                        }
                    }
                    let (k, _, v) = sel.unwrap();
                    out.push(k as u8 | if v > 0.0 { CHOICE_OPEN } else { 0 });
                }
            }
        }
    }
    out
}

/// The forward pass records the choices of the definition, whole or block by block, on every
/// path and thread count, and its pooled values do not change.
#[test]
fn forward_records_the_window_choices() {
    for g in forward_shapes() {
        let x = data(g.batch * g.in_image(), 13);
        for relu in [false, true] {
            let want = forward_def(&g, relu, &x);
            let want_choices = choices_def(&g, relu, &x);
            for isa in Isa::available() {
                for threads in [1, 2] {
                    let mut p = MaxPool::new(g, relu, threads).unwrap();
                    p.isa = isa;
                    assert!(p.can_choose());
                    let mut out = vec![7f32; want.len()];
                    let mut choices = vec![0xeeu8; want.len()];
                    unsafe {
                        p.run_with_choices(x.as_ptr(), out.as_mut_ptr(), choices.as_mut_ptr())
                    };
                    for (k, (&a, &b)) in out.iter().zip(&want).enumerate() {
                        assert!(same(a, b), "{g:?} relu {relu} {isa:?} at {k}: {a} vs {b}");
                    }
                    assert_eq!(choices, want_choices, "{g:?} relu {relu} {isa:?} {threads}");
                }
                // Block by block, as a convolution's epilogue pools, where blocks fit.
                let p = MaxPool {
                    isa,
                    ..MaxPool::new(g, relu, 1).unwrap()
                };
                let block = [g.stride[0] * 2, g.stride[1] * 2];
                if p.fits_blocks(block) {
                    let mut out = vec![7f32; want.len()];
                    let mut choices = vec![0xeeu8; want.len()];
                    for n in (0..g.batch).rev() {
                        for y in (0..g.height).step_by(block[0]) {
                            for xx in (0..g.width).step_by(block[1]) {
                                let rows = [y, (y + block[0]).min(g.height)];
                                let cols = [xx, (xx + block[1]).min(g.width)];
                                let (o, c) = (out.as_mut_ptr(), choices.as_mut_ptr());
                                unsafe {
                                    p.run_image_block(
                                        x.as_ptr().add(n * g.in_image()),
                                        o,
                                        c,
                                        n,
                                        rows,
                                        cols,
                                    )
                                };
                            }
                        }
                    }
                    assert_eq!(choices, want_choices, "{g:?} relu {relu} {isa:?} by blocks");
                }
            }
        }
    }
}

/// The backward pass from recorded choices gives the bits of the pass from the
/// pre-activation, gradient and bias sum, on every path, thread count and gate.
#[test]
fn backward_from_choices_equals_backward_from_values() {
    for g in shapes() {
        let z = data(g.batch * g.in_image(), 17);
        let gr = data(g.batch * g.out_image(), 19);
        for (relu, gate) in [(true, true), (false, true), (true, false), (false, false)] {
            let mut choices = vec![0u8; g.batch * g.out_image()];
            let mut pooled = vec![0f32; choices.len()];
            let forward = MaxPool::new(g, relu, 1).unwrap();
            unsafe {
                forward.run_with_choices(z.as_ptr(), pooled.as_mut_ptr(), choices.as_mut_ptr())
            };
            for (isa, stream) in Isa::available()
                .into_iter()
                .flat_map(|i| [(i, false), (i, true)])
            {
                for threads in [1, 2] {
                    let mut r = MaxPoolGrad::new(g, relu, gate, threads).unwrap();
                    r.isa = isa;
                    r.stream = stream;
                    let run = |from_choices: bool| {
                        let mut dz_block = vec![7f32; z.len() + 16];
                        let skip = dz_block.as_ptr().align_offset(64);
                        let mut bias = vec![7f32; g.channels];
                        let mut partial = vec![7f32; g.channels];
                        let sum = BiasSum {
                            bias: bias.as_mut_ptr(),
                            partial: Some((partial.as_mut_ptr(), g.batch / 2)),
                        };
                        let dz = dz_block[skip..].as_mut_ptr();
                        unsafe {
                            if from_choices {
                                r.run_from_choices(choices.as_ptr(), gr.as_ptr(), dz, Some(sum))
                            } else {
                                r.run(z.as_ptr(), gr.as_ptr(), dz, Some(sum))
                            }
                        };
                        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        (bits(&dz_block[skip..skip + z.len()]), bits(&bias))
                    };
                    let (want, got) = (run(false), run(true));
                    assert!(
                        want.0 == got.0,
                        "{g:?} relu {relu} gate {gate} {isa:?} {threads}: dz"
                    );
                    assert_eq!(want.1, got.1, "{g:?} relu {relu} gate {gate} {isa:?}: bias");
                }
            }
        }
    }
}

#[test]
fn empty_and_bad_shapes_do_not_crash() {
    for g in [
        geo(0, 4, 4, 8, [2, 2], [2, 2]),
        geo(2, 4, 4, 0, [2, 2], [2, 2]),
        geo(2, 1, 1, 8, [2, 2], [2, 2]),
        geo(2, 0, 4, 8, [2, 2], [2, 2]),
    ] {
        for isa in Isa::available() {
            let mut p = MaxPool::new(g, true, 2).unwrap();
            p.isa = isa;
            let mut out = vec![0f32; 64];
            let x = vec![1f32; g.batch * g.in_image()];
            unsafe { p.run(x.as_ptr(), out.as_mut_ptr()) };
        }
    }
    let g = geo(2, 0, 4, 8, [2, 2], [2, 2]);
    let mut r = MaxPoolGrad::new(g, true, true, 2).unwrap();
    for isa in Isa::available() {
        r.isa = isa;
        let mut bias = vec![7f32; 8];
        let mut partial = vec![7f32; 8];
        let sum = BiasSum {
            bias: bias.as_mut_ptr(),
            partial: Some((partial.as_mut_ptr(), 1)),
        };
        let z: Vec<f32> = Vec::new();
        unsafe { r.run(z.as_ptr(), z.as_ptr(), z.as_ptr() as *mut f32, Some(sum)) };
        assert!(bias.iter().all(|&b| b == 0.0));
    }
    assert!(MaxPool::new(geo(1, 4, 4, 4, [0, 2], [2, 2]), true, 1).is_err());
    assert!(MaxPoolGrad::new(geo(1, 4, 4, 4, [2, 2], [1, 1]), true, true, 1).is_err());
    assert!(MaxPoolGrad::new(geo(1, 5, 4, 4, [2, 2], [2, 2]), true, true, 1).is_err());
    assert!(MaxPoolGrad::new(geo(1, 20, 20, 4, [5, 5], [5, 5]), true, true, 1).is_err());
}
