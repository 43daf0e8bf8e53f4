//! Large elementwise kernels run in chunks of their outermost loop that the threads claim at
//! run time (`JitOptions::gemm_threads >= 2`, elements times operations per element at least
//! 2^16).
//! Each case is checked against the
//! same program on one thread (bitwise: every element is computed by the same code) and against
//! the interpreter, on sizes that do not divide evenly: a flat kernel with a scalar tail, a
//! nested kernel with an odd first dimension, a transposing kernel, and a multi-output fusion.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Literal};
use tessel_runtime::jit::{compile, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

fn f32s(dims: &[i64], seed: u32) -> Literal {
    pseudo_random_f32(dims, seed, 0)
}

fn bits(l: &Literal) -> Vec<Vec<u8>> {
    l.leaves().iter().map(|a| a.data.to_le_bytes()).collect()
}

/// The program on 1 and on 2 threads: outputs and chunked kernel counts.
fn run_on_one_and_two(text: &str, args: &[Literal]) -> [(Literal, usize); 2] {
    let mut module = parse_module(text, None).unwrap();
    optimize(&mut module, &CompileOptions::default()).unwrap();
    let run = |threads: usize| {
        let options = JitOptions {
            gemm_threads: threads,
            ..Default::default()
        };
        let exe = compile(&module, &options).unwrap();
        (exe.run(args).unwrap(), exe.stats().chunked_kernels)
    };
    [run(1), run(2)]
}

fn check(text: &str, args: &[Literal]) {
    let mut module = parse_module(text, None).unwrap();
    optimize(&mut module, &CompileOptions::default()).unwrap();
    let want = evaluate(&module, args).unwrap();
    let [(one, chunked_one), (two, chunked_two)] = run_on_one_and_two(text, args);
    // The chunked path was taken on 2 threads only.
    assert!(
        chunked_two > 0 && chunked_one == 0,
        "{chunked_two} chunked kernels on 2 threads, {chunked_one} on 1"
    );
    assert!(bits(&one) == bits(&two), "two threads differ from one");
    for (x, y) in two.leaves().iter().zip(want.leaves()) {
        assert_eq!(x.shape, y.shape);
        for i in 0..x.len() {
            let (p, q) = (x.data.get_f64(i), y.data.get_f64(i));
            assert!(
                (p - q).abs() <= 1e-5 * (1.0 + q.abs()),
                "element {i}: jit {p} vs interpreter {q}"
            );
        }
    }
}

#[test]
fn flat_kernel_with_a_scalar_tail() {
    check(
        "HloModule m\nENTRY e {\n  a = f32[70001] parameter(0)\n  b = f32[70001] parameter(1)\n  t = f32[70001] tanh(a)\n  m = f32[70001] multiply(t, b)\n  ROOT r = f32[70001] add(m, a)\n}\n",
        &[f32s(&[70001], 1), f32s(&[70001], 2)],
    );
}

#[test]
fn nested_kernel_with_an_odd_first_dimension_and_a_broadcast() {
    check(
        "HloModule m\nENTRY e {\n  a = f32[257,301] parameter(0)\n  v = f32[301] parameter(1)\n  b = f32[257,301] broadcast(v), dimensions={1}\n  s = f32[257,301] subtract(a, b)\n  ROOT r = f32[257,301] exponential(s)\n}\n",
        &[f32s(&[257, 301], 3), f32s(&[301], 4)],
    );
}

#[test]
fn transposing_kernel() {
    check(
        "HloModule m\nENTRY e {\n  a = f32[333,211] parameter(0)\n  t = f32[211,333] transpose(a), dimensions={1,0}\n  ROOT r = f32[211,333] multiply(t, t)\n}\n",
        &[f32s(&[333, 211], 5)],
    );
}

#[test]
fn multi_output_fusion() {
    check(
        "HloModule m\nENTRY e {\n  a = f32[129,1001] parameter(0)\n  b = f32[129,1001] parameter(1)\n  x = f32[129,1001] add(a, b)\n  y = f32[129,1001] multiply(a, b)\n  ROOT r = (f32[129,1001], f32[129,1001]) tuple(x, y)\n}\n",
        &[f32s(&[129, 1001], 6), f32s(&[129, 1001], 7)],
    );
}

/// A max-pool gradient (2x2 windows, stride 2, tiling the operand) with an odd batch and ties
/// in many windows: the two halves of the batch run on two threads.
#[test]
fn max_pool_gradient_split_over_the_batch() {
    let text = "HloModule m
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
ENTRY e {
  x = f32[9,30,30,16] parameter(0)
  g = f32[9,15,15,16] parameter(1)
  zero = f32[] constant(0)
  ROOT r = f32[9,30,30,16] select-and-scatter(x, g, zero), window={size=1x2x2x1 stride=1x2x2x1}, select=ge, scatter=add
}
";
    // Few distinct values, so that many windows hold equal maxima.
    let x = pseudo_random_f32(&[9, 30, 30, 16], 8, 9);
    check(text, &[x, f32s(&[9, 15, 15, 16], 9)]);
}

/// A padded, overlapping max-pool (3x3 windows, stride 2) with an odd batch: the two halves of
/// the output's first dimension run on two threads.
#[test]
fn padded_max_pool_split_over_the_batch() {
    let text = "HloModule m
max {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] maximum(p, q)
}
ENTRY e {
  x = f32[9,33,33,32] parameter(0)
  lowest = f32[] constant(-inf)
  ROOT r = f32[9,17,17,32] reduce-window(x, lowest), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=max
}
";
    check(text, &[f32s(&[9, 33, 33, 32], 10)]);
}

