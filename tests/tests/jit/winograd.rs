//! The Winograd convolution routines (`winograd/forward.rs`, `winograd/filter_gradient.rs`) against
//! the interpreter: odd sizes, channel counts that are not multiples of 8, batch 1 and 3,
//! zero / symmetric / asymmetric / negative padding, r = 3 and 5, several kernel and output
//! layouts, window reversal; and the shapes they must decline.
//!
//! Tolerance: Winograd reorders and rescales the arithmetic, so its error is relative to the
//! magnitude of the terms summed, not to the result (which may cancel to near zero). Each
//! output is checked against `TOL * sum |terms|`, where the sum of |terms| is the interpreter's
//! convolution of |input| and |kernel|. The f32 error of one F(2x2, 5x5) tile measured in
//! `winograd::tests` is at most 1.7e-6 of that sum (mean 1.2e-7); summing over channels and
//! tiles in f32 adds at most a few 1e-7 more at these sizes, so 1e-5 leaves a factor of ~5
//! while still catching any wrong term (an error of one term of 1000 would exceed it).

use super::conv_check::{check_routine, one_conv_module};
use tessel_compiler::ir::*;
use tessel_runtime::jit::buffer::Addr;
use tessel_runtime::jit::routines::conv_select::{plan_convolution, ConvPrecision};
use tessel_runtime::jit::{compile, ConvAlgorithm, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

const TOL: f64 = 1e-5;

/// The algorithm `plan_convolution` picks under `options` at `DEFAULT` precision (scratch
/// addresses are dummies).
fn chosen(conv: &Convolution, dims: [&[i64]; 3], options: &JitOptions) -> &'static str {
    chosen_at(conv, dims, options, ConvPrecision::Fast)
}

fn chosen_at(
    conv: &Convolution,
    dims: [&[i64]; 3],
    options: &JitOptions,
    precision: ConvPrecision,
) -> &'static str {
    let s = dims.map(|d| ArrayShape::new(ElementType::F32, d));
    let a = Addr::Arena(0);
    plan_convolution(
        "conv",
        conv,
        precision,
        (a, &s[0]),
        (a, &s[1]),
        (a, &s[2]),
        options,
        &mut |_| a,
    )
    .expect("plan")
    .algorithm()
}

/// Runs the convolution with the JIT (Auto) and the interpreter (`conv_check`), asserting
/// the algorithm Auto chose, that `--conv-algorithm gemm` still picks the patch GEMM, and the
/// error bound; returns the largest error / sum |terms|.
fn check(conv: &Convolution, dims: [&[i64]; 3], expect: &str, seed: u32) -> f64 {
    let gemm = JitOptions {
        conv_algorithm: ConvAlgorithm::Gemm,
        ..JitOptions::default()
    };
    assert_eq!(
        chosen(conv, dims, &gemm),
        "gemm",
        "--conv-algorithm gemm must not change"
    );
    check_routine(conv, dims, seed, (expect, ConvPrecision::Fast), TOL)
}

fn window(r: i64, pads: [(i64, i64); 2], reversal: bool) -> Window {
    Window {
        dims: pads
            .iter()
            .map(|&(lo, hi)| {
                let mut d = WindowDim::new(r);
                d.pad_low = lo;
                d.pad_high = hi;
                d.reversal = reversal;
                d
            })
            .collect(),
    }
}

fn conv(window: Window, dims: ConvDimensionNumbers) -> Convolution {
    Convolution {
        window,
        dims,
        feature_group_count: 1,
        batch_group_count: 1,
    }
}

/// Kernel layouts: `01io` (HWIO), `01oi` (the data gradient's), `oi01` (OIHW).
#[derive(Clone, Copy, Debug)]
enum Kernel {
    Hwio,
    Hwoi,
    Oihw,
}

fn forward_dims(k: Kernel) -> ConvDimensionNumbers {
    let mut d = ConvDimensionNumbers::nhwc_hwio();
    match k {
        Kernel::Hwio => {}
        Kernel::Hwoi => (d.kernel_input_feature, d.kernel_output_feature) = (3, 2),
        Kernel::Oihw => {
            (d.kernel_output_feature, d.kernel_input_feature) = (0, 1);
            d.kernel_spatial = vec![2, 3];
        }
    }
    d
}

