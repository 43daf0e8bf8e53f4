//! The JIT against the interpreter on small hand-built modules: elementwise kernels (vector
//! and scalar paths, odd sizes), shape ops, reductions, windows, dot, convolution and control
//! flow.

use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::*;
use tessel_runtime::jit::{compile, JitOptions};
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
    fn comp(&mut self) -> &mut Computation {
        self.m.entry_mut()
    }
    fn add(&mut self, op: Op, shape: Shape, operands: &[InstrId]) -> InstrId {
        self.n += 1;
        let name = format!("{}.{}", op.opcode_name(), self.n);
        self.comp().add(Instruction::new(name, op, shape), operands)
    }
    fn param(&mut self, n: u32, shape: Shape) -> InstrId {
        self.add(Op::Parameter(n), shape, &[])
    }
    fn scalar_region(&mut self, name: &str, op: Op, ty: ElementType) -> ComputationId {
        let mut c = Computation::new(name);
        let s = Shape::scalar(ty);
        let a = c.add(
            Instruction::new(format!("{name}.a"), Op::Parameter(0), s.clone()),
            &[],
        );
        let b = c.add(
            Instruction::new(format!("{name}.b"), Op::Parameter(1), s.clone()),
            &[],
        );
        let out_shape = if matches!(op, Op::Compare { .. }) {
            Shape::scalar(ElementType::Pred)
        } else {
            s
        };
        c.add(
            Instruction::new(format!("{name}.r"), op, out_shape),
            &[a, b],
        );
        self.m.add_computation(c)
    }
    fn finish(mut self, root: InstrId) -> Module {
        self.comp().set_root(root);
        self.m
    }
}

fn f32s(dims: &[i64], seed: u32) -> Literal {
    pseudo_random_f32(dims, seed, 0)
}

fn close(a: &Literal, b: &Literal, tol: f32) {
    let (la, lb) = (a.leaves(), b.leaves());
    assert_eq!(la.len(), lb.len(), "leaf count");
    for (x, y) in la.iter().zip(lb) {
        assert_eq!(x.shape, y.shape);
        for i in 0..x.len() {
            let (p, q) = (x.data.get_f64(i), y.data.get_f64(i));
            let ok = (p.is_nan() && q.is_nan()) || (p - q).abs() <= (tol as f64) * (1.0 + q.abs());
            assert!(ok, "element {i}: jit {p} vs interpreter {q}");
        }
    }
}

fn check(m: &Module, args: &[Literal], tol: f32) {
    let want = evaluate(m, args).expect("interpreter");
    for vectorize in [true, false] {
        let opts = JitOptions {
            vectorize,
            ..Default::default()
        };
        let exe = compile(m, &opts).expect("compile");
        let got = exe.run(args).expect("run");
        close(&got, &want, tol);
    }
}

#[test]
fn elementwise_chain_odd_sizes() {
    for dims in [vec![1i64], vec![3], vec![5, 17], vec![4, 8], vec![2, 3, 5]] {
        let mut b = B::new();
        let s = Shape::array(ElementType::F32, &dims);
        let x = b.param(0, s.clone());
        let y = b.param(1, s.clone());
        let a = b.add(Op::Binary(BinaryOp::Add), s.clone(), &[x, y]);
        let t = b.add(Op::Unary(UnaryOp::Tanh), s.clone(), &[a]);
        let e = b.add(Op::Unary(UnaryOp::Exp), s.clone(), &[x]);
        let m = b.add(Op::Binary(BinaryOp::Multiply), s.clone(), &[t, e]);
        let mx = b.add(Op::Binary(BinaryOp::Maximum), s.clone(), &[m, y]);
        let m = b.finish(mx);
        check(&m, &[f32s(&dims, 1), f32s(&dims, 2)], 1e-5);
    }
}

/// `sign` of f32 on the vector path: its `fcmp ueq` had no x86 vector lowering, so any kernel
/// with a float `sign` (the gradient of `abs`, e.g. in GELU's erfc) failed to compile. Zero,
/// negative zero and NaN keep their value.
#[test]
fn float_sign_vectorized() {
    let dims = [4i64, 16];
    let mut b = B::new();
    let s = Shape::array(ElementType::F32, &dims);
    let x = b.param(0, s.clone());
    let y = b.add(Op::Unary(UnaryOp::Sign), s.clone(), &[x]);
    let m = b.finish(y);
    let mut values: Vec<f32> = (0..64).map(|i| (i as f32 - 30.5) * 0.25).collect();
    values[3] = 0.0;
    values[4] = -0.0;
    values[5] = f32::NAN;
    let x = Literal::Array(Array::new(
        ArrayShape::new(ElementType::F32, &dims),
        ArrayData::F32(values),
    ));
    check(&m, &[x], 0.0);
}

