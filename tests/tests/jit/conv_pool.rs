//! The forward max-pool after a convolution, computed in the convolution routine's epilogue
//! (`runtime/src/jit/routines/pool_fold.rs`, `program/conv_pool.rs`): with the fold on and off,
//! programs give bitwise the same outputs (the pool's output and every other value), the fold
//! is taken exactly where it should be (`ProgramStats::folded_pools`), also in the inference
//! form (bias add, ReLU and pool in one fusion), and forms it must leave alone keep their
//! pool routine and their results.

use super::fold::{conv_layer_args as args, xorshift, Fold};
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::ir::Literal;

/// The pool fold, counted in the pools folded.
const POOL: Fold = Fold {
    set: |o, on| o.fold_pool = on,
    count: |s| s.folded_pools,
};

/// Checks `text` with the fold on and off (`Fold::check`): `folded` pools folded with it on,
/// none with it off.
fn check(text: &str, args: &[Literal], folded: usize) {
    for counts in POOL.check(text, args) {
        assert_eq!(counts, (folded, 0), "folded pools");
    }
}

/// A conv layer as JAX writes it: `conv(x, k)` (5x5, "same", `precision` its
/// operand_precision attribute or empty), `+ bias`, ReLU, then a `pool` x `pool` max-pool
/// with stride `stride`; `root` uses `conv`, `y` (the activation) and `p` (the pool).
fn layer(x: [i64; 4], o: i64, precision: &str, pool: i64, stride: i64, root: &str) -> String {
    let [n, h, w, c] = x;
    let (ph, pw) = ((h - pool) / stride + 1, (w - pool) / stride + 1);
    format!(
        "HloModule m\n\nmax {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
         ROOT m = f32[] maximum(a, b)\n}}\n\nENTRY e {{\n  \
         x = f32[{n},{h},{w},{c}] parameter(0)\n  \
         k = f32[5,5,{c},{o}] parameter(1)\n  \
         bias = f32[{o}] parameter(2)\n  \
         conv = f32[{n},{h},{w},{o}] convolution(x, k), window={{size=5x5 pad=2_2x2_2}}, dim_labels=b01f_01io->b01f{precision}\n  \
         bb = f32[{n},{h},{w},{o}] broadcast(bias), dimensions={{3}}\n  \
         y = f32[{n},{h},{w},{o}] add(conv, bb)\n  \
         zero = f32[] constant(0)\n  \
         zeros = f32[{n},{h},{w},{o}] broadcast(zero), dimensions={{}}\n  \
         relu = f32[{n},{h},{w},{o}] maximum(y, zeros)\n  \
         ninf = f32[] constant(-inf)\n  \
         p = f32[{n},{ph},{pw},{o}] reduce-window(relu, ninf), window={{size=1x{pool}x{pool}x1 stride=1x{stride}x{stride}x1}}, to_apply=max\n  \
         {root}\n}}\n"
    )
}

/// The pooled and the activation's shapes as a tuple root (the backward pass reads both).
fn both(x: [i64; 4], o: i64, pool: i64, stride: i64) -> String {
    let [n, h, w, _] = x;
    let (ph, pw) = ((h - pool) / stride + 1, (w - pool) / stride + 1);
    format!("ROOT t = (f32[{n},{ph},{pw},{o}], f32[{n},{h},{w},{o}]) tuple(p, y)")
}

#[test]
fn direct_and_winograd_convolutions_fold_their_pool() {
    // Direct (one input channel, 40 outputs), an odd height: the last run of rows is short
    // and the last row is pooled by no window.
    let x = [2, 11, 12, 1];
    check(&layer(x, 40, "", 2, 2, &both(x, 40, 2, 2)), &args(x, 40), 1);
    // Winograd F(4x4) (11 input channels, 13 outputs: a channel tail), odd width.
    let x = [3, 8, 13, 11];
    check(&layer(x, 13, "", 2, 2, &both(x, 13, 2, 2)), &args(x, 13), 1);
}

#[test]
fn pools_that_must_not_fold_keep_their_routine() {
    let x = [2, 8, 10, 11];
    let a = args(x, 13);
    // Overlapping windows (3x3, stride 2) cross the tiles and runs the routines write.
    check(&layer(x, 13, "", 3, 2, &both(x, 13, 3, 2)), &a, 0);
    // HIGHEST precision: the patch GEMM, which has no epilogue.
    let highest = ", operand_precision={highest,highest}";
    check(&layer(x, 13, highest, 2, 2, &both(x, 13, 2, 2)), &a, 0);
    // The convolution without its bias is an output too: the bias add is not folded, so
    // the routine's output is not what the pool reads.
    let [n, h, w, _] = x;
    let root = format!("ROOT t = (f32[{n},4,5,13], f32[{n},{h},{w},13]) tuple(p, conv)");
    check(&layer(x, 13, "", 2, 2, &root), &a, 0);
}