/// A forward case: batch, H, W, C, O, r, padding, kernel layout, reversal; checked with the
/// algorithm `expect`.
#[allow(clippy::too_many_arguments)]
fn forward(
    n: i64,
    hw: [i64; 2],
    c: i64,
    o: i64,
    r: i64,
    pads: [(i64, i64); 2],
    k: Kernel,
    reversal: bool,
    expect: &str,
) -> f64 {
    let cv = conv(window(r, pads, reversal), forward_dims(k));
    let out = |i: usize| hw[i] + pads[i].0 + pads[i].1 - r + 1;
    let kd = match k {
        Kernel::Hwio => vec![r, r, c, o],
        Kernel::Hwoi => vec![r, r, o, c],
        Kernel::Oihw => vec![o, c, r, r],
    };
    let seed = (n * 7 + hw[0] * 3 + c * 11 + o) as u32;
    check(
        &cv,
        [&[n, hw[0], hw[1], c], &kd, &[n, out(0), out(1), o]],
        expect,
        seed,
    )
}

/// Batch, H x W, C, O, r, padding, kernel layout, reversal.
type ForwardCase = (i64, [i64; 2], i64, i64, i64, [(i64, i64); 2], Kernel, bool);

#[test]
fn forward_matches_the_interpreter() {
    use Kernel::*;
    let mut worst = 0.0f64;
    let cases: &[ForwardCase] = &[
        (1, [5, 5], 5, 1, 3, [(1, 1), (1, 1)], Hwio, false),
        (3, [7, 13], 17, 3, 5, [(2, 2), (2, 2)], Hwoi, false),
        (1, [14, 14], 32, 17, 5, [(0, 0), (0, 0)], Hwio, false),
        (3, [17, 5], 6, 17, 3, [(0, 2), (1, 0)], Hwio, false),
        (1, [13, 7], 17, 8, 5, [(2, 1), (0, 2)], Hwoi, false),
        (1, [7, 7], 4, 5, 3, [(1, 1), (1, 1)], Oihw, true),
        (3, [14, 14], 9, 16, 5, [(2, 2), (2, 2)], Hwoi, false),
        // Negative padding crops the input.
        (1, [9, 8], 5, 6, 3, [(-1, 0), (1, -1)], Hwio, false),
    ];
    for &(n, hw, c, o, r, pads, k, rev) in cases {
        let e = forward(n, hw, c, o, r, pads, k, rev, "winograd");
        println!("forward n{n} {hw:?} c{c} o{o} r{r} {pads:?} {k:?} rev {rev}: {e:.2e}");
        worst = worst.max(e);
    }
    println!("forward: max error / sum |terms| = {worst:.2e}");
}

/// The tile `plan_convolution` gives the convolution at `DEFAULT` precision.
fn tile_of(conv: &Convolution, dims: [&[i64]; 3]) -> Option<usize> {
    let s = dims.map(|d| ArrayShape::new(ElementType::F32, d));
    let a = Addr::Arena(0);
    let options = JitOptions::default();
    let p = (a, &s[0]);
    plan_convolution(
        "conv",
        conv,
        ConvPrecision::Fast,
        p,
        (a, &s[1]),
        (a, &s[2]),
        &options,
        &mut |_| a,
    )
    .expect("plan")
    .winograd_tile()
}

/// 3x3 windows run F(4x4, 3x3) in all three uses (forward, data gradient as the reversed
/// kernel, weight gradient): many channels (ResNet-20's 64, the Fashion-MNIST CNN's 32 ->
/// 64), odd sizes and channel counts, sizes that are not multiples of the tile, within the
/// same bound as F(2x2).
#[test]
fn three_by_three_windows_run_f4x4_in_every_use() {
    use Kernel::*;
    let same = [(1, 1), (1, 1)];
    let forward_cases: &[ForwardCase] = &[
        (2, [14, 14], 32, 64, 3, same, Hwio, false),
        (2, [8, 8], 64, 64, 3, same, Hwio, true),
        (3, [9, 11], 7, 5, 3, same, Hwoi, false),
        (1, [5, 7], 5, 3, 3, [(0, 1), (2, 0)], Oihw, true),
        (2, [16, 16], 17, 32, 3, [(0, 0), (0, 0)], Hwio, false),
    ];
    let mut worst = 0.0f64;
    for &(n, hw, c, o, r, pads, k, rev) in forward_cases {
        let kd = match k {
            Hwio => vec![r, r, c, o],
            Hwoi => vec![r, r, o, c],
            Oihw => vec![o, c, r, r],
        };
        let out = |i: usize| hw[i] + pads[i].0 + pads[i].1 - r + 1;
        let cv = conv(window(r, pads, rev), forward_dims(k));
        let dims: [&[i64]; 3] = [&[n, hw[0], hw[1], c], &kd, &[n, out(0), out(1), o]];
        assert_eq!(tile_of(&cv, dims), Some(4), "{dims:?}");
        worst = worst.max(forward(n, hw, c, o, r, pads, k, rev, "winograd"));
    }
    let filter_cases: &[FilterCase] = &[
        (2, [14, 14], 32, 64, 3, same, false),
        (2, [8, 8], 64, 64, 3, same, false),
        (3, [9, 7], 5, 3, 3, [(1, 0), (0, 1)], true),
    ];
    for &(n, hw, c, k, r, pads, bf01) in filter_cases {
        let oh = |i: usize| hw[i] + pads[i].0 + pads[i].1 - r + 1;
        let mut w = window(1, pads, false);
        (w.dims[0].size, w.dims[1].size) = (oh(0), oh(1));
        let out: &[i64] = if bf01 { &[c, k, r, r] } else { &[r, r, c, k] };
        let dims: [&[i64]; 3] = [&[n, hw[0], hw[1], c], &[n, oh(0), oh(1), k], out];
        assert_eq!(tile_of(&conv(w, filter_dims(bf01)), dims), Some(4));
        worst = worst.max(filter(n, hw, c, k, r, pads, bf01, "winograd-filter"));
    }
    println!("3x3, F(4x4): max error / sum |terms| = {worst:.2e}");
    // One input channel stays with the direct loops.
    forward(2, [9, 9], 1, 8, 3, same, Hwio, false, "direct");
}

