//! The window choices a forward max-pool records for its gradient
//! (`runtime/src/jit/routines/pool_choices.rs`): with them on and off, programs give bitwise
//! the same outputs, the gradient reads them exactly where it should
//! (`ProgramStats::pool_choices`), whether the pool runs in a convolution's epilogue or as its
//! own routine, and forms that must be left alone read the pre-activation. Where nothing else
//! reads the activation, the convolution that folds the pool may leave it unstored
//! (`ProgramStats::discarded_outputs`), with the same bits.

use super::fold::{conv_layer_args, xorshift, Fold};
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::ir::{Array, ArrayShape, ElementType, Literal};
use tessel_compiler::passes::BufferKind;
use tessel_runtime::jit::arena_plan::plan_arena;
use tessel_runtime::jit::routines::pool_choices::choices_available;
use tessel_tests::numerics::pseudo_random_f32;

/// The choices, counted in the gradients that read them.
const CHOICES: Fold = Fold {
    set: |o, on| o.pool_choices = on,
    count: |s| s.pool_choices,
};

/// The same with the pool folded into the convolution off: the pooling routine writes them.
const CHOICES_UNFOLDED: Fold = Fold {
    set: |o, on| {
        o.pool_choices = on;
        o.fold_pool = false;
    },
    count: |s| s.pool_choices,
};

/// A conv layer's forward and backward pass as JAX writes them: `conv(x, k) + bias`, ReLU, a
/// 2x2 max-pool; then, from the pooled gradient `g`, the pool's gradient (select-and-scatter
/// over `select_over`), the ReLU gate `y > 0` and the bias gradient. `extra` adds
/// instructions and `root` names the outputs.
fn layer(x: [i64; 4], o: i64, select_over: &str, extra: &str, root: &str) -> String {
    let [n, h, w, c] = x;
    let (ph, pw) = (h / 2, w / 2);
    format!(
        "HloModule m\n\nmax {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
         ROOT m = f32[] maximum(a, b)\n}}\n\nge {{\n  a = f32[] parameter(0)\n  \
         b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=GE\n}}\n\n\
         add {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
         ROOT s = f32[] add(a, b)\n}}\n\nENTRY e {{\n  \
         x = f32[{n},{h},{w},{c}] parameter(0)\n  \
         k = f32[5,5,{c},{o}] parameter(1)\n  \
         bias = f32[{o}] parameter(2)\n  \
         g = f32[{n},{ph},{pw},{o}] parameter(3)\n  \
         conv = f32[{n},{h},{w},{o}] convolution(x, k), window={{size=5x5 pad=2_2x2_2}}, dim_labels=b01f_01io->b01f\n  \
         bb = f32[{n},{h},{w},{o}] broadcast(bias), dimensions={{3}}\n  \
         y = f32[{n},{h},{w},{o}] add(conv, bb)\n  \
         zero = f32[] constant(0)\n  \
         zeros = f32[{n},{h},{w},{o}] broadcast(zero), dimensions={{}}\n  \
         relu = f32[{n},{h},{w},{o}] maximum(y, zeros)\n  \
         ninf = f32[] constant(-inf)\n  \
         p = f32[{n},{ph},{pw},{o}] reduce-window(relu, ninf), window={{size=1x2x2x1 stride=1x2x2x1}}, to_apply=max\n  \
         sas = f32[{n},{h},{w},{o}] select-and-scatter({select_over}, g, zero), window={{size=1x2x2x1 stride=1x2x2x1}}, select=ge, scatter=add\n  \
         open = pred[{n},{h},{w},{o}] compare(y, zeros), direction=GT\n  \
         dz = f32[{n},{h},{w},{o}] select(open, sas, zeros)\n  \
         db = f32[{o}] reduce(dz, zero), dimensions={{0,1,2}}, to_apply=add\n  \
         {extra}\n  ROOT t = {root}\n}}\n"
    )
}

/// The layer's arguments: `x`, the kernel, the bias and the pooled gradient.
fn args(x: [i64; 4], o: i64) -> Vec<Literal> {
    let mut a = conv_layer_args(x, o);
    a.push(pseudo_random_f32(&[x[0], x[1] / 2, x[2] / 2, o], 4, 0));
    a
}