/// The inference form: the activation is read by nothing but the pool, so the optimizer puts
/// the bias add, the ReLU and the pool in one fusion; the routine takes its bias and pool.
#[test]
fn the_inference_form_folds_its_bias_and_pool() {
    let x = [2, 11, 12, 1];
    let [n, _, _, _] = x;
    check(
        &layer(
            x,
            40,
            "",
            2,
            2,
            &format!("ROOT r = f32[{n},5,6,40] copy(p)"),
        ),
        &args(x, 40),
        1,
    );
    let x = [3, 8, 13, 11];
    let [n, _, _, _] = x;
    check(
        &layer(
            x,
            13,
            "",
            2,
            2,
            &format!("ROOT r = f32[{n},4,6,13] copy(p)"),
        ),
        &args(x, 13),
        1,
    );
    // With overlapping windows the fusion stays a generated kernel.
    check(
        &layer(
            x,
            13,
            "",
            3,
            2,
            &format!("ROOT r = f32[{n},3,6,13] copy(p)"),
        ),
        &args(x, 13),
        0,
    );
}

/// JAX's MNIST predict step (inference): both conv layers fold their bias and pool.
#[test]
fn mnist_predict_folds_both_layers_with_the_same_bits() {
    let mut module = tessel_tests::corpus_module("mnist_cnn_predict_b16");
    optimize(&mut module, &CompileOptions::default()).unwrap();
    let args = tessel_tests::corpus_args("mnist_cnn_predict_b16.inputs.safetensors");
    let (on, on_folded) = POOL.run(&module, &args, true, 2);
    let (off, off_folded) = POOL.run(&module, &args, false, 2);
    assert_eq!((on_folded, off_folded), (2, 0));
    assert_eq!(on, off, "the predictions differ with the pools folded");
}

/// JAX's b128 MNIST training step: both conv layers' pools fold, with the same bits.
#[test]
fn mnist_step_folds_both_pools_with_the_same_bits() {
    let mut module = tessel_tests::corpus_module("mnist_cnn_train_step_b128");
    optimize(&mut module, &CompileOptions::default()).unwrap();
    let args = tessel_tests::corpus_args("mnist_cnn_train_step_b128.inputs.safetensors");
    let (on, on_folded) = POOL.run(&module, &args, true, 2);
    let (off, off_folded) = POOL.run(&module, &args, false, 2);
    assert_eq!((on_folded, off_folded), (2, 0));
    for (leaf, (a, b)) in on.iter().zip(&off).enumerate() {
        assert!(a == b, "output {leaf} differs with the pools folded");
    }
}

/// Random conv layers with a pool after them: direct (1-4 input channels) and Winograd
/// (more), every pool window and stride from 1 to 3 (overlapping, tiling, skipping), odd
/// and tiny images, with the activation kept or not. The fold must give the same bits as
/// no fold, on 1 and 2 threads, and the interpreter's results; which ones fold is the
/// routines' business (not asserted here).
#[test]
fn random_conv_layers_with_a_pool_give_the_same_bits_folded_or_not() {
    let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
    let mut folded = 0;
    for _ in 0..SEEDS {
        let pool = 1 + next(3) as i64;
        let stride = 1 + next(3) as i64;
        let (h, w) = (pool + next(30) as i64, pool + next(30) as i64);
        let c = [1, 2, 3, 4, 5, 8, 17][next(7) as usize];
        let o = 1 + next(70) as i64;
        let x = [1 + next(5) as i64, h, w, c];
        let root = if next(2) == 0 {
            both(x, o, pool, stride)
        } else {
            let [n, h, w, _] = x;
            let (ph, pw) = ((h - pool) / stride + 1, (w - pool) / stride + 1);
            format!("ROOT r = f32[{n},{ph},{pw},{o}] copy(p)")
        };
        let text = layer(x, o, "", pool, stride, &root);
        for (on, _) in POOL.check(&text, &args(x, o)) {
            folded += on;
        }
    }
    // Some of them fold (the generator reaches the fold at all).
    assert!(folded > 0, "no pool folded");
}

/// Random layers checked by the test above.
const SEEDS: usize = 200;