/// One round of Threefry-2x32 as JAX's dropout mask computes it (rotate, xor, add) on 16K
/// elements: few elements, but enough operations each that the kernel splits. Regression
/// test for the split counting elements only (the step's four such kernels ran on one thread).
#[test]
fn small_kernel_with_many_operations_per_element() {
    let text = "HloModule m
ENTRY e {
  a = f32[128,128] parameter(0)
  b = f32[128,128] parameter(1)
  x = u32[128,128] bitcast-convert(a)
  y = u32[128,128] bitcast-convert(b)
  s = u32[] constant(13)
  r = u32[] constant(19)
  sb = u32[128,128] broadcast(s), dimensions={}
  rb = u32[128,128] broadcast(r), dimensions={}
  sum = u32[128,128] add(x, y)
  hi = u32[128,128] shift-left(y, sb)
  lo = u32[128,128] shift-right-logical(y, rb)
  rot = u32[128,128] or(hi, lo)
  ROOT out = u32[128,128] xor(sum, rot)
}
";
    check(text, &[f32s(&[128, 128], 11), f32s(&[128, 128], 12)]);
}

/// The same 16K elements with one operation each stay one whole kernel: cutting them into
/// chunks would cost more than it saves.
#[test]
fn small_kernel_with_one_operation_is_not_split() {
    let text = "HloModule m
ENTRY e {
  a = f32[128,128] parameter(0)
  b = f32[128,128] parameter(1)
  ROOT r = f32[128,128] add(a, b)
}
";
    let [(one, chunked_one), (two, chunked_two)] =
        run_on_one_and_two(text, &[f32s(&[128, 128], 13), f32s(&[128, 128], 14)]);
    assert_eq!((chunked_one, chunked_two), (0, 0));
    assert!(bits(&one) == bits(&two));
}

/// A one-dimensional kernel that reads an iota is not flat (the iota needs its index), but it
/// is still one loop: it runs in chunks too. Regression test: the dropout masks' Threefry
/// kernels over `u32[131072]` counters ran whole on one thread inside the training loop.
#[test]
fn one_dimensional_kernel_with_an_iota() {
    let text = "HloModule m
ENTRY e {
  k = u32[] parameter(0)
  a = f32[70001] parameter(1)
  i = u32[70001] iota(), iota_dimension=0
  kb = u32[70001] broadcast(k), dimensions={}
  x = u32[70001] add(i, kb)
  s = u32[] constant(13)
  r = u32[] constant(19)
  sb = u32[70001] broadcast(s), dimensions={}
  rb = u32[70001] broadcast(r), dimensions={}
  hi = u32[70001] shift-left(x, sb)
  lo = u32[70001] shift-right-logical(x, rb)
  rot = u32[70001] or(hi, lo)
  y = u32[70001] xor(x, rot)
  f = f32[70001] convert(y)
  ROOT out = f32[70001] multiply(f, a)
}
";
    let key = Literal::Array(Array::new(
        ArrayShape::scalar(ElementType::U32),
        ArrayData::U32(vec![0x1bd1_1bda]),
    ));
    check(text, &[key, f32s(&[70001], 15)]);
}

/// A global max pool after a ReLU (`[N, T, C] -> [N, C]`, the text CNN's): the reduce keeps
/// its first dimension, so each thread reduces whole rows of it, every output element in the
/// same order as on one thread.
#[test]
fn reduce_that_keeps_its_first_dimension() {
    let text = "HloModule m
max {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] maximum(p, q)
}
ENTRY e {
  x = f32[33,197,128] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[33,197,128] broadcast(zero), dimensions={}
  relu = f32[33,197,128] maximum(x, zeros)
  lowest = f32[] constant(-inf)
  ROOT r = f32[33,128] reduce(relu, lowest), dimensions={1}, to_apply=max
}
";
    check(text, &[f32s(&[33, 197, 128], 16)]);
}

/// A sum over the inner dimensions (`[N, H, W] -> [N]`): the accumulators stay in registers
/// across the innermost loop, each row of the first dimension on one thread.
#[test]
fn reduce_of_inner_dimensions_keeping_the_first() {
    let text = "HloModule m
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
ENTRY e {
  x = f32[17,301,21] parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[17] reduce(x, zero), dimensions={1,2}, to_apply=add
}
";
    check(text, &[f32s(&[17, 301, 21], 17)]);
}