#[test]
fn broadcast_transpose_compare_select() {
    let mut b = B::new();
    let v = b.param(0, Shape::array(ElementType::F32, &[5]));
    let x = b.param(1, Shape::array(ElementType::F32, &[3, 5]));
    let bc = b.add(
        Op::Broadcast {
            dimensions: vec![1],
        },
        Shape::array(ElementType::F32, &[3, 5]),
        &[v],
    );
    let tr = b.add(
        Op::Transpose {
            permutation: vec![1, 0],
        },
        Shape::array(ElementType::F32, &[5, 3]),
        &[x],
    );
    let tr2 = b.add(
        Op::Transpose {
            permutation: vec![1, 0],
        },
        Shape::array(ElementType::F32, &[3, 5]),
        &[tr],
    );
    let gt = b.add(
        Op::Compare {
            direction: ComparisonDirection::Gt,
            comparison_type: None,
        },
        Shape::array(ElementType::Pred, &[3, 5]),
        &[bc, tr2],
    );
    let sel = b.add(
        Op::Select,
        Shape::array(ElementType::F32, &[3, 5]),
        &[gt, bc, tr2],
    );
    let cv = b.add(Op::Convert, Shape::array(ElementType::S32, &[3, 5]), &[gt]);
    let t = b.add(
        Op::Tuple,
        Shape::Tuple(vec![
            Shape::array(ElementType::F32, &[3, 5]),
            Shape::array(ElementType::S32, &[3, 5]),
            Shape::array(ElementType::Pred, &[3, 5]),
        ]),
        &[sel, cv, gt],
    );
    let m = b.finish(t);
    check(&m, &[f32s(&[5], 3), f32s(&[3, 5], 4)], 0.0);
}

#[test]
fn u32_bit_ops_and_shifts() {
    let mut b = B::new();
    let s = Shape::array(ElementType::U32, &[7]);
    let x = b.param(0, s.clone());
    let y = b.param(1, s.clone());
    let shl = b.add(Op::Binary(BinaryOp::ShiftLeft), s.clone(), &[x, y]);
    let shr = b.add(Op::Binary(BinaryOp::ShiftRightLogical), s.clone(), &[x, y]);
    let o = b.add(Op::Binary(BinaryOp::Or), s.clone(), &[shl, shr]);
    let a = b.add(Op::Binary(BinaryOp::Add), s.clone(), &[o, x]);
    let d = b.add(Op::Binary(BinaryOp::Divide), s.clone(), &[a, y]);
    let r = b.add(Op::Binary(BinaryOp::Remainder), s.clone(), &[a, y]);
    let t = b.add(Op::Tuple, Shape::Tuple(vec![s.clone(), s.clone()]), &[d, r]);
    let m = b.finish(t);
    let xs = Literal::Array(Array::new(
        ArrayShape::new(ElementType::U32, &[7]),
        ArrayData::U32(vec![1, 0xdeadbeef, 7, 0xffffffff, 12345, 3, 99]),
    ));
    let ys = Literal::Array(Array::new(
        ArrayShape::new(ElementType::U32, &[7]),
        ArrayData::U32(vec![0, 13, 32, 31, 40, 1, 5]),
    ));
    check(&m, &[xs, ys], 0.0);
}

