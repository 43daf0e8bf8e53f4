//! A max-pool gradient (select-and-scatter with 2x2 windows tiling the operand) and the ReLU
//! gradient after it: the fusion pass puts both in one fusion, and the JIT loops over the
//! windows, computing the ReLU gradient at each window position without storing the max-pool
//! gradient. Checked against the interpreter (bitwise: selecting and adding to zero are exact),
//! and one thread against two (bitwise), on odd shapes with many ties in the windows.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Literal, Module, Op};
use tessel_runtime::jit::{compile, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

fn bits(l: &Literal) -> Vec<Vec<u8>> {
    l.leaves().iter().map(|a| a.data.to_le_bytes()).collect()
}

fn module(n: i64, h: i64, c: i64, consumer: &str) -> Module {
    let mut m = parsed(n, h, c, consumer);
    optimize(&mut m, &CompileOptions::default()).unwrap();
    m
}

/// The module as parsed: the JIT's own fusion, where the select-and-scatter is a buffer.
fn parsed(n: i64, h: i64, c: i64, consumer: &str) -> Module {
    let text = format!(
        "HloModule m
ge {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}}
add {{
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}}
ENTRY e {{
  z = f32[{n},{h},{h},{c}] parameter(0)
  g = f32[{n},{hh},{hh},{c}] parameter(1)
  zero = f32[] constant(0)
  zeros = f32[{n},{h},{h},{c}] broadcast(zero), dimensions={{}}
  relu = f32[{n},{h},{h},{c}] maximum(z, zeros)
  pooled = f32[{n},{hh},{hh},{c}] reduce-window(relu, zero), window={{size=1x2x2x1 stride=1x2x2x1}}, to_apply=add
  grad = f32[{n},{h},{h},{c}] select-and-scatter(relu, g, zero), window={{size=1x2x2x1 stride=1x2x2x1}}, select=ge, scatter=add
  {consumer}
}}
",
        hh = h / 2
    );
    parse_module(&text, None).unwrap()
}

/// Runs on 1 and 2 threads; both bitwise equal to each other and to the interpreter.
fn check(m: &Module, args: &[Literal]) {
    let want = evaluate(m, args).unwrap();
    for threads in [1, 2] {
        let options = JitOptions {
            gemm_threads: threads,
            ..Default::default()
        };
        let got = compile(m, &options).unwrap().run(args).unwrap();
        assert!(bits(&got) == bits(&want), "{threads} threads: jit differs");
    }
}

/// No select-and-scatter is left outside a fusion.
fn fused(m: &Module) -> bool {
    let entry = m.entry();
    entry
        .ids()
        .iter()
        .all(|&id| !matches!(entry.get(id).op, Op::SelectAndScatter { .. }))
}

#[test]
fn relu_gradient_of_a_max_pool_gradient_is_one_kernel() {
    let consumer = "pos = pred[9,30,30,17] compare(z, zeros), direction=GT
  d = f32[9,30,30,17] select(pos, grad, zeros)
  ROOT t = (f32[9,15,15,17], f32[9,30,30,17]) tuple(pooled, d)";
    let m = module(9, 30, 17, consumer);
    assert!(fused(&m), "the select-and-scatter was not fused");
    // Few distinct values, so that many windows hold equal maxima.
    let z = pseudo_random_f32(&[9, 30, 30, 17], 31, 5);
    let g = pseudo_random_f32(&[9, 15, 15, 17], 32, 0);
    check(&m, &[z, g]);
}

/// A consumer that reads the max-pool gradient at another index (through a reverse) still
/// gets the right values (the select-and-scatter's value is computed there from its window).
#[test]
fn consumer_reading_another_index() {
    let consumer = "r = f32[3,6,6,5] reverse(grad), dimensions={1}
  ROOT d = f32[3,6,6,5] multiply(r, z)";
    let m = module(3, 6, 5, consumer);
    assert!(fused(&m), "the select-and-scatter was not fused");
    let z = pseudo_random_f32(&[3, 6, 6, 5], 33, 4);
    let g = pseudo_random_f32(&[3, 3, 3, 5], 34, 0);
    check(&m, &[z, g]);
}

/// The ReLU gradient of a max-pool gradient, also summed into a bias gradient: one fusion,
/// one loop over the windows that stores the ReLU gradient and folds the sum, in two parts.
/// Integer-valued gradients keep every sum exact, so the result is bitwise the interpreter's.
#[test]
fn relu_gradient_and_bias_gradient_over_the_windows() {
    let consumer = "pos = pred[9,30,30,17] compare(z, zeros), direction=GT
  d = f32[9,30,30,17] select(pos, grad, zeros)
  bias = f32[17] reduce(d, zero), dimensions={0,1,2}, to_apply=add
  ROOT t = (f32[9,15,15,17], f32[9,30,30,17], f32[17]) tuple(pooled, d, bias)";
    let m = module(9, 30, 17, consumer);
    assert!(fused(&m), "the select-and-scatter was not fused");
    let z = pseudo_random_f32(&[9, 30, 30, 17], 35, 5);
    let g = pseudo_random_f32(&[9, 15, 15, 17], 36, 7);
    check(&m, &[z, g]);
}

/// Unoptimized, the select-and-scatter is its own kernel and the ReLU gradient reads its
/// buffer: the kernel must not try to loop over its windows.
#[test]
fn unfused_max_pool_gradient_is_read_from_its_buffer() {
    let consumer = "pos = pred[9,30,30,17] compare(z, zeros), direction=GT
  d = f32[9,30,30,17] select(pos, grad, zeros)
  bias = f32[17] reduce(d, zero), dimensions={0,1,2}, to_apply=add
  ROOT t = (f32[9,15,15,17], f32[9,30,30,17], f32[17]) tuple(pooled, d, bias)";
    let m = parsed(9, 30, 17, consumer);
    assert!(!fused(&m));
    let z = pseudo_random_f32(&[9, 30, 30, 17], 37, 5);
    let g = pseudo_random_f32(&[9, 15, 15, 17], 38, 7);
    check(&m, &[z, g]);
}