/// The usual outputs: the pooled activation and both gradients.
fn outputs(x: [i64; 4], o: i64) -> String {
    let [n, h, w, _] = x;
    format!(
        "(f32[{n},{},{},{o}], f32[{n},{h},{w},{o}], f32[{o}]) tuple(p, dz, db)",
        h / 2,
        w / 2
    )
}

/// The convolution outputs left unstored, which the choices allow (`discarded_outputs`).
const DISCARDED: Fold = Fold {
    set: |o, on| o.pool_choices = on,
    count: |s| s.discarded_outputs,
};

/// Checks `text` with the choices on and off (`Fold::check`), the pool in the convolution's
/// epilogue and as its own routine: `read` gradients read choices with them on, none off;
/// `discarded` convolution outputs are left unstored with them on (and the pool folded).
fn check_all(text: &str, args: &[Literal], read: usize, discarded: usize) {
    // Without AVX-512 no gradient reads choices (`choices_available`).
    let (read, discarded) = if choices_available() {
        (read, discarded)
    } else {
        (0, 0)
    };
    for fold in [CHOICES, CHOICES_UNFOLDED] {
        for counts in fold.check(text, args) {
            assert_eq!(counts, (read, 0), "gradients reading choices\n{text}");
        }
    }
    for counts in DISCARDED.check(text, args) {
        assert_eq!(counts, (discarded, 0), "outputs left unstored\n{text}");
    }
}

/// [`check_all`] where the activation is read by the pool and its gradient only, so each
/// layer whose gradient reads the choices leaves its activation unstored.
fn check(text: &str, args: &[Literal], read: usize) {
    check_all(text, args, read, read)
}

#[test]
fn a_conv_layers_gradient_reads_the_choices() {
    // Direct (one input channel, 40 outputs: a 16-lane tail), Winograd F(4x4) (11 input
    // channels, 13 outputs), odd sizes: the last row and column are pooled by no window.
    for (x, o) in [
        ([2, 12, 10, 1], 40),
        ([3, 8, 12, 11], 13),
        ([2, 6, 4, 3], 17),
    ] {
        check(&layer(x, o, "relu", "", &outputs(x, o)), &args(x, o), 1);
    }
}

/// Ties everywhere: an all-zero input makes every window's values equal (the bias alone), so
/// the select's first-of-equal rule decides every gradient.
#[test]
fn ties_choose_as_the_select_does() {
    let (x, o) = ([2, 8, 8, 3], 16);
    let mut a = args(x, o);
    let shape = ArrayShape::new(ElementType::F32, &x);
    a[0] = Literal::Array(Array::zeros(shape));
    check(&layer(x, o, "relu", "", &outputs(x, o)), &a, 1);
}

#[test]
fn gradients_that_must_not_read_choices_keep_reading_the_activation() {
    let (x, o) = ([2, 8, 8, 3], 16);
    let a = args(x, o);
    // The select over `y`, not over the ReLU the forward pooled: another choice.
    check(&layer(x, o, "y", "", &outputs(x, o)), &a, 0);
    // Two gradients of the same pool: neither reads the choices.
    let [n, h, w, _] = x;
    let extra = format!(
        "sas2 = f32[{n},{h},{w},{o}] select-and-scatter(relu, p, zero), window={{size=1x2x2x1 stride=1x2x2x1}}, select=ge, scatter=add\n  \
         dz2 = f32[{n},{h},{w},{o}] select(open, sas2, zeros)"
    );
    let root = format!(
        "(f32[{n},4,4,{o}], f32[{n},{h},{w},{o}], f32[{o}], f32[{n},{h},{w},{o}]) tuple(p, dz, db, dz2)"
    );
    check(&layer(x, o, "relu", &extra, &root), &a, 0);
    // The activation is an output too: its gradient reads the choices, but it is stored.
    let root = format!(
        "(f32[{n},4,4,{o}], f32[{n},{h},{w},{o}], f32[{o}], f32[{n},{h},{w},{o}]) tuple(p, dz, db, y)"
    );
    check_all(&layer(x, o, "relu", "", &root), &a, 1, 0);
}