/// Shifts by one amount for every lane (a broadcast scalar, as in Threefry's rotations) run
/// as vector shifts by a scalar count: every amount from 0 past 32, and as signed values
/// negative ones (unsigned, past 32), must give the interpreter's results (XLA's: 0 for the
/// logical shifts past the width, the sign for the arithmetic one), on both integer types.
#[test]
fn shifts_by_a_broadcast_amount() {
    let amounts: Vec<u32> = (0..=40)
        .chain([0x7fff_ffff, 0x8000_0000, 0xffff_ffff])
        .collect();
    for ty in [ElementType::U32, ElementType::S32] {
        for amount in &amounts {
            let mut b = B::new();
            let s = Shape::array(ty, &[3, 9]);
            let x = b.param(0, s.clone());
            let k = b.param(1, Shape::scalar(ty));
            let kb = b.add(Op::Broadcast { dimensions: vec![] }, s.clone(), &[k]);
            let shl = b.add(Op::Binary(BinaryOp::ShiftLeft), s.clone(), &[x, kb]);
            let shr = b.add(Op::Binary(BinaryOp::ShiftRightLogical), s.clone(), &[x, kb]);
            let sra = b.add(
                Op::Binary(BinaryOp::ShiftRightArithmetic),
                s.clone(),
                &[x, kb],
            );
            let both = b.add(Op::Binary(BinaryOp::Xor), s.clone(), &[shl, shr]);
            let t = b.add(
                Op::Tuple,
                Shape::Tuple(vec![s.clone(), s.clone()]),
                &[both, sra],
            );
            let m = b.finish(t);
            let bits: Vec<u32> = (0..27u32)
                .map(|i| i.wrapping_mul(0x9e37_79b9) ^ (i << 28))
                .collect();
            let (xs, ks) = match ty {
                ElementType::U32 => (ArrayData::U32(bits), ArrayData::U32(vec![*amount])),
                _ => (
                    ArrayData::S32(bits.iter().map(|&v| v as i32).collect()),
                    ArrayData::S32(vec![*amount as i32]),
                ),
            };
            let xs = Literal::Array(Array::new(ArrayShape::new(ty, &[3, 9]), xs));
            let ks = Literal::Array(Array::new(ArrayShape::new(ty, &[]), ks));
            check(&m, &[xs, ks], 0.0);
        }
    }
}

#[test]
fn reduce_rows_columns_and_all() {
    for (dims, red) in [
        (vec![5i64, 17], vec![1i64]),
        (vec![5, 17], vec![0]),
        (vec![4, 3, 8], vec![0, 1]),
        (vec![6, 9], vec![0, 1]),
    ] {
        let mut b = B::new();
        let add = b.scalar_region("sum", Op::Binary(BinaryOp::Add), ElementType::F32);
        let x = b.param(0, Shape::array(ElementType::F32, &dims));
        let z = b.add(
            Op::Constant(Literal::Array(Array::scalar_f32(0.0))),
            Shape::scalar(ElementType::F32),
            &[],
        );
        let out_dims: Vec<i64> = dims
            .iter()
            .enumerate()
            .filter(|(i, _)| !red.contains(&(*i as i64)))
            .map(|(_, &d)| d)
            .collect();
        let r = b.add(
            Op::Reduce {
                dimensions: red.clone(),
                to_apply: add,
            },
            Shape::array(ElementType::F32, &out_dims),
            &[x, z],
        );
        let m = b.finish(r);
        check(&m, &[f32s(&dims, 5)], 1e-5);
    }
}

#[test]
fn dot_matches_interpreter() {
    for (m_, k, n) in [(1i64, 1i64, 1i64), (3, 5, 17), (17, 33, 5), (64, 64, 64)] {
        let mut b = B::new();
        let x = b.param(0, Shape::array(ElementType::F32, &[m_, k]));
        let y = b.param(1, Shape::array(ElementType::F32, &[n, k]));
        let dn = DotDimensionNumbers {
            lhs_batch: vec![],
            rhs_batch: vec![],
            lhs_contracting: vec![1],
            rhs_contracting: vec![1],
        };
        let d = b.add(
            Op::Dot(dn),
            Shape::array(ElementType::F32, &[m_, n]),
            &[x, y],
        );
        let m = b.finish(d);
        check(&m, &[f32s(&[m_, k], 6), f32s(&[n, k], 7)], 1e-4);
    }
}

