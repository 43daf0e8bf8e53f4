//! Reduces on the JIT: leading dimensions reduced into registers (bias gradients), and large
//! reduces of their first dimension computed in two parts (rows `[0, mid)` and `[mid, end)`)
//! that are combined at the end. The cut depends only on the shapes, so one thread and two
//! threads must give bitwise the same result; each case is also checked against the
//! interpreter: bitwise with small-integer inputs (every partial sum is exact), within a
//! rounding bound with random floats. Shapes are odd (1, 3, 5, 17, ...).

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::Literal;
use tessel_runtime::jit::{compile, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

fn bits(l: &Literal) -> Vec<Vec<u8>> {
    l.leaves().iter().map(|a| a.data.to_le_bytes()).collect()
}

/// How the JIT must agree with the interpreter.
enum Expect {
    /// Bitwise (exact sums, maximum, or the interpreter's order kept).
    Bitwise,
    /// Within `tol` times the largest absolute output.
    Within(f64),
}

/// Runs `text` (optimized first when `opt`) on 1 and 2 threads; checks the kernel count on
/// both (a split reduce is three kernels whatever the thread count), that both are bitwise
/// equal, and compares with the interpreter.
fn check(text: &str, args: &[Literal], opt: bool, kernels: usize, expect: Expect) {
    let mut module = parse_module(text, None).unwrap();
    if opt {
        optimize(&mut module, &CompileOptions::default()).unwrap();
    }
    let want = evaluate(&module, args).unwrap();
    let run = |threads: usize| {
        let options = JitOptions {
            gemm_threads: threads,
            ..Default::default()
        };
        let exe = compile(&module, &options).unwrap();
        (exe.run(args).unwrap(), exe.stats().kernels)
    };
    let ((one, kernels_one), (two, kernels_two)) = (run(1), run(2));
    assert_eq!(kernels_one, kernels, "kernels on one thread");
    assert_eq!(kernels_two, kernels, "kernels on two threads");
    assert!(bits(&one) == bits(&two), "two threads differ from one");
    match expect {
        Expect::Bitwise => assert!(bits(&two) == bits(&want), "jit differs from interpreter"),
        Expect::Within(tol) => {
            for (x, y) in two.leaves().iter().zip(want.leaves()) {
                assert_eq!(x.shape, y.shape);
                let scale = (0..y.len())
                    .map(|i| y.data.get_f64(i).abs())
                    .fold(1.0, f64::max);
                for i in 0..x.len() {
                    let (p, q) = (x.data.get_f64(i), y.data.get_f64(i));
                    assert!(
                        (p - q).abs() <= tol * scale,
                        "element {i}: jit {p} vs interpreter {q}"
                    );
                }
            }
        }
    }
}

fn reduce_module(in_dims: &str, out_dims: &str, dims: &str, op: &str, init: &str) -> String {
    format!(
        "HloModule m
r {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] {op}(a, b)
}}
ENTRY e {{
  x = f32[{in_dims}] parameter(0)
  i = f32[] constant({init})
  ROOT s = f32[{out_dims}] reduce(x, i), dimensions={{{dims}}}, to_apply=r
}}
"
    )
}

/// A bias gradient: `[N, H, W, C] -> [C]` with C = 5 (one vector and a scalar), split.
#[test]
fn bias_gradient_is_split_and_exact_on_integers() {
    let text = reduce_module("17,29,31,5", "5", "0,1,2", "add", "0");
    let x = pseudo_random_f32(&[17, 29, 31, 5], 1, 9);
    check(&text, &[x], false, 3, Expect::Bitwise);
}

/// The same with random floats and C = 17: the two-part order differs from the interpreter's
/// by rounding only.
#[test]
fn bias_gradient_of_random_floats() {
    let text = reduce_module("33,15,9,17", "17", "0,1,2", "add", "0");
    let x = pseudo_random_f32(&[33, 15, 9, 17], 2, 0);
    check(&text, &[x], false, 3, Expect::Within(1e-5));
}

/// C = 67: more than eight accumulators, so the kept dimension runs in several chunks.
#[test]
fn wide_kept_dimension_in_chunks() {
    let text = reduce_module("101,11,67", "67", "0,1", "add", "0");
    let x = pseudo_random_f32(&[101, 11, 67], 3, 9);
    check(&text, &[x], false, 3, Expect::Bitwise);
}

/// Maximum with -inf: split, and exact whatever the order.
#[test]
fn column_maximum_is_split() {
    let text = reduce_module("301,257", "257", "0", "maximum", "-inf");
    let x = pseudo_random_f32(&[301, 257], 4, 0);
    check(&text, &[x], false, 3, Expect::Bitwise);
}