#[test]
fn forward_shapes_it_cannot_take_fall_back_and_stay_correct() {
    use Kernel::*;
    // Few input channels go to the direct loops (too thin to pay for the transforms).
    forward(2, [7, 7], 1, 8, 5, [(2, 2), (2, 2)], Hwio, false, "direct");
    // r = 4 and r = 1 have no transform.
    forward(1, [6, 6], 5, 4, 4, [(1, 2), (1, 2)], Hwio, false, "gemm");
    forward(1, [6, 6], 5, 4, 1, [(0, 0), (0, 0)], Hwio, false, "gemm");
    // Stride 2, window dilation, feature groups, a non-square window.
    let dims = ConvDimensionNumbers::nhwc_hwio();
    let mut w = window(3, [(1, 1), (1, 1)], false);
    w.dims[0].stride = 2;
    check(
        &conv(w, dims.clone()),
        [&[1, 7, 7, 4], &[3, 3, 4, 4], &[1, 4, 7, 4]],
        "gemm",
        1,
    );
    let mut w = window(3, [(2, 2), (2, 2)], false);
    w.dims[1].window_dilation = 2;
    check(
        &conv(w, dims.clone()),
        [&[1, 7, 7, 4], &[3, 3, 4, 4], &[1, 9, 7, 4]],
        "gemm",
        2,
    );
    let mut g = conv(window(3, [(1, 1), (1, 1)], false), dims.clone());
    g.feature_group_count = 2;
    check(&g, [&[1, 7, 7, 4], &[3, 3, 2, 4], &[1, 7, 7, 4]], "gemm", 3);
    let mut w = window(3, [(1, 1), (2, 2)], false);
    w.dims[1].size = 5;
    check(
        &conv(w, dims.clone()),
        [&[1, 7, 7, 5], &[3, 5, 5, 4], &[1, 7, 7, 4]],
        "gemm",
        4,
    );
    // An input that is not NHWC (NCHW).
    let mut nchw = dims;
    (nchw.input_feature, nchw.input_spatial) = (1, vec![2, 3]);
    check(
        &conv(window(3, [(1, 1), (1, 1)], false), nchw),
        [&[1, 4, 7, 7], &[3, 3, 4, 4], &[1, 7, 7, 4]],
        "gemm",
        5,
    );
}

/// The weight-gradient labels: lhs `f01b` (X as NHWC), rhs `i01o` (dY as NHWK), output
/// `01bf` or `bf01`.
fn filter_dims(out_bf01: bool) -> ConvDimensionNumbers {
    ConvDimensionNumbers {
        input_batch: 3,
        input_feature: 0,
        input_spatial: vec![1, 2],
        kernel_input_feature: 0,
        kernel_output_feature: 3,
        kernel_spatial: vec![1, 2],
        output_batch: if out_bf01 { 0 } else { 2 },
        output_feature: if out_bf01 { 1 } else { 3 },
        output_spatial: if out_bf01 { vec![2, 3] } else { vec![0, 1] },
    }
}

/// Batch, H x W, C, K, r, padding, output as `bf01`.
type FilterCase = (i64, [i64; 2], i64, i64, i64, [(i64, i64); 2], bool);

/// dW of a forward convolution (batch n, H x W, C -> K, r x r, padding) in the form JAX emits.
#[allow(clippy::too_many_arguments)]
fn filter(
    n: i64,
    hw: [i64; 2],
    c: i64,
    k: i64,
    r: i64,
    pads: [(i64, i64); 2],
    bf01: bool,
    expect: &str,
) -> f64 {
    let oh = |i: usize| hw[i] + pads[i].0 + pads[i].1 - r + 1;
    let mut w = window(1, pads, false);
    w.dims[0].size = oh(0);
    w.dims[1].size = oh(1);
    let out: Vec<i64> = if bf01 {
        vec![c, k, r, r]
    } else {
        vec![r, r, c, k]
    };
    check(
        &conv(w, filter_dims(bf01)),
        [&[n, hw[0], hw[1], c], &[n, oh(0), oh(1), k], &out],
        expect,
        (n * 5 + hw[1] * 3 + c + k * 13) as u32,
    )
}

