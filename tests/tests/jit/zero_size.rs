//! Zero-size arrays on the JIT against the interpreter: a zero extent in a dimension that is
//! not the leading one (broadcast, transpose, slice, iota, reverse, dynamic-slice), reduces
//! over an empty dimension (the init value), concatenate with empty operands, and dot and
//! convolution with a zero dimension (zeros). Each module runs as written and optimized
//! (fused), vectorized and scalar. These used to end in SIGFPE: the kernels divided by a
//! zero stride or extent.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, Literal};
use tessel_runtime::jit::{compile, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

/// Runs `body` (an entry computation's instructions, `ROOT` included) with `args` on the
/// interpreter and on the JIT, as written and optimized, and requires bitwise equal results.
fn check(body: &str, args: &[Literal]) {
    let text = format!(
        "HloModule zero_size\n\n\
         add {{\n  xa = f32[] parameter(0)\n  xb = f32[] parameter(1)\n  ROOT xr = f32[] add(xa, xb)\n}}\n\n\
         max {{\n  ya = f32[] parameter(0)\n  yb = f32[] parameter(1)\n  ROOT yr = f32[] maximum(ya, yb)\n}}\n\n\
         ENTRY main {{\n{body}\n}}\n"
    );
    for opt in [false, true] {
        let mut module = parse_module(&text, None).unwrap();
        if opt {
            optimize(&mut module, &CompileOptions::default()).unwrap();
        }
        let want = evaluate(&module, args).unwrap();
        for vectorize in [true, false] {
            let options = JitOptions {
                vectorize,
                ..Default::default()
            };
            let exe = compile(&module, &options).unwrap();
            let got = exe.run(args).unwrap();
            let (g, w) = (got.leaves(), want.leaves());
            assert_eq!(g.len(), w.len(), "leaf count");
            for (x, y) in g.iter().zip(w) {
                assert_eq!(x.shape, y.shape, "opt={opt} vectorize={vectorize}");
                assert!(
                    x.data.to_le_bytes() == y.data.to_le_bytes(),
                    "opt={opt} vectorize={vectorize}: jit differs from interpreter"
                );
            }
        }
    }
}

fn f32s(dims: &[i64], seed: u32) -> Literal {
    pseudo_random_f32(dims, seed, 0)
}

fn s32(v: i32) -> Literal {
    Literal::Array(Array::scalar_s32(v))
}

#[test]
fn broadcast_to_inner_zero() {
    check(
        "  p = f32[5] parameter(0)\n  b = f32[5,0] broadcast(p), dimensions={0}\n  \
         e = f32[5,0] exponential(b)\n  n = f32[5] negate(p)\n  ROOT t = (f32[5,0], f32[5]) tuple(e, n)",
        &[f32s(&[5], 1)],
    );
}

#[test]
fn transpose_to_trailing_zero() {
    check(
        "  p = f32[2,0,3] parameter(0)\n  a = f32[2,0,3] add(p, p)\n  \
         ROOT t = f32[2,3,0] transpose(a), dimensions={0,2,1}",
        &[f32s(&[2, 0, 3], 1)],
    );
}

#[test]
fn empty_slice() {
    check(
        "  p = f32[4,6] parameter(0)\n  s = f32[4,0] slice(p), slice={[0:4], [2:2]}\n  \
         ROOT e = f32[4,0] exponential(s)",
        &[f32s(&[4, 6], 1)],
    );
}

#[test]
fn iota_with_zero_dimension() {
    check(
        "  i = f32[3,0] iota(), iota_dimension=0\n  ROOT s = f32[3,0] sine(i)",
        &[],
    );
    check("  ROOT i = s32[3,0,2] iota(), iota_dimension=2", &[]);
}

#[test]
fn reverse_with_zero_dimension() {
    check(
        "  p = f32[3,0] parameter(0)\n  r = f32[3,0] reverse(p), dimensions={0,1}\n  \
         ROOT n = f32[3,0] negate(r)",
        &[f32s(&[3, 0], 1)],
    );
}

#[test]
fn dynamic_slice_with_zero_size() {
    check(
        "  p = f32[4,6] parameter(0)\n  i = s32[] parameter(1)\n  \
         d = f32[4,0] dynamic-slice(p, i, i), dynamic_slice_sizes={4,0}\n  \
         ROOT n = f32[4,0] negate(d)",
        &[f32s(&[4, 6], 1), s32(2)],
    );
    check(
        "  p = f32[4,0] parameter(0)\n  i = s32[] parameter(1)\n  \
         ROOT d = f32[2,0] dynamic-slice(p, i, i), dynamic_slice_sizes={2,0}",
        &[f32s(&[4, 0], 1), s32(1)],
    );
}

#[test]
fn reduce_over_empty_dimension_gives_init() {
    check(
        "  p = f32[3,0] parameter(0)\n  c = f32[] constant(1.5)\n  \
         ROOT r = f32[3] reduce(p, c), dimensions={1}, to_apply=add",
        &[f32s(&[3, 0], 1)],
    );
    check(
        "  p = f32[0,7] parameter(0)\n  e = f32[0,7] exponential(p)\n  c = f32[] constant(-inf)\n  \
         ROOT r = f32[7] reduce(e, c), dimensions={0}, to_apply=max",
        &[f32s(&[0, 7], 1)],
    );
    check(
        "  p = f32[4,0,5] parameter(0)\n  c = f32[] constant(2)\n  \
         ROOT r = f32[] reduce(p, c), dimensions={0,1,2}, to_apply=add",
        &[f32s(&[4, 0, 5], 1)],
    );
    // Nothing to do at all: the output is empty too.
    check(
        "  p = f32[3,0] parameter(0)\n  c = f32[] constant(0)\n  \
         ROOT r = f32[0] reduce(p, c), dimensions={0}, to_apply=add",
        &[f32s(&[3, 0], 1)],
    );
}

#[test]
fn concatenate_with_empty_operands() {
    check(
        "  a = f32[3,2] parameter(0)\n  b = f32[3,0] parameter(1)\n  \
         c = f32[3,4] concatenate(b, a, b, a), dimensions={1}\n  ROOT e = f32[3,4] exponential(c)",
        &[f32s(&[3, 2], 1), f32s(&[3, 0], 2)],
    );
    check(
        "  a = f32[0,5] parameter(0)\n  b = f32[2,5] parameter(1)\n  \
         ROOT c = f32[2,5] concatenate(a, b), dimensions={0}",
        &[f32s(&[0, 5], 1), f32s(&[2, 5], 2)],
    );
}

#[test]
fn dot_with_zero_dimension() {
    // An empty contraction: zeros.
    check(
        "  a = f32[3,0] parameter(0)\n  b = f32[0,4] parameter(1)\n  \
         ROOT d = f32[3,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        &[f32s(&[3, 0], 1), f32s(&[0, 4], 2)],
    );
    check(
        "  a = f32[3,5] parameter(0)\n  b = f32[5,0] parameter(1)\n  \
         ROOT d = f32[3,0] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        &[f32s(&[3, 5], 1), f32s(&[5, 0], 2)],
    );
    check(
        "  a = f32[2,3,0] parameter(0)\n  b = f32[2,0,4] parameter(1)\n  \
         ROOT d = f32[2,3,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, \
         lhs_contracting_dims={2}, rhs_contracting_dims={1}",
        &[f32s(&[2, 3, 0], 1), f32s(&[2, 0, 4], 2)],
    );
}

#[test]
fn convolution_with_zero_dimension() {
    // No input features: zeros.
    check(
        "  x = f32[1,5,5,0] parameter(0)\n  k = f32[3,3,0,2] parameter(1)\n  \
         ROOT c = f32[1,3,3,2] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f",
        &[f32s(&[1, 5, 5, 0], 1), f32s(&[3, 3, 0, 2], 2)],
    );
    // No output features and an empty batch: an empty result.
    check(
        "  x = f32[1,5,5,2] parameter(0)\n  k = f32[3,3,2,0] parameter(1)\n  \
         ROOT c = f32[1,5,5,0] convolution(x, k), window={size=3x3 pad=1_1x1_1}, \
         dim_labels=b01f_01io->b01f",
        &[f32s(&[1, 5, 5, 2], 1), f32s(&[3, 3, 2, 0], 2)],
    );
    check(
        "  x = f32[0,5,5,2] parameter(0)\n  k = f32[3,3,2,4] parameter(1)\n  \
         ROOT c = f32[0,3,3,4] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f",
        &[f32s(&[0, 5, 5, 2], 1), f32s(&[3, 3, 2, 4], 2)],
    );
}

#[test]
fn reduce_window_and_pad_of_empty_operand() {
    // Padding an empty operand gives the padding value everywhere.
    check(
        "  p = f32[3,0] parameter(0)\n  z = f32[] constant(0.5)\n  \
         ROOT q = f32[3,4] pad(p, z), padding=0_0x2_2",
        &[f32s(&[3, 0], 1)],
    );
    check(
        "  p = f32[4,0] parameter(0)\n  c = f32[] constant(0)\n  \
         ROOT r = f32[2,0] reduce-window(p, c), window={size=2x1 stride=2x1}, to_apply=add",
        &[f32s(&[4, 0], 1)],
    );
}
