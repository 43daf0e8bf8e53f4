//! What the convolution routines' tests share: a module of one convolution, the algorithm
//! `plan_convolution` picks for it, and the check of a routine against the interpreter (an
//! error bound relative to the sum of |terms|, and the same bits on 1 and 2 threads).

use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::*;
use tessel_runtime::jit::buffer::Addr;
use tessel_runtime::jit::routines::conv_select::{plan_convolution, ConvPrecision};
use tessel_runtime::jit::{compile, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

/// A module whose entry is `conv(x, k)`, `dims` the shapes of `x`, `k` and the result.
pub fn one_conv_module(dims: [&[i64]; 3], conv: &Convolution) -> Module {
    let mut m = Module::new("conv");
    let c = m.entry_mut();
    let shape = |d: &[i64]| Shape::array(ElementType::F32, d);
    let x = c.add(Instruction::new("x", Op::Parameter(0), shape(dims[0])), &[]);
    let k = c.add(Instruction::new("k", Op::Parameter(1), shape(dims[1])), &[]);
    let y = c.add(
        Instruction::new("conv", Op::Convolution(conv.clone()), shape(dims[2])),
        &[x, k],
    );
    c.set_root(y);
    m
}

/// The algorithm `plan_convolution` picks for `conv` at `precision` under default options.
pub fn chosen(conv: &Convolution, dims: [&[i64]; 3], precision: ConvPrecision) -> &'static str {
    let s = dims.map(|d| ArrayShape::new(ElementType::F32, d));
    let a = Addr::Arena(0);
    plan_convolution(
        "conv",
        conv,
        precision,
        (a, &s[0]),
        (a, &s[1]),
        (a, &s[2]),
        &JitOptions::default(),
        &mut |_| a,
    )
    .expect("plan")
    .algorithm()
}

/// The array of a literal with every element's magnitude.
fn magnitudes(l: &Literal) -> Literal {
    let a = &l.leaves()[0];
    let v: Vec<f32> = (0..a.len())
        .map(|i| a.data.get_f64(i).abs() as f32)
        .collect();
    Literal::Array(Array::f32(&a.shape.dims, v))
}

fn bits(l: &Literal) -> Vec<u32> {
    let a = &l.leaves()[0];
    (0..a.len())
        .map(|i| (a.data.get_f64(i) as f32).to_bits())
        .collect()
}

/// Asserts that `plan_convolution` picks `expect` for `conv` at `precision`, then runs it with
/// the JIT on 1 and 2 threads and with the interpreter on random operands from `seed`: every
/// element within `tolerance` times its sum of |terms|, the same bits from two runs, and
/// (but for the patch GEMM) on both thread counts. Returns the largest error / sum |terms|.
pub fn check_routine(
    conv: &Convolution,
    dims: [&[i64]; 3],
    seed: u32,
    (expect, precision): (&str, ConvPrecision),
    tolerance: f64,
) -> f64 {
    assert_eq!(chosen(conv, dims, precision), expect, "{dims:?}");
    let m = one_conv_module(dims, conv);
    let args = [
        pseudo_random_f32(dims[0], seed, 0),
        pseudo_random_f32(dims[1], seed + 1, 0),
    ];
    let want = evaluate(&m, &args).expect("interpreter");
    let mag = evaluate(&m, &[magnitudes(&args[0]), magnitudes(&args[1])]).expect("interpreter");
    let mut worst = 0.0f64;
    let mut first: Option<Vec<u32>> = None;
    for threads in [1, 2] {
        let opts = JitOptions {
            gemm_threads: threads,
            ..JitOptions::default()
        };
        let exe = compile(&m, &opts).expect("compile");
        let got = exe.run(&args).expect("run");
        let again = exe.run(&args).expect("run");
        assert!(bits(&got) == bits(&again), "{dims:?}: two runs differ");
        // Every specialized routine gives the same bits on any thread count; the patch GEMM's
        // weight gradient sums one partial per worker, so not it.
        match &first {
            _ if expect == "gemm" => {}
            None => first = Some(bits(&got)),
            Some(one) => assert!(one == &bits(&got), "{dims:?}: 2 threads differ from 1"),
        }
        let (g, w, s) = (&got.leaves()[0], &want.leaves()[0], &mag.leaves()[0]);
        assert_eq!(g.shape, w.shape);
        for i in 0..g.len() {
            let (p, q, t) = (g.data.get_f64(i), w.data.get_f64(i), s.data.get_f64(i));
            let err = (p - q).abs();
            assert!(
                err <= tolerance * t + 1e-30,
                "{dims:?} element {i}: jit {p} vs interpreter {q} (sum |terms| {t})"
            );
            if t > 0.0 {
                worst = worst.max(err / t);
            }
        }
    }
    worst
}
