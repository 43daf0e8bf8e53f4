//! The direct convolutions for few input channels (`conv_direct/forward.rs`, forward NHWC / HWIO,
//! and `conv_direct/weight_gradient.rs`, the weight gradient `f01b_i01o->01bf`) against the
//! interpreter, over odd sizes, channel counts that are not multiples of 8, several kernel
//! shapes and paddings (asymmetric and negative), on 1, 2 and 3 workers (bitwise the same
//! result on each). Each case first checks that `ConvAlgorithm::Auto` really plans the direct
//! routine (and `Gemm` the patch GEMM), so a silent fallback cannot pass.
//!
//! Tolerance: every output is a sum of at most `n` products (n = KH*KW*C forward, F*GH*GW for
//! the weight gradient). In f32, any summation order of `n` products, with or without FMA,
//! is within `gamma_n * S` of the exact sum, where `gamma_n = n u / (1 - n u)`, `u = 2^-24`
//! and `S` the sum of the products' magnitudes (Higham, Accuracy and Stability of Numerical
//! Algorithms, 3.1 and 4.2). The JIT and the interpreter therefore differ by at most
//! `2 gamma_n S`; `S` is the same convolution of `|input|` and `|kernel|`, which the
//! interpreter computes to within a factor `1 + gamma_n`. A missing or wrong term changes an
//! output by about one product's size, far more than this bound.

use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::*;
use tessel_runtime::jit::buffer::Addr;
use tessel_runtime::jit::routines::conv_select::{plan_convolution, ConvPrecision};
use tessel_runtime::jit::{compile, ConvAlgorithm, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

/// A forward convolution `[n, h, w, c] * [kh, kw, c, o]`, stride 1, and (from the same
/// numbers) its weight gradient.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: i64,
    h: i64,
    w: i64,
    c: i64,
    kh: i64,
    kw: i64,
    o: i64,
    pad_h: (i64, i64),
    pad_w: (i64, i64),
}

impl Case {
    /// The forward output's spatial size.
    fn out(&self) -> (i64, i64) {
        (
            self.h + self.pad_h.0 + self.pad_h.1 - self.kh + 1,
            self.w + self.pad_w.0 + self.pad_w.1 - self.kw + 1,
        )
    }

    fn window(&self, sizes: (i64, i64)) -> Window {
        let dim = |size, (lo, hi)| {
            let mut d = WindowDim::new(size);
            d.pad_low = lo;
            d.pad_high = hi;
            d
        };
        Window {
            dims: vec![dim(sizes.0, self.pad_h), dim(sizes.1, self.pad_w)],
        }
    }

    /// `(convolution, input dims, kernel dims, output dims)` of the forward convolution.
    fn forward(&self) -> (Convolution, [Vec<i64>; 3]) {
        let (oh, ow) = self.out();
        let conv = Convolution {
            window: self.window((self.kh, self.kw)),
            dims: ConvDimensionNumbers::nhwc_hwio(),
            feature_group_count: 1,
            batch_group_count: 1,
        };
        (
            conv,
            [
                vec![self.n, self.h, self.w, self.c],
                vec![self.kh, self.kw, self.c, self.o],
                vec![self.n, oh, ow, self.o],
            ],
        )
    }

    /// The weight gradient as JAX emits it: the images as features, the forward output's
    /// gradient as the kernel, its spatial size as the window.
    fn weight_gradient(&self) -> (Convolution, [Vec<i64>; 3]) {
        let (oh, ow) = self.out();
        let conv = Convolution {
            window: self.window((oh, ow)),
            dims: ConvDimensionNumbers {
                input_batch: 3,
                input_feature: 0,
                input_spatial: vec![1, 2],
                kernel_input_feature: 0,
                kernel_output_feature: 3,
                kernel_spatial: vec![1, 2],
                output_batch: 2,
                output_feature: 3,
                output_spatial: vec![0, 1],
            },
            feature_group_count: 1,
            batch_group_count: 1,
        };
        (
            conv,
            [
                vec![self.n, self.h, self.w, self.c],
                vec![self.n, oh, ow, self.o],
                vec![self.kh, self.kw, self.c, self.o],
            ],
        )
    }
}

fn conv_module(conv: &Convolution, dims: &[Vec<i64>; 3]) -> Module {
    let mut m = Module::new("direct_conv");
    let c = m.entry_mut();
    let f32s = |d: &[i64]| Shape::array(ElementType::F32, d);
    let x = c.add(Instruction::new("x", Op::Parameter(0), f32s(&dims[0])), &[]);
    let k = c.add(Instruction::new("k", Op::Parameter(1), f32s(&dims[1])), &[]);
    let y = c.add(
        Instruction::new("conv", Op::Convolution(conv.clone()), f32s(&dims[2])),
        &[x, k],
    );
    c.set_root(y);
    m
}

