//! bf16/f16 storage and precision, `topk`, and the gradient of a select whose untaken branch
//! has an infinite derivative: the JIT against the interpreter (bitwise, as written and
//! optimized), and both against reference values computed here.
//!
//! The bf16 rule is XLA:CPU's, checked against JAX 0.4 by hand: a bf16 op is computed in f32
//! and rounded to bf16, except where a convert to f32 reads it (`docs/interpreter.md`).

use tessel_compiler::autodiff::grad_module;
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, ArrayData, Literal, Module};
use tessel_runtime::jit::{compile, JitOptions};

/// `module` on the interpreter and the JIT, as written and optimized; the results must agree
/// bitwise. Returns the interpreter's (as written).
fn both(module: &Module, args: &[Literal]) -> Vec<Array> {
    let mut first = None;
    for opt in [false, true] {
        let mut m = module.clone();
        if opt {
            optimize(&mut m, &CompileOptions::default()).unwrap();
        }
        let want = evaluate(&m, args).unwrap();
        let exe = compile(&m, &JitOptions::default()).unwrap();
        let got = exe.run(args).unwrap();
        for (x, y) in got.leaves().iter().zip(want.leaves()) {
            assert_eq!(x.shape, y.shape);
            assert!(
                x.data.to_le_bytes() == y.data.to_le_bytes(),
                "opt={opt}: jit {:?} differs from interpreter {:?}",
                x.data,
                y.data
            );
        }
        first.get_or_insert_with(|| want.leaves().into_iter().cloned().collect());
    }
    first.unwrap()
}

fn f32s(a: &Array) -> Vec<f32> {
    match &a.data {
        ArrayData::F32(v) => v.clone(),
        other => panic!("not f32: {other:?}"),
    }
}

/// Round to nearest even to bf16, kept as f32 (the reference; finite inputs).
fn bf16(x: f32) -> f32 {
    let b = x.to_bits();
    f32::from_bits(b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000)
}

fn input() -> Vec<f32> {
    vec![
        1.2969, -0.7, 3.25, 0.1, -2.5e-3, 100.7, -1.0e-20, 7.77, 0.33333, -5.5, 1.0e5, 0.0,
    ]
}

#[test]
fn bf16_converts_read_the_f32_value_and_chains_round() {
    let m = parse_module(
        "HloModule bf16\n\nENTRY main {\n  x = f32[12] parameter(0)\n\
         xb = bf16[12] convert(x)\n  m = bf16[12] multiply(xb, xb)\n\
         mf = f32[12] convert(m)\n  a = bf16[12] add(m, xb)\n  af = f32[12] convert(a)\n\
         e = bf16[12] exponential(xb)\n  ef = f32[12] convert(e)\n\
         h = f16[12] convert(x)\n  hm = f16[12] multiply(h, h)\n  hf = f32[12] convert(hm)\n\
         ROOT t = (f32[12], f32[12], f32[12], bf16[12], f32[12]) tuple(mf, af, ef, m, hf)\n}\n",
        None,
    )
    .unwrap();
    let x = input();
    let out = both(&m, &[Literal::Array(Array::f32(&[12], x.clone()))]);
    let xb: Vec<f32> = x.iter().map(|&v| bf16(v)).collect();
    // The product read by a convert keeps f32 precision (JAX: 1.2969 -> 1.681884765625).
    let want: Vec<f32> = xb.iter().map(|&v| v * v).collect();
    assert_eq!(f32s(&out[0]), want);
    assert_eq!(f32s(&out[0])[0], 1.681_884_8);
    // In a chain the product is rounded before the add; the add is not.
    let want: Vec<f32> = xb.iter().map(|&v| bf16(v * v) + v).collect();
    assert_eq!(f32s(&out[1]), want);
    // A bf16 output is rounded.
    let ArrayData::BF16(stored) = &out[3].data else {
        panic!("bf16 output")
    };
    let want: Vec<f32> = xb.iter().map(|&v| bf16(v * v)).collect();
    assert_eq!(stored.iter().map(|v| v.to_f32()).collect::<Vec<_>>(), want);
    // f16 rounds at every op.
    let want: Vec<f32> = x
        .iter()
        .map(|&v| {
            let h = half::f16::from_f32(v).to_f32();
            half::f16::from_f32(h * h).to_f32()
        })
        .collect();
    assert_eq!(f32s(&out[4]), want);
}

#[test]
fn topk_rows_ties_nan_and_smallest() {
    let text = |largest: bool| {
        format!(
            "HloModule topk\n\nENTRY main {{\n  x = f32[3,5] parameter(0)\n\
             ROOT t = (f32[3,2], s32[3,2]) topk(x), k=2, largest={largest}\n}}\n"
        )
    };
    let x = vec![
        1.0,
        3.0,
        3.0,
        2.0,
        -1.0, //
        f32::NAN,
        0.0,
        -0.0,
        5.0,
        5.0, //
        -2.0,
        -2.0,
        -2.0,
        -3.0,
        4.0,
    ];
    let arg = [Literal::Array(Array::f32(&[3, 5], x))];
    let out = both(&parse_module(&text(true), None).unwrap(), &arg);
    let ArrayData::S32(i) = &out[1].data else {
        panic!("indices")
    };
    // Ties to the lower index; NaN is the largest (XLA's total order).
    assert_eq!(i, &vec![1, 2, 0, 3, 4, 0]);
    let out = both(&parse_module(&text(false), None).unwrap(), &arg);
    let ArrayData::S32(i) = &out[1].data else {
        panic!("indices")
    };
    // -0 orders below +0.
    assert_eq!(i, &vec![4, 0, 2, 1, 3, 0]);
}

#[test]
fn select_gradient_ignores_the_untaken_branchs_infinite_derivative() {
    // f(x) = |x| < 1 ? x : 1/x, summed; at 0 the untaken 1/x has derivative -inf.
    let m = parse_module(
        "HloModule sel\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
         ROOT r = f32[] add(a, b)\n}\n\nENTRY main {\n  x = f32[4] parameter(0)\n\
         ax = f32[4] abs(x)\n  one = f32[] constant(1)\n  ones = f32[4] broadcast(one), dimensions={}\n\
         p = pred[4] compare(ax, ones), direction=LT\n  inv = f32[4] divide(ones, x)\n\
         s = f32[4] select(p, x, inv)\n  zero = f32[] constant(0)\n\
         ROOT y = f32[] reduce(s, zero), dimensions={0}, to_apply=add\n}\n",
        None,
    )
    .unwrap();
    let g = grad_module(&m, &[0]).unwrap();
    let x = vec![0.0, 0.5, 2.0, -4.0];
    let out = both(&g, &[Literal::Array(Array::f32(&[4], x))]);
    // (value, d/dx): 1 inside, -1/x^2 outside; no NaN at 0.
    assert_eq!(f32s(&out[1]), vec![1.0, 1.0, -0.25, -0.0625]);
}