/// JAX's b128 MNIST training step: both layers' gradients read the choices, with the same
/// bits, on one thread and two.
#[test]
fn mnist_step_reads_both_layers_choices_with_the_same_bits() {
    if !choices_available() {
        return; // Nothing to compare: no gradient reads choices without AVX-512.
    }
    let mut module = tessel_tests::corpus_module("mnist_cnn_train_step_b128");
    optimize(&mut module, &CompileOptions::default()).unwrap();
    let args = tessel_tests::corpus_args("mnist_cnn_train_step_b128.inputs.safetensors");
    for threads in [1, 2] {
        let (on, on_read) = CHOICES.run(&module, &args, true, threads);
        let (off, off_read) = CHOICES.run(&module, &args, false, threads);
        assert_eq!((on_read, off_read), (2, 0));
        let (_, discarded) = DISCARDED.run(&module, &args, true, threads);
        assert_eq!(discarded, 2, "both activations left unstored");
        for (leaf, (a, b)) in on.iter().zip(&off).enumerate() {
            assert!(
                a == b,
                "output {leaf} differs with the choices ({threads} threads)"
            );
        }
    }
    // The buffer assignment gives each its side buffer: 128x14x14x32 and 128x7x7x64 bytes.
    let plan = plan_arena(&module, &Default::default());
    let mut sides: Vec<i64> = plan
        .buffers
        .iter()
        .filter(|b| b.kind == BufferKind::Side)
        .map(|b| b.size)
        .collect();
    sides.sort();
    assert_eq!(sides, [128 * 7 * 7 * 64, 128 * 14 * 14 * 32]);
    assert_eq!(plan.side_outputs.len(), 2);
}

/// Random conv layers with their backward pass: direct (1-4 input channels) and Winograd
/// (more), odd and even sizes (only even ones tile the 2x2 windows, which the gradient
/// routine needs), the select over the ReLU or over `y`, with the pool folded or not. The
/// choices on and off must give the same bits, on 1 and 2 threads, and the interpreter's
/// results.
#[test]
fn random_layers_give_the_same_bits_with_and_without_choices() {
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
    let mut read = 0;
    for _ in 0..SEEDS {
        let (h, w) = (2 + next(20) as i64, 2 + next(20) as i64);
        let c = [1, 2, 3, 4, 5, 8, 17][next(7) as usize];
        let o = 1 + next(40) as i64;
        let x = [1 + next(4) as i64, h, w, c];
        let over = if next(4) == 0 { "y" } else { "relu" };
        let text = layer(x, o, over, "", &outputs(x, o));
        let a = args(x, o);
        for fold in [CHOICES, CHOICES_UNFOLDED] {
            for (on, off) in fold.check(&text, &a) {
                assert_eq!(off, 0);
                read += on;
            }
        }
    }
    // Some of them read choices (the generator reaches them at all).
    assert!(read > 0 || !choices_available(), "no gradient read choices");
}

/// Random layers checked by the test above.
const SEEDS: usize = 200;

/// The training loop (the b8 step in a `while` fed by infeed, as the estimator runs it): the
/// body's two layers read their choices and leave their activations unstored too.
/// (`tests/tests/loops/training_loop.rs` checks that loop bitwise against the step run alone.)
#[test]
fn the_training_loops_body_reads_the_choices() {
    let step = tessel_tests::corpus_module("mnist_cnn_train_step_b8");
    let mut looped =
        tessel_compiler::training_loop::wrap_in_training_loop(&step, 5, &[8, 9, 10]).unwrap();
    optimize(&mut looped, &CompileOptions::default()).unwrap();
    let exe = tessel_runtime::jit::compile(&looped, &Default::default()).unwrap();
    let stats = exe.stats();
    let want = if choices_available() { 2 } else { 0 };
    assert_eq!((stats.pool_choices, stats.discarded_outputs), (want, want));
}