/// The routine `plan_convolution` picks for `conv` with `algorithm`, by name.
fn planned_routine(
    conv: &Convolution,
    dims: &[Vec<i64>; 3],
    algorithm: ConvAlgorithm,
) -> &'static str {
    let shapes: Vec<ArrayShape> = dims
        .iter()
        .map(|d| ArrayShape::new(ElementType::F32, d))
        .collect();
    let mut next = 1usize << 30;
    let mut alloc = |bytes: usize| {
        next += bytes.next_multiple_of(64);
        Addr::Arena(next)
    };
    let options = JitOptions {
        conv_algorithm: algorithm,
        ..Default::default()
    };
    let routine = plan_convolution(
        "conv",
        conv,
        ConvPrecision::Fast,
        (Addr::Arena(0), &shapes[0]),
        (Addr::Arena(1 << 28), &shapes[1]),
        (Addr::Arena(1 << 29), &shapes[2]),
        &options,
        &mut alloc,
    )
    .expect("plan");
    routine.algorithm()
}

fn abs_values(lit: &Literal) -> Literal {
    let Literal::Array(a) = lit else {
        unreachable!("pseudo_random_f32() makes arrays")
    };
    let v = (0..a.len())
        .map(|i| a.data.get_f64(i).abs() as f32)
        .collect();
    Literal::Array(Array::f32(&a.shape.dims, v))
}

/// Runs `conv` on the JIT (Auto on 1, 2 and 3 workers, and Gemm) against the interpreter.
/// `terms` is the number of products per output; `direct` the routine Auto must choose.
fn check(
    what: &str,
    conv: &Convolution,
    dims: &[Vec<i64>; 3],
    terms: i64,
    direct: &str,
    seed: u32,
) {
    assert_eq!(
        planned_routine(conv, dims, ConvAlgorithm::Auto),
        direct,
        "{what}: Auto did not choose the direct routine"
    );
    assert_eq!(
        planned_routine(conv, dims, ConvAlgorithm::Gemm),
        "gemm",
        "{what}: Gemm did not choose the patch GEMM"
    );
    let m = conv_module(conv, dims);
    let args = [
        pseudo_random_f32(&dims[0], seed, 0),
        pseudo_random_f32(&dims[1], seed + 1, 0),
    ];
    let want = evaluate(&m, &args).expect("interpreter");
    let magnitudes = evaluate(&m, &[abs_values(&args[0]), abs_values(&args[1])]).expect("|x|*|k|");
    let u = f64::from(f32::EPSILON) / 2.0;
    let gamma = terms as f64 * u / (1.0 - terms as f64 * u);
    let (Literal::Array(want), Literal::Array(mag)) = (&want, &magnitudes) else {
        unreachable!("a convolution gives an array")
    };
    let runs = [
        (ConvAlgorithm::Auto, 1),
        (ConvAlgorithm::Auto, 2),
        (ConvAlgorithm::Auto, 3),
        (ConvAlgorithm::Gemm, 2),
    ];
    let mut first_auto: Option<Array> = None;
    for (algorithm, threads) in runs {
        let options = JitOptions {
            conv_algorithm: algorithm,
            gemm_threads: threads,
            ..Default::default()
        };
        let exe = compile(&m, &options).expect("compile");
        let Literal::Array(got) = exe.run(&args).expect("run") else {
            unreachable!("a convolution gives an array")
        };
        assert_eq!(got.shape, want.shape);
        for i in 0..got.len() {
            let (g, w) = (got.data.get_f64(i), want.data.get_f64(i));
            let bound = 2.0 * gamma * mag.data.get_f64(i) * (1.0 + gamma);
            assert!(
                (g - w).abs() <= bound,
                "{what} ({algorithm:?}, {threads} threads) element {i}: jit {g} vs interpreter {w}, bound {bound}"
            );
        }
        // The direct routines give bitwise the same result on any number of workers.
        if algorithm == ConvAlgorithm::Auto {
            match &first_auto {
                None => first_auto = Some(got),
                Some(first) => assert!(
                    (0..got.len())
                        .all(|i| got.data.get_f64(i).to_bits() == first.data.get_f64(i).to_bits()),
                    "{what}: {threads} threads differ from 1 thread"
                ),
            }
        }
    }
}