#[test]
fn weight_gradient_matches_the_interpreter() {
    let mut worst = 0.0f64;
    let cases: &[FilterCase] = &[
        (3, [7, 7], 5, 5, 3, [(1, 1), (1, 1)], false),
        (1, [13, 13], 17, 17, 5, [(2, 2), (2, 2)], false),
        (2, [14, 14], 8, 16, 5, [(2, 2), (2, 2)], false),
        (2, [5, 17], 5, 1, 5, [(0, 2), (1, 1)], false),
        (3, [9, 6], 4, 9, 3, [(0, 0), (2, 0)], true),
        (1, [14, 14], 32, 64, 5, [(2, 2), (2, 2)], false),
    ];
    for &(n, hw, c, k, r, pads, bf01) in cases {
        let e = filter(n, hw, c, k, r, pads, bf01, "winograd-filter");
        println!("filter n{n} {hw:?} c{c} k{k} r{r} {pads:?} bf01 {bf01}: {e:.2e}");
        worst = worst.max(e);
    }
    println!("weight gradient: max error / sum |terms| = {worst:.2e}");
}

#[test]
fn weight_gradients_it_cannot_take_fall_back() {
    // One channel (MNIST's first layer) goes to the direct loops; an output size without a
    // transform to the GEMM.
    filter(
        2,
        [9, 9],
        1,
        4,
        5,
        [(2, 2), (2, 2)],
        false,
        "direct-weight-grad",
    );
    filter(1, [8, 8], 5, 4, 4, [(1, 2), (1, 2)], false, "gemm");
    // A window stride: not the weight-gradient form.
    let mut w = window(1, [(1, 1), (1, 1)], false);
    for d in &mut w.dims {
        d.size = 4;
        d.stride = 2;
    }
    check(
        &conv(w, filter_dims(false)),
        [&[1, 7, 7, 3], &[1, 4, 4, 4], &[3, 3, 3, 4]],
        "gemm",
        9,
    );
}

/// `operand_precision={highest,highest}` (or `high`) asks for an exact sum, as XLA's
/// PrecisionConfig does: Winograd is then not used, and the JIT's result is the patch GEMM's,
/// bit for bit. Without the attribute (or at `default`) Winograd takes the same convolution.
#[test]
fn high_precision_convolutions_keep_a_direct_sum() {
    let dims = ConvDimensionNumbers::nhwc_hwio();
    let cv = conv(window(5, [(2, 2), (2, 2)], false), dims);
    let shapes: [&[i64]; 3] = [&[2, 9, 9, 8], &[5, 5, 8, 6], &[2, 9, 9, 6]];
    let auto = JitOptions::default();
    assert_eq!(
        chosen_at(&cv, shapes, &auto, ConvPrecision::Fast),
        "winograd"
    );
    assert_eq!(chosen_at(&cv, shapes, &auto, ConvPrecision::Exact), "gemm");
    for (attr, want) in [
        ("{highest,highest}", ConvPrecision::Exact),
        ("{default,high}", ConvPrecision::Exact),
        ("{DEFAULT,DEFAULT}", ConvPrecision::Fast),
    ] {
        let attrs = vec![("operand_precision".to_string(), attr.to_string())];
        assert_eq!(ConvPrecision::of(&attrs), want, "{attr}");
    }
    assert_eq!(ConvPrecision::of(&[]), ConvPrecision::Fast);

    // End to end: the attribute on the instruction reaches the JIT.
    let mut m = one_conv_module(shapes, &cv);
    let root = m.entry().root();
    m.entry_mut().get_mut(root).extra_attrs =
        vec![("operand_precision".into(), "{highest,highest}".into())];
    let args = [
        pseudo_random_f32(shapes[0], 41, 0),
        pseudo_random_f32(shapes[1], 42, 0),
    ];
    let bits = |opts: &JitOptions| -> Vec<u32> {
        let out = compile(&m, opts).expect("compile").run(&args).expect("run");
        let a = &out.leaves()[0];
        (0..a.len())
            .map(|i| (a.data.get_f64(i) as f32).to_bits())
            .collect()
    };
    let gemm = JitOptions {
        conv_algorithm: ConvAlgorithm::Gemm,
        ..JitOptions::default()
    };
    assert_eq!(bits(&auto), bits(&gemm));
}
