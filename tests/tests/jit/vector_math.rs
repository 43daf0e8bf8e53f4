//! The polynomial math in generated code (4-lane and scalar) against Rust's functions, over
//! wide sampled ranges and the special inputs: 0, -0, subnormals, ±inf, NaN, overflow and
//! underflow. The reference is the f64 function rounded to f32; errors are in ulps and the
//! worst ones are recorded in docs/jit.md.

use tessel_compiler::ir::*;
use tessel_runtime::jit::{compile, JitOptions};

fn unary_module(op: Op, n: i64) -> Module {
    let mut m = Module::new("vm");
    let s = Shape::array(ElementType::F32, &[n]);
    let c = m.entry_mut();
    let x = c.add(Instruction::new("x", Op::Parameter(0), s.clone()), &[]);
    c.add(Instruction::new("y", op, s), &[x]);
    m
}

/// Distance in representable f32 values; NaN matches only NaN.
fn ulps(a: f32, b: f32) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        (if i < 0 { i32::MIN - i } else { i }) as i64
    };
    (key(a) - key(b)).unsigned_abs()
}

fn specials() -> Vec<f32> {
    vec![
        0.0,
        -0.0,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-40,
        -1e-40,
        f32::from_bits(1),
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        f32::MIN,
        1.0,
        -1.0,
        88.7,
        89.0,
        -87.0,
        -103.0,
        -110.0,
        1e-7,
        -1e-7,
    ]
}

fn uniform(lo: f32, hi: f32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| lo + (hi - lo) * (i as f32 + 0.5) / n as f32)
        .collect()
}

fn log_spaced(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| 10f32.powf(-44.0 + 82.0 * i as f32 / n as f32))
        .collect()
}

/// Runs `op` on `xs` through 4-lane and scalar code; returns the worst error in ulps.
fn worst_ulps(op: UnaryOp, xs: &[f32], reference: fn(f64) -> f64) -> (u64, f32) {
    let m = unary_module(Op::Unary(op), xs.len() as i64);
    let arg = Literal::Array(Array::f32(&[xs.len() as i64], xs.to_vec()));
    let mut worst = (0u64, 0f32);
    for vectorize in [true, false] {
        let exe = compile(
            &m,
            &JitOptions {
                vectorize,
                ..Default::default()
            },
        )
        .unwrap();
        let out = exe.run(std::slice::from_ref(&arg)).unwrap();
        let ArrayData::F32(ys) = &out.leaves()[0].data else {
            panic!("f32 result")
        };
        for (&x, &y) in xs.iter().zip(ys) {
            let want = reference(x as f64) as f32;
            let u = ulps(y, want);
            assert!(
                u != u64::MAX,
                "{}({x:e}) = {y:e}, want {want:e} (vectorize {vectorize})",
                op.name()
            );
            if u > worst.0 {
                worst = (u, x);
            }
        }
    }
    worst
}

fn check(op: UnaryOp, xs: Vec<f32>, reference: fn(f64) -> f64, bound: u64) {
    check_within(op, xs, reference, bound, f32::INFINITY)
}

/// Like [`check`], leaving out finite special inputs larger than `limit` in magnitude.
fn check_within(op: UnaryOp, mut xs: Vec<f32>, reference: fn(f64) -> f64, bound: u64, limit: f32) {
    xs.extend(
        specials()
            .into_iter()
            .filter(|x| !x.is_finite() || x.abs() <= limit),
    );
    // An odd count exercises the scalar tail too.
    if xs.len().is_multiple_of(4) {
        xs.push(0.5);
    }
    let (u, at) = worst_ulps(op, &xs, reference);
    eprintln!(
        "{:>24}: max {u} ulp (at {at:e}) over {} inputs",
        op.name(),
        xs.len()
    );
    assert!(
        u <= bound,
        "{}: {u} ulps at {at:e} (bound {bound})",
        op.name()
    );
}

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn exp_family() {
    let mut xs = uniform(-104.0, 89.0, 20001);
    xs.extend(uniform(-1.0, 1.0, 2001));
    check(UnaryOp::Exp, xs, f64::exp, 3);
    let mut xs = uniform(-30.0, 89.0, 20001);
    xs.extend(uniform(-1e-3, 1e-3, 2001));
    xs.extend(uniform(-1.0, 1.0, 2001));
    check(UnaryOp::Expm1, xs, f64::exp_m1, 4);
    check(
        UnaryOp::Logistic,
        uniform(-100.0, 100.0, 20001),
        logistic,
        4,
    );
}

#[test]
fn log_family() {
    let mut xs = log_spaced(20001);
    xs.extend(uniform(0.5, 2.0, 2001));
    xs.extend([-1.0, -5.0, -1e-30]);
    check(UnaryOp::Log, xs, f64::ln, 3);
    let mut xs = uniform(-0.999, 10.0, 20001);
    xs.extend(uniform(-1e-4, 1e-4, 2001));
    xs.extend(log_spaced(2001));
    xs.extend([-1.0, -2.0]);
    check(UnaryOp::Log1p, xs, f64::ln_1p, 4);
}

#[test]
fn tanh_sin_cos_rsqrt() {
    let mut xs = uniform(-20.0, 20.0, 20001);
    xs.extend(uniform(-0.7, 0.7, 2001));
    check(UnaryOp::Tanh, xs, f64::tanh, 4);
    let mut xs = uniform(-3.2, 3.2, 20001);
    xs.extend(uniform(-1000.0, 1000.0, 20001));
    let trig: Vec<f32> = xs.into_iter().collect();
    // The reduction by pi/2 in three parts is accurate for |x| up to about 1e4; inf and
    // NaN still give NaN.
    check_within(UnaryOp::Sine, trig.clone(), f64::sin, 4, 1e4);
    check_within(UnaryOp::Cosine, trig, f64::cos, 4, 1e4);
    check(UnaryOp::Rsqrt, log_spaced(20001), |x| 1.0 / x.sqrt(), 2);
}
