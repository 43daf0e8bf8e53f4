//! The JIT's fast paths against the interpreter: select-and-scatter with disjoint windows
//! (vector and scalar code, ties, NaNs, partial and tiling windows, a non-zero init) and the
//! convolution's layouts and thread splits (every dim_labels form the MNIST step uses, odd
//! shapes, padding, strides and tails).

use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::*;
use tessel_runtime::jit::{compile, ConvAlgorithm, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

/// A tiny module builder: instructions with explicit shapes in the entry computation.
struct B {
    m: Module,
    n: usize,
}

impl B {
    fn new() -> B {
        B {
            m: Module::new("t"),
            n: 0,
        }
    }
    fn add(&mut self, op: Op, shape: Shape, operands: &[InstrId]) -> InstrId {
        self.n += 1;
        let name = format!("{}.{}", op.opcode_name(), self.n);
        self.m
            .entry_mut()
            .add(Instruction::new(name, op, shape), operands)
    }
    fn param(&mut self, n: u32, shape: Shape) -> InstrId {
        self.add(Op::Parameter(n), shape, &[])
    }
    fn scalar_f32(&mut self, v: f32) -> InstrId {
        self.add(
            Op::Constant(Literal::Array(Array::scalar_f32(v))),
            Shape::scalar(ElementType::F32),
            &[],
        )
    }
    fn region(&mut self, name: &str, op: Op) -> ComputationId {
        let mut c = Computation::new(name);
        let s = Shape::scalar(ElementType::F32);
        let a = c.add(
            Instruction::new(format!("{name}.a"), Op::Parameter(0), s.clone()),
            &[],
        );
        let b = c.add(
            Instruction::new(format!("{name}.b"), Op::Parameter(1), s.clone()),
            &[],
        );
        let out = if matches!(op, Op::Compare { .. }) {
            Shape::scalar(ElementType::Pred)
        } else {
            s
        };
        c.add(Instruction::new(format!("{name}.r"), op, out), &[a, b]);
        self.m.add_computation(c)
    }
    fn finish(mut self, root: InstrId) -> Module {
        self.m.entry_mut().set_root(root);
        self.m
    }
}

fn with_nans(lit: Literal, every: usize) -> Literal {
    let Literal::Array(a) = lit else {
        unreachable!("pseudo_random_f32() makes arrays")
    };
    let dims = a.shape.dims.clone();
    let v: Vec<f32> = (0..a.len())
        .map(|i| {
            if i % every == 3 {
                f32::NAN
            } else {
                a.data.get_f64(i) as f32
            }
        })
        .collect();
    Literal::Array(Array::f32(&dims, v))
}

/// Runs `m` on the JIT (vector and scalar code, 1 and 2 threads) and the interpreter.
fn check(m: &Module, args: &[Literal], tol: f64) {
    let want = evaluate(m, args).expect("interpreter");
    for vectorize in [true, false] {
        for threads in [1, 2] {
            let opts = JitOptions {
                vectorize,
                gemm_threads: threads,
                // The patch-GEMM paths are what this file tests (Winograd, which `Auto` picks
                // for some of these convolutions, is tested in winograd.rs).
                conv_algorithm: ConvAlgorithm::Gemm,
                ..Default::default()
            };
            let exe = compile(m, &opts).expect("compile");
            let got = exe.run(args).expect("run");
            let (la, lb) = (got.leaves(), want.leaves());
            assert_eq!(la.len(), lb.len());
            for (x, y) in la.iter().zip(lb) {
                assert_eq!(x.shape, y.shape);
                for i in 0..x.len() {
                    let (p, q) = (x.data.get_f64(i), y.data.get_f64(i));
                    let ok = (p.is_nan() && q.is_nan())
                        || (p - q).abs() <= tol * (1.0 + q.abs())
                            && (p != 0.0 || q != 0.0 || p.signum() == q.signum());
                    assert!(
                        ok,
                        "element {i} (vectorize {vectorize}, threads {threads}, tolerance {tol}): jit {p} vs interpreter {q}"
                    );
                }
            }
        }
    }
}

fn window(sizes: &[i64], strides: &[i64]) -> Window {
    let mut w = Window::default();
    for (&s, &st) in sizes.iter().zip(strides) {
        let mut d = WindowDim::new(s);
        d.stride = st;
        w.dims.push(d);
    }
    w
}

fn select_and_scatter_module(
    in_dims: &[i64],
    src_dims: &[i64],
    w: Window,
    dir: ComparisonDirection,
    init: f32,
) -> Module {
    let mut b = B::new();
    let select = b.region(
        "select",
        Op::Compare {
            direction: dir,
            comparison_type: None,
        },
    );
    let scatter = b.region("scatter", Op::Binary(BinaryOp::Add));
    let x = b.param(0, Shape::array(ElementType::F32, in_dims));
    let g = b.param(1, Shape::array(ElementType::F32, src_dims));
    let init = b.scalar_f32(init);
    let ss = b.add(
        Op::SelectAndScatter {
            window: w,
            select,
            scatter,
        },
        Shape::array(ElementType::F32, in_dims),
        &[x, g, init],
    );
    b.finish(ss)
}

fn check_select_and_scatter(
    in_dims: &[i64],
    src_dims: &[i64],
    w: Window,
    dir: ComparisonDirection,
    init: f32,
) {
    let m = select_and_scatter_module(in_dims, src_dims, w, dir, init);
    // Ties (3 levels), NaNs among the operand, and distinct values.
    for (k, x) in [
        pseudo_random_f32(in_dims, 1, 3),
        with_nans(pseudo_random_f32(in_dims, 2, 5), 7),
        pseudo_random_f32(in_dims, 3, 0),
    ]
    .into_iter()
    .enumerate()
    {
        check(&m, &[x, pseudo_random_f32(src_dims, 10 + k as u32, 0)], 0.0);
    }
}

#[test]
fn select_and_scatter_max_pool_gradient_tiles() {
    // NHWC 2x2 stride 2 that tiles the input; 9 channels = two vectors and a tail.
    let w = window(&[1, 2, 2, 1], &[1, 2, 2, 1]);
    check_select_and_scatter(
        &[2, 6, 6, 9],
        &[2, 3, 3, 9],
        w,
        ComparisonDirection::Ge,
        0.0,
    );
    // Fewer than four channels: scalar code only. GT keeps the last maximum on ties.
    let w = window(&[1, 2, 2, 1], &[1, 2, 2, 1]);
    check_select_and_scatter(
        &[3, 4, 4, 3],
        &[3, 2, 2, 3],
        w,
        ComparisonDirection::Gt,
        0.0,
    );
}

#[test]
fn select_and_scatter_partial_and_strided_windows() {
    // 7 = 3 * 2 + 1: the last row and column belong to no window and keep init.
    let w = window(&[1, 2, 2, 1], &[1, 2, 2, 1]);
    check_select_and_scatter(
        &[2, 7, 7, 5],
        &[2, 3, 3, 5],
        w,
        ComparisonDirection::Ge,
        1.5,
    );
    // Stride 3 with size 2: gaps between windows; min-pool gradient (LE).
    let w = window(&[1, 2, 2, 1], &[1, 3, 3, 1]);
    check_select_and_scatter(
        &[1, 8, 8, 4],
        &[1, 3, 3, 4],
        w,
        ComparisonDirection::Le,
        -0.5,
    );
    // The window moves along the innermost dimension: scalar code.
    let w = window(&[2, 3], &[2, 3]);
    check_select_and_scatter(&[6, 10], &[3, 3], w, ComparisonDirection::Ge, 0.0);
    // Rank 1 and a window of one element.
    let w = window(&[1], &[1]);
    check_select_and_scatter(&[13], &[13], w, ComparisonDirection::Ge, 0.25);
}

fn conv_module(in_dims: &[i64], k_dims: &[i64], out_dims: &[i64], conv: Convolution) -> Module {
    let mut b = B::new();
    let x = b.param(0, Shape::array(ElementType::F32, in_dims));
    let k = b.param(1, Shape::array(ElementType::F32, k_dims));
    let c = b.add(
        Op::Convolution(conv),
        Shape::array(ElementType::F32, out_dims),
        &[x, k],
    );
    b.finish(c)
}

/// One spatial window dimension: size, stride, padding, rhs and lhs dilation, reversal.
fn wdim(
    size: i64,
    stride: i64,
    pad: (i64, i64),
    rhs_dil: i64,
    lhs_dil: i64,
    rev: bool,
) -> WindowDim {
    let mut d = WindowDim::new(size);
    d.stride = stride;
    d.pad_low = pad.0;
    d.pad_high = pad.1;
    d.window_dilation = rhs_dil;
    d.base_dilation = lhs_dil;
    d.reversal = rev;
    d
}

fn check_conv(
    dims: ConvDimensionNumbers,
    wds: Vec<WindowDim>,
    groups: (i64, i64),
    shapes: [&[i64]; 3],
) {
    // Sums of many products in a different order: the tolerance grows with their length.
    let k_len: i64 =
        shapes[1].iter().product::<i64>() / shapes[1][dims.kernel_output_feature as usize];
    let tol = (2e-7 * k_len as f64).max(1e-4);
    let conv = Convolution {
        window: Window { dims: wds },
        dims,
        feature_group_count: groups.0,
        batch_group_count: groups.1,
    };
    let m = conv_module(shapes[0], shapes[1], shapes[2], conv);
    check(
        &m,
        &[
            pseudo_random_f32(shapes[0], 21, 0),
            pseudo_random_f32(shapes[1], 22, 0),
        ],
        tol,
    );
}

/// `f01b_i01o->01bf` (the weight gradient JAX emits).
fn weight_gradient_labels() -> ConvDimensionNumbers {
    ConvDimensionNumbers {
        input_batch: 3,
        input_feature: 0,
        input_spatial: vec![1, 2],
        kernel_input_feature: 0,
        kernel_output_feature: 3,
        kernel_spatial: vec![1, 2],
        output_batch: 2,
        output_feature: 3,
        output_spatial: vec![0, 1],
    }
}

/// `b01f_01oi->b01f` (the data gradient JAX emits, with a reversed kernel).
fn data_gradient_labels() -> ConvDimensionNumbers {
    let mut d = ConvDimensionNumbers::nhwc_hwio();
    d.kernel_input_feature = 3;
    d.kernel_output_feature = 2;
    d
}

#[test]
fn convolution_forward_in_several_chunks() {
    // 4 x 24 x 24 output points of 3 x 3 x 16 patches: more than one chunk per worker.
    let pad = wdim(3, 1, (1, 1), 1, 1, false);
    check_conv(
        ConvDimensionNumbers::nhwc_hwio(),
        vec![pad.clone(), pad],
        (1, 1),
        [&[4, 24, 24, 16], &[3, 3, 16, 5], &[4, 24, 24, 5]],
    );
    // One input channel (runs of one float, merged along the window row), 5x5, pad 2.
    let pad = wdim(5, 1, (2, 2), 1, 1, false);
    check_conv(
        ConvDimensionNumbers::nhwc_hwio(),
        vec![pad.clone(), pad],
        (1, 1),
        [&[3, 9, 11, 1], &[5, 5, 1, 7], &[3, 9, 11, 7]],
    );
}

#[test]
fn convolution_data_gradient_labels_reversed_kernel() {
    let d = wdim(5, 1, (2, 2), 1, 1, true);
    check_conv(
        data_gradient_labels(),
        vec![d.clone(), d],
        (1, 1),
        [&[3, 7, 6, 6], &[5, 5, 3, 6], &[3, 7, 6, 3]],
    );
}

#[test]
fn convolution_weight_gradient_form() {
    // The MNIST weight gradient's shape, small: window 12x12 over a padded 12x12 input.
    let d = wdim(12, 1, (2, 2), 1, 1, false);
    check_conv(
        weight_gradient_labels(),
        vec![d.clone(), d],
        (1, 1),
        [&[6, 12, 12, 5], &[6, 12, 12, 3], &[5, 5, 5, 3]],
    );
    // Large enough for several chunks per worker (partial products added).
    let d = wdim(24, 1, (1, 1), 1, 1, false);
    check_conv(
        weight_gradient_labels(),
        vec![d.clone(), d],
        (1, 1),
        [&[7, 24, 24, 5], &[7, 24, 24, 4], &[3, 3, 5, 4]],
    );
    // A batch of one (runs of one float), odd sizes, asymmetric padding.
    let (a, b) = (
        wdim(9, 1, (2, 1), 1, 1, false),
        wdim(7, 1, (0, 3), 1, 1, false),
    );
    check_conv(
        weight_gradient_labels(),
        vec![a, b],
        (1, 1),
        [&[3, 9, 7, 1], &[3, 9, 7, 2], &[4, 4, 1, 2]],
    );
    // Strided forward convolution's weight gradient: window dilation 2 (the forward stride).
    let d = wdim(4, 1, (0, 1), 2, 1, false);
    check_conv(
        weight_gradient_labels(),
        vec![d.clone(), d],
        (1, 1),
        [&[2, 8, 8, 3], &[2, 4, 4, 2], &[3, 3, 3, 2]],
    );
    // Stride, base dilation and reversal in the weight-gradient form.
    let d = wdim(6, 2, (1, 2), 1, 2, true);
    check_conv(
        weight_gradient_labels(),
        vec![d.clone(), d],
        (1, 1),
        [&[2, 5, 5, 3], &[2, 6, 6, 2], &[4, 4, 3, 2]],
    );
}

#[test]
fn convolution_other_labels_and_groups() {
    // NCHW / OIHW / NCHW with stride 2 and window dilation.
    let nchw = ConvDimensionNumbers {
        input_batch: 0,
        input_feature: 1,
        input_spatial: vec![2, 3],
        kernel_input_feature: 1,
        kernel_output_feature: 0,
        kernel_spatial: vec![2, 3],
        output_batch: 0,
        output_feature: 1,
        output_spatial: vec![2, 3],
    };
    let d = wdim(3, 2, (1, 1), 2, 1, false);
    check_conv(
        nchw,
        vec![d.clone(), d],
        (1, 1),
        [&[2, 3, 9, 9], &[4, 3, 3, 3], &[2, 4, 4, 4]],
    );
    // Feature groups and batch groups stay in the im2col form.
    let d = wdim(3, 1, (1, 1), 1, 1, false);
    check_conv(
        ConvDimensionNumbers::nhwc_hwio(),
        vec![d.clone(), d.clone()],
        (3, 1),
        [&[2, 5, 5, 6], &[3, 3, 2, 9], &[2, 5, 5, 9]],
    );
    check_conv(
        ConvDimensionNumbers::nhwc_hwio(),
        vec![d.clone(), d],
        (1, 2),
        [&[4, 5, 5, 3], &[3, 3, 3, 4], &[2, 5, 5, 4]],
    );
    // 1-D and 3-D convolutions.
    let one_d = ConvDimensionNumbers {
        input_batch: 0,
        input_feature: 2,
        input_spatial: vec![1],
        kernel_input_feature: 1,
        kernel_output_feature: 2,
        kernel_spatial: vec![0],
        output_batch: 0,
        output_feature: 2,
        output_spatial: vec![1],
    };
    check_conv(
        one_d,
        vec![wdim(4, 3, (2, 1), 1, 1, false)],
        (1, 1),
        [&[3, 17, 5], &[4, 5, 6], &[3, 6, 6]],
    );
    let three_d = ConvDimensionNumbers {
        input_batch: 0,
        input_feature: 4,
        input_spatial: vec![1, 2, 3],
        kernel_input_feature: 3,
        kernel_output_feature: 4,
        kernel_spatial: vec![0, 1, 2],
        output_batch: 0,
        output_feature: 4,
        output_spatial: vec![1, 2, 3],
    };
    let d = wdim(2, 1, (1, 0), 1, 1, false);
    check_conv(
        three_d,
        vec![d.clone(), d.clone(), d],
        (1, 1),
        [&[2, 3, 4, 5, 3], &[2, 2, 2, 3, 2], &[2, 3, 4, 5, 2]],
    );
}
