//! The bias add after a convolution, done in the convolution routine's stores
//! (`runtime/src/jit/routines/bias_match.rs`, `program/conv_bias.rs`): with the fold on and
//! off, programs give bitwise the same outputs, and the fold removes exactly the bias-add
//! kernels it should (the count of generated kernel functions drops by those of each folded
//! add). Forms that must not fold (the convolution read by something else too, a ReLU in the
//! add's fusion) keep their kernels and their results.

use super::fold::{conv_layer_args as args, Fold};
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::ir::Literal;

/// The bias fold, counted in generated kernel functions (a folded add emits none).
const BIAS: Fold = Fold {
    set: |o, on| o.fold_bias_add = on,
    count: |s| s.kernels,
};

/// Checks `text` with the fold on and off (`Fold::check`): `folded` fewer kernels with it on.
fn check(text: &str, args: &[Literal], folded: usize) {
    for (on, off) in BIAS.check(text, args) {
        assert_eq!(off - on, folded, "folded kernels");
    }
}

/// `conv(x, k) + bias` in NHWC / HWIO with a 5x5 "same" window, `root` the result's use.
fn conv_bias(x: [i64; 4], o: i64, add: &str, root: &str) -> String {
    let [n, h, w, c] = x;
    format!(
        "HloModule m\n\nENTRY e {{\n  \
         x = f32[{n},{h},{w},{c}] parameter(0)\n  \
         k = f32[5,5,{c},{o}] parameter(1)\n  \
         b = f32[{o}] parameter(2)\n  \
         conv = f32[{n},{h},{w},{o}] convolution(x, k), window={{size=5x5 pad=2_2x2_2}}, dim_labels=b01f_01io->b01f\n  \
         bb = f32[{n},{h},{w},{o}] broadcast(b), dimensions={{3}}\n  \
         {add}\n  \
         {root}\n}}\n"
    )
}

#[test]
fn direct_and_winograd_convolutions_fold_their_bias_add() {
    // Direct (one input channel, 40 outputs: a full and a partial channel block).
    let x = [2, 9, 11, 1];
    let add = "ROOT y = f32[2,9,11,40] add(conv, bb)";
    check(&conv_bias(x, 40, add, ""), &args(x, 40), 1);
    // Winograd (11 input channels, 13 outputs: a channel tail), the bias first.
    let x = [3, 7, 10, 11];
    let add = "ROOT y = f32[3,7,10,13] add(bb, conv)";
    check(&conv_bias(x, 13, add, ""), &args(x, 13), 1);
}

#[test]
fn bias_adds_that_must_not_fold_keep_their_kernel() {
    let x = [2, 7, 10, 11];
    let a = args(x, 13);
    // The convolution is also an output: its value without the bias must survive.
    let add = "y = f32[2,7,10,13] add(conv, bb)";
    let root = "ROOT t = (f32[2,7,10,13], f32[2,7,10,13]) tuple(y, conv)";
    check(&conv_bias(x, 13, add, root), &a, 0);
    // A ReLU after the add, in the same fusion.
    let add = "y = f32[2,7,10,13] add(conv, bb)\n  z = f32[] constant(0)\n  \
               zb = f32[2,7,10,13] broadcast(z), dimensions={}";
    let root = "ROOT r = f32[2,7,10,13] maximum(y, zb)";
    check(&conv_bias(x, 13, add, root), &a, 0);
}

/// JAX's b128 MNIST training step: both convolutions' bias adds fold, with the same bits.
#[test]
fn mnist_step_folds_both_bias_adds_with_the_same_bits() {
    let mut module = tessel_tests::corpus_module("mnist_cnn_train_step_b128");
    optimize(&mut module, &CompileOptions::default()).unwrap();
    let args = tessel_tests::corpus_args("mnist_cnn_train_step_b128.inputs.safetensors");
    let (on, on_kernels) = BIAS.run(&module, &args, true, 2);
    let (off, off_kernels) = BIAS.run(&module, &args, false, 2);
    // Each add is a kernel of its own when not folded.
    assert_eq!(off_kernels - on_kernels, 2);
    for (leaf, (a, b)) in on.iter().zip(&off).enumerate() {
        assert!(a == b, "output {leaf} differs with the bias adds folded");
    }
}