fn check_case(case: Case, seed: u32) {
    let (oh, ow) = case.out();
    let (conv, dims) = case.forward();
    let direct = "direct";
    check(
        &format!("forward {case:?}"),
        &conv,
        &dims,
        case.kh * case.kw * case.c,
        direct,
        seed,
    );
    let (conv, dims) = case.weight_gradient();
    let direct = "direct-weight-grad";
    check(
        &format!("weight gradient {case:?}"),
        &conv,
        &dims,
        case.n * oh * ow,
        direct,
        seed + 7,
    );
}

#[test]
fn mnist_conv1_shapes() {
    // Conv layer 1 of the MNIST model with a batch of 3: 28x28, 1 channel, 5x5, pad 2, O = 32.
    let case = Case {
        n: 3,
        h: 28,
        w: 28,
        c: 1,
        kh: 5,
        kw: 5,
        o: 32,
        pad_h: (2, 2),
        pad_w: (2, 2),
    };
    check_case(case, 1);
}

#[test]
fn odd_sizes_kernels_and_paddings() {
    let sizes = [1, 5, 7, 13, 28];
    let outs = [1, 3, 17, 32];
    let kernels = [(1, 1), (3, 3), (5, 5), (3, 5)];
    let pads = [(0, 0), (1, 1), (2, 2), (0, 1), (2, 0), (1, 3)];
    // A reproducible walk through the combinations: every value of every list appears, with
    // batches 1 and 3 and 1 to 3 channels.
    let mut s = 0x9e37_79b9u32;
    let mut next = |k: usize| {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s as usize % k
    };
    let mut checked = 0;
    let mut seed = 10;
    while checked < 28 {
        let i = checked;
        let (kh, kw) = kernels[(i + next(2)) % kernels.len()];
        let case = Case {
            n: [1, 3][i % 2],
            h: sizes[(i + next(5)) % sizes.len()],
            w: sizes[(i / 2 + next(5)) % sizes.len()],
            c: 1 + (i % 3) as i64,
            kh,
            kw,
            o: outs[(i / 3 + next(4)) % outs.len()],
            pad_h: pads[(i + next(6)) % pads.len()],
            pad_w: pads[next(6)],
        };
        let (oh, ow) = case.out();
        if oh < 1 || ow < 1 {
            continue;
        }
        check_case(case, seed);
        seed += 20;
        checked += 1;
    }
}

#[test]
fn cropping_padding_and_wide_tiles() {
    // Negative padding crops the input; 13 output columns are two full tiles of 6 and one of 1.
    let case = Case {
        n: 2,
        h: 9,
        w: 15,
        c: 2,
        kh: 3,
        kw: 3,
        o: 17,
        pad_h: (-1, 2),
        pad_w: (0, 0),
    };
    check_case(case, 3);
    // Four channels (the most taken), 8 and 24 output channels (whole vectors, no tail).
    let case = Case {
        n: 1,
        h: 6,
        w: 11,
        c: 4,
        kh: 2,
        kw: 4,
        o: 24,
        pad_h: (1, 0),
        pad_w: (3, 1),
    };
    check_case(case, 4);
    let case = Case {
        n: 2,
        h: 7,
        w: 7,
        c: 3,
        kh: 5,
        kw: 3,
        o: 8,
        pad_h: (2, 2),
        pad_w: (1, 1),
    };
    check_case(case, 5);
}

#[test]
fn other_convolutions_are_left_to_the_other_routines() {
    let gemm = "gemm";
    // Five input channels, a stride of 2, a dilated window: outside the preconditions.
    let wide = Case {
        n: 1,
        h: 7,
        w: 7,
        c: 5,
        kh: 3,
        kw: 3,
        o: 4,
        pad_h: (1, 1),
        pad_w: (1, 1),
    };
    // Five channels are beyond the direct loops; Winograd takes these 3x3 windows.
    let direct = ["direct", "direct-weight-grad"];
    let (conv, dims) = wide.forward();
    assert!(!direct.contains(&planned_routine(&conv, &dims, ConvAlgorithm::Auto)));
    let (conv, dims) = wide.weight_gradient();
    assert!(!direct.contains(&planned_routine(&conv, &dims, ConvAlgorithm::Auto)));
    let small = Case { c: 1, ..wide };
    let (mut conv, mut dims) = small.forward();
    conv.window.dims[0].stride = 2;
    dims[2][1] = 4;
    assert_eq!(planned_routine(&conv, &dims, ConvAlgorithm::Auto), gemm);
    let (mut conv, dims) = small.forward();
    conv.window.dims[1].window_dilation = 2;
    let mut dims = dims;
    dims[2][2] = 5;
    assert_eq!(planned_routine(&conv, &dims, ConvAlgorithm::Auto), gemm);
}