/// The kept dimensions are not trailing (innermost reduced): the general loops, split.
#[test]
fn innermost_reduced_is_split() {
    let text = reduce_module("65,33,35", "33", "0,2", "add", "0");
    let x = pseudo_random_f32(&[65, 33, 35], 5, 9);
    check(&text, &[x], false, 3, Expect::Bitwise);
    let text = reduce_module("257,301", "", "0,1", "add", "0");
    let x = pseudo_random_f32(&[257, 301], 6, 0);
    check(&text, &[x], false, 3, Expect::Within(1e-5));
}

/// Dimension 0 kept, 1 reduced, 2 kept: the general loops, not split.
#[test]
fn first_dimension_kept_is_not_split() {
    let text = reduce_module("61,37,31", "61,31", "1", "add", "0");
    let x = pseudo_random_f32(&[61, 37, 31], 7, 0);
    check(&text, &[x], false, 1, Expect::Bitwise);
}

/// An init value that is not the reducer's identity must not be applied twice: not split.
#[test]
fn non_identity_init_is_not_split() {
    let text = reduce_module("300,301", "301", "0", "add", "1.5");
    let x = pseudo_random_f32(&[300, 301], 8, 0);
    check(&text, &[x], false, 1, Expect::Bitwise);
}

/// Below the size where reduces are split, the register accumulators keep the interpreter's
/// order: bitwise equal on random floats, for widths 1, 3, 5 and 17.
#[test]
fn small_column_reduces_keep_the_order() {
    for c in [1, 3, 5, 17] {
        let text = reduce_module(&format!("3,5,7,{c}"), &format!("{c}"), "0,1,2", "add", "0");
        let x = pseudo_random_f32(&[3, 5, 7, c], 9 + c as u32, 0);
        check(&text, &[x], false, 1, Expect::Bitwise);
    }
}

/// A reduce fused by the optimizer with the elementwise ops that feed it (a `kInput` fusion
/// whose init constant is copied into the fused computation) is split too.
#[test]
fn fused_bias_gradient_is_split() {
    let text = "HloModule m
r {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  x = f32[9,31,29,17] parameter(0)
  g = f32[9,31,29,17] parameter(1)
  zero = f32[] constant(0)
  zeros = f32[9,31,29,17] broadcast(zero), dimensions={}
  pos = pred[9,31,29,17] compare(x, zeros), direction=GT
  d = f32[9,31,29,17] select(pos, g, zeros)
  ROOT s = f32[17] reduce(d, zero), dimensions={0,1,2}, to_apply=r
}
";
    let x = pseudo_random_f32(&[9, 31, 29, 17], 20, 0);
    let g = pseudo_random_f32(&[9, 31, 29, 17], 21, 9);
    check(text, &[x, g], true, 3, Expect::Bitwise);
}

/// A ReLU gradient that is also an output, and its bias gradient: the fusion pass makes them
/// one fusion with two outputs, and the JIT one loop nest that stores the gradient and folds
/// it into the reduce (in two parts when the reduce is large).
fn relu_gradient_and_bias_gradient(dims: &str, c: &str) -> String {
    format!(
        "HloModule m
r {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[{dims}] parameter(0)
  g = f32[{dims}] parameter(1)
  zero = f32[] constant(0)
  zeros = f32[{dims}] broadcast(zero), dimensions={{}}
  pos = pred[{dims}] compare(x, zeros), direction=GT
  d = f32[{dims}] select(pos, g, zeros)
  s = f32[{c}] reduce(d, zero), dimensions={{0,1,2}}, to_apply=r
  ROOT t = (f32[{dims}], f32[{c}]) tuple(d, s)
}}
"
    )
}

#[test]
fn elementwise_output_and_its_reduce_in_one_split_loop() {
    let text = relu_gradient_and_bias_gradient("9,31,29,17", "17");
    let x = pseudo_random_f32(&[9, 31, 29, 17], 22, 0);
    let g = pseudo_random_f32(&[9, 31, 29, 17], 23, 9);
    check(&text, &[x.clone(), g], true, 3, Expect::Bitwise);
    let g = pseudo_random_f32(&[9, 31, 29, 17], 24, 0);
    check(&text, &[x, g], true, 3, Expect::Within(1e-5));
}

#[test]
fn small_elementwise_output_and_its_reduce_keep_the_order() {
    let text = relu_gradient_and_bias_gradient("3,5,7,5", "5");
    let x = pseudo_random_f32(&[3, 5, 7, 5], 25, 0);
    let g = pseudo_random_f32(&[3, 5, 7, 5], 26, 0);
    check(&text, &[x, g], true, 1, Expect::Bitwise);
}
