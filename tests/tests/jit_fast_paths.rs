//! The JIT's fast paths against the interpreter: select-and-scatter with disjoint windows
//! (vector and scalar code, ties, NaNs, partial and tiling windows, a non-zero init) and the
//! convolution's layouts and thread splits (every dim_labels form the MNIST step uses, odd
//! shapes, padding, strides and tails).

use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::*;
use tessel_runtime::jit::{compile, JitOptions};

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

/// Pseudo-random f32 values; with `levels` > 0 only that many distinct values (many ties).
fn values(dims: &[i64], seed: u32, levels: u32) -> Literal {
    let n: i64 = dims.iter().product();
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
    let v = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            if levels > 0 {
                (s % levels) as f32 - 1.0
            } else {
                (s % 2000) as f32 / 500.0 - 2.0
            }
        })
        .collect();
    Literal::Array(Array::f32(dims, v))
}

fn with_nans(lit: Literal, every: usize) -> Literal {
    let Literal::Array(a) = lit else {
        unreachable!("values() makes arrays")
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
                        "element {i} (vectorize {vectorize}, threads {threads}): jit {p} vs interpreter {q}"
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
        values(in_dims, 1, 3),
        with_nans(values(in_dims, 2, 5), 7),
        values(in_dims, 3, 0),
    ]
    .into_iter()
    .enumerate()
    {
        check(&m, &[x, values(src_dims, 10 + k as u32, 0)], 0.0);
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