#[test]
fn while_loop_updates_state_in_place() {
    let mut b = B::new();
    // cond: i < 5
    let st = Shape::Tuple(vec![
        Shape::scalar(ElementType::S32),
        Shape::array(ElementType::F32, &[3]),
    ]);
    let mut cond = Computation::new("cond");
    let p = cond.add(Instruction::new("cp", Op::Parameter(0), st.clone()), &[]);
    let i = cond.add(
        Instruction::new(
            "ci",
            Op::GetTupleElement { index: 0 },
            Shape::scalar(ElementType::S32),
        ),
        &[p],
    );
    let five = cond.add(
        Instruction::new(
            "c5",
            Op::Constant(Literal::Array(Array::scalar_s32(5))),
            Shape::scalar(ElementType::S32),
        ),
        &[],
    );
    cond.add(
        Instruction::new(
            "clt",
            Op::Compare {
                direction: ComparisonDirection::Lt,
                comparison_type: None,
            },
            Shape::scalar(ElementType::Pred),
        ),
        &[i, five],
    );
    let cond = b.m.add_computation(cond);
    let mut body = Computation::new("body");
    let p = body.add(Instruction::new("bp", Op::Parameter(0), st.clone()), &[]);
    let i = body.add(
        Instruction::new(
            "bi",
            Op::GetTupleElement { index: 0 },
            Shape::scalar(ElementType::S32),
        ),
        &[p],
    );
    let v = body.add(
        Instruction::new(
            "bv",
            Op::GetTupleElement { index: 1 },
            Shape::array(ElementType::F32, &[3]),
        ),
        &[p],
    );
    let one = body.add(
        Instruction::new(
            "b1",
            Op::Constant(Literal::Array(Array::scalar_s32(1))),
            Shape::scalar(ElementType::S32),
        ),
        &[],
    );
    let i2 = body.add(
        Instruction::new(
            "bi2",
            Op::Binary(BinaryOp::Add),
            Shape::scalar(ElementType::S32),
        ),
        &[i, one],
    );
    let s = body.add(
        Instruction::new(
            "bs",
            Op::Unary(UnaryOp::Sine),
            Shape::array(ElementType::F32, &[3]),
        ),
        &[v],
    );
    let v2 = body.add(
        Instruction::new(
            "bv2",
            Op::Binary(BinaryOp::Add),
            Shape::array(ElementType::F32, &[3]),
        ),
        &[v, s],
    );
    body.add(Instruction::new("bt", Op::Tuple, st.clone()), &[i2, v2]);
    let body = b.m.add_computation(body);
    let x = b.param(0, Shape::array(ElementType::F32, &[3]));
    let z = b.add(
        Op::Constant(Literal::Array(Array::scalar_s32(0))),
        Shape::scalar(ElementType::S32),
        &[],
    );
    let t = b.add(Op::Tuple, st.clone(), &[z, x]);
    let w = b.add(
        Op::While {
            condition: cond,
            body,
        },
        st,
        &[t],
    );
    let m = b.finish(w);
    check(&m, &[f32s(&[3], 8)], 1e-5);
}

#[test]
fn max_pool_and_its_gradient() {
    let mut b = B::new();
    let max = b.scalar_region("max", Op::Binary(BinaryOp::Maximum), ElementType::F32);
    let ge = b.scalar_region(
        "ge",
        Op::Compare {
            direction: ComparisonDirection::Ge,
            comparison_type: None,
        },
        ElementType::F32,
    );
    let add = b.scalar_region("add", Op::Binary(BinaryOp::Add), ElementType::F32);
    let x = b.param(0, Shape::array(ElementType::F32, &[2, 6, 6, 5]));
    let g = b.param(1, Shape::array(ElementType::F32, &[2, 3, 3, 5]));
    let ninf = b.add(
        Op::Constant(Literal::Array(Array::scalar_f32(f32::NEG_INFINITY))),
        Shape::scalar(ElementType::F32),
        &[],
    );
    let zero = b.add(
        Op::Constant(Literal::Array(Array::scalar_f32(0.0))),
        Shape::scalar(ElementType::F32),
        &[],
    );
    let mut window = Window::default();
    for (s, st) in [(1, 1), (2, 2), (2, 2), (1, 1)] {
        let mut d = WindowDim::new(s);
        d.stride = st;
        window.dims.push(d);
    }
    let rw = b.add(
        Op::ReduceWindow {
            window: window.clone(),
            to_apply: max,
        },
        Shape::array(ElementType::F32, &[2, 3, 3, 5]),
        &[x, ninf],
    );
    let ss = b.add(
        Op::SelectAndScatter {
            window,
            select: ge,
            scatter: add,
        },
        Shape::array(ElementType::F32, &[2, 6, 6, 5]),
        &[x, g, zero],
    );
    let t = b.add(
        Op::Tuple,
        Shape::Tuple(vec![
            Shape::array(ElementType::F32, &[2, 3, 3, 5]),
            Shape::array(ElementType::F32, &[2, 6, 6, 5]),
        ]),
        &[rw, ss],
    );
    let m = b.finish(t);
    check(&m, &[f32s(&[2, 6, 6, 5], 9), f32s(&[2, 3, 3, 5], 10)], 1e-6);
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

fn nhwc_dims() -> ConvDimensionNumbers {
    ConvDimensionNumbers::nhwc_hwio()
}

#[test]
fn convolution_padding_stride_dilation_groups() {
    // b01f_01io->b01f, pad 1, stride 2, rhs dilation 1.
    let mut window = Window::default();
    for _ in 0..2 {
        let mut d = WindowDim::new(3);
        d.pad_low = 1;
        d.pad_high = 1;
        d.stride = 2;
        window.dims.push(d);
    }
    let conv = Convolution {
        window,
        dims: nhwc_dims(),
        feature_group_count: 1,
        batch_group_count: 1,
    };
    let m = conv_module(&[2, 7, 7, 3], &[3, 3, 3, 4], &[2, 4, 4, 4], conv);
    check(
        &m,
        &[f32s(&[2, 7, 7, 3], 11), f32s(&[3, 3, 3, 4], 12)],
        1e-4,
    );

    // Window dilation 2, base dilation 2, reversal, 2 feature groups.
    let mut window = Window::default();
    for _ in 0..2 {
        let mut d = WindowDim::new(2);
        d.pad_low = 1;
        d.pad_high = 0;
        d.window_dilation = 2;
        d.base_dilation = 2;
        d.reversal = true;
        window.dims.push(d);
    }
    // Input 5 dilated to 9, padded to 10, window span 3: output 8.
    let conv = Convolution {
        window,
        dims: nhwc_dims(),
        feature_group_count: 2,
        batch_group_count: 1,
    };
    let m = conv_module(&[1, 5, 5, 4], &[2, 2, 2, 6], &[1, 8, 8, 6], conv);
    check(
        &m,
        &[f32s(&[1, 5, 5, 4], 13), f32s(&[2, 2, 2, 6], 14)],
        1e-4,
    );
}

#[test]
fn convolution_weight_gradient_labels() {
    // f01b_i01o->01bf as in the MNIST step's weight gradient.
    let dims = ConvDimensionNumbers {
        input_batch: 3,
        input_feature: 0,
        input_spatial: vec![1, 2],
        kernel_input_feature: 0,
        kernel_output_feature: 3,
        kernel_spatial: vec![1, 2],
        output_batch: 2,
        output_feature: 3,
        output_spatial: vec![0, 1],
    };
    let mut window = Window::default();
    for _ in 0..2 {
        let mut d = WindowDim::new(6);
        d.pad_low = 2;
        d.pad_high = 2;
        window.dims.push(d);
    }
    let conv = Convolution {
        window,
        dims,
        feature_group_count: 1,
        batch_group_count: 1,
    };
    let m = conv_module(&[4, 6, 6, 2], &[4, 6, 6, 3], &[5, 5, 2, 3], conv);
    check(
        &m,
        &[f32s(&[4, 6, 6, 2], 15), f32s(&[4, 6, 6, 3], 16)],
        1e-4,
    );
}

#[test]
fn bad_arguments_are_errors_not_crashes() {
    let mut b = B::new();
    let x = b.param(0, Shape::array(ElementType::F32, &[3]));
    let n = b.add(
        Op::Unary(UnaryOp::Negate),
        Shape::array(ElementType::F32, &[3]),
        &[x],
    );
    let m = b.finish(n);
    let exe = compile(&m, &JitOptions::default()).unwrap();
    assert!(exe.run(&[]).is_err());
    assert!(exe.run(&[f32s(&[4], 1)]).is_err());
    let ok = exe.run(&[f32s(&[3], 1)]).unwrap();
    assert_eq!(ok.leaves()[0].len(), 3);
}

#[test]
fn dump_writes_clif_before_and_after_optimization() {
    let mut b = B::new();
    let x = b.param(0, Shape::array(ElementType::F32, &[6]));
    let e = b.add(
        Op::Unary(UnaryOp::Exp),
        Shape::array(ElementType::F32, &[6]),
        &[x],
    );
    let m = b.finish(e);
    let dir = std::env::temp_dir().join(format!("tessel_jit_dump_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = JitOptions {
        dump_to: Some(dir.clone()),
        ..Default::default()
    };
    compile(&m, &opts).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(
        names
            .iter()
            .any(|n| n.ends_with(".before_opt.clif") && n.contains("exponential")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.ends_with(".after_opt.clif") && n.contains("exponential")),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n.contains("program")), "{names:?}");
    let before = std::fs::read_to_string(
        dir.join(
            names
                .iter()
                .find(|n| n.ends_with(".before_opt.clif"))
                .unwrap(),
        ),
    )
    .unwrap();
    assert!(
        before.contains("function") && before.contains("f32x4"),
        "{before}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn integer_division_by_zero_follows_xla() {
    let mut b = B::new();
    let s = Shape::array(ElementType::S32, &[5]);
    let x = b.param(0, s.clone());
    let y = b.param(1, s.clone());
    let d = b.add(Op::Binary(BinaryOp::Divide), s.clone(), &[x, y]);
    let r = b.add(Op::Binary(BinaryOp::Remainder), s.clone(), &[x, y]);
    let t = b.add(Op::Tuple, Shape::Tuple(vec![s.clone(), s.clone()]), &[d, r]);
    let m = b.finish(t);
    let xs = Literal::Array(Array::new(
        ArrayShape::new(ElementType::S32, &[5]),
        ArrayData::S32(vec![7, i32::MIN, -7, 5, 0]),
    ));
    let ys = Literal::Array(Array::new(
        ArrayShape::new(ElementType::S32, &[5]),
        ArrayData::S32(vec![0, -1, 2, -3, 0]),
    ));
    check(&m, &[xs, ys], 0.0);
}

#[test]
fn arguments_of_every_element_type_reach_the_program() {
    // Each argument is written into the arena as its little-endian bytes; the program returns
    // it unchanged and converted to f64 (a kernel reading the typed elements).
    let types = [
        ElementType::Pred,
        ElementType::S8,
        ElementType::U8,
        ElementType::S16,
        ElementType::U16,
        ElementType::S32,
        ElementType::U32,
        ElementType::S64,
        ElementType::U64,
        ElementType::F16,
        ElementType::BF16,
        ElementType::F32,
        ElementType::F64,
    ];
    let mut text = String::from("HloModule types\n\nENTRY main {\n");
    let mut outs = Vec::new();
    let mut args = Vec::new();
    for (k, ty) in types.iter().enumerate() {
        let name = ty.name();
        text += &format!("  p{k} = {name}[5] parameter({k})\n");
        text += &format!("  c{k} = f64[5] convert(p{k})\n");
        outs.push((format!("p{k}"), format!("{name}[5]")));
        outs.push((format!("c{k}"), "f64[5]".to_string()));
        // Small values, exact in every type: 0, 1, 2, 3, 1 (pred: 0, 1, 0, 1, 1).
        let w = ty.byte_size();
        let mut bytes = vec![0u8; 5 * w];
        for (i, v) in [0.0f64, 1.0, 2.0, 3.0, 1.0].iter().enumerate() {
            let e: Vec<u8> = match ty {
                ElementType::Pred => vec![(i % 2 == 1 || i == 4) as u8],
                ElementType::F16 => half::f16::from_f64(*v).to_le_bytes().to_vec(),
                ElementType::BF16 => half::bf16::from_f64(*v).to_le_bytes().to_vec(),
                ElementType::F32 => (*v as f32).to_le_bytes().to_vec(),
                ElementType::F64 => v.to_le_bytes().to_vec(),
                _ => (*v as u64).to_le_bytes()[..w].to_vec(),
            };
            bytes[i * w..(i + 1) * w].copy_from_slice(&e);
        }
        let data = ArrayData::from_le_bytes(*ty, &bytes).unwrap();
        args.push(Literal::Array(Array::new(ArrayShape::new(*ty, &[5]), data)));
    }
    let (names, shapes): (Vec<String>, Vec<String>) = outs.into_iter().unzip();
    text += &format!(
        "  ROOT t = ({}) tuple({})\n}}\n",
        shapes.join(", "),
        names.join(", ")
    );
    let m = tessel_compiler::hlo_text::parse_module(&text, None).unwrap();
    let want = evaluate(&m, &args).unwrap();
    let exe = compile(&m, &JitOptions::default()).unwrap();
    let got = exe.run(&args).unwrap();
    assert_eq!(got, want);
    for (k, a) in args.iter().enumerate() {
        assert_eq!(got.leaves()[2 * k], a.leaves()[0], "{}", types[k]);
    }
}
