//! Two independent convolutions run side by side, one per core
//! (`runtime/src/jit/routines/conv_pair.rs`, `program/conv_pair.rs`): with pairing on and off,
//! programs give bitwise the same outputs on 1 and 2 threads and match the interpreter; a
//! pair is formed exactly where the rule allows (`ProgramStats::paired_convolutions`): only
//! on two threads, for independent convolutions of about the same size without an epilogue.

use super::fold::{conv_layer_args, Fold};
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Literal};
use tessel_tests::numerics::pseudo_random_f32;

/// Pairing, counted in the pairs run.
const PAIR: Fold = Fold {
    set: |o, on| o.pair_convolutions = on,
    count: |s| s.paired_convolutions,
};

/// Checks `text` with pairing on and off (`Fold::check`): no pair on one thread, `pairs`
/// with it on on two threads.
fn check(text: &str, args: &[Literal], pairs: usize) {
    assert_eq!(PAIR.check(text, args), [(0, 0), (pairs, 0)], "pairs run");
}

/// A conv layer's backward pass as JAX writes it, for `x` (NHWC) and a 5x5 kernel to `o`
/// channels: the filter gradient `convolution(x, dy)` and the data gradient
/// `convolution(dy, reverse(k))`. The reverse is scheduled before both. (Between them, it
/// would keep the data gradient, which reads it, from moving up beside the filter gradient:
/// the rule pairs only what the schedule allows.)
fn backward(x: [i64; 4], o: i64) -> String {
    let [n, h, w, c] = x;
    format!(
        "HloModule m\n\nENTRY e {{\n  \
         x = f32[{n},{h},{w},{c}] parameter(0)\n  \
         k = f32[5,5,{c},{o}] parameter(1)\n  \
         dy = f32[{n},{h},{w},{o}] parameter(2)\n  \
         rk = f32[5,5,{c},{o}] reverse(k), dimensions={{0,1}}\n  \
         dk = f32[5,5,{c},{o}] convolution(x, dy), window={{size={h}x{w} pad=2_2x2_2}}, dim_labels=f01b_i01o->01bf\n  \
         dx = f32[{n},{h},{w},{c}] convolution(dy, rk), window={{size=5x5 pad=2_2x2_2}}, dim_labels=b01f_01oi->b01f\n  \
         ROOT t = (f32[5,5,{c},{o}], f32[{n},{h},{w},{c}]) tuple(dk, dx)\n}}\n"
    )
}

fn backward_args(x: [i64; 4], o: i64) -> Vec<Literal> {
    let [n, h, w, _] = x;
    let mut args = conv_layer_args(x, o);
    args[2] = pseudo_random_f32(&[n, h, w, o], 3, 0);
    args
}

#[test]
fn the_two_gradients_of_a_conv_layer_run_side_by_side() {
    // Winograd for both (11 input channels, 13 outputs: channel tails), odd sizes.
    let x = [3, 9, 13, 11];
    check(&backward(x, 13), &backward_args(x, 13), 1);
    // One input channel: the filter gradient takes the direct loops, and the data gradient,
    // which reads the 40 channels of dy, Winograd, which does far fewer products for the same
    // count: not paired.
    let x = [2, 11, 12, 1];
    check(&backward(x, 40), &backward_args(x, 40), 0);
    // Two forward convolutions of one-channel images (a model with two input branches): both
    // on the direct loops, paired.
    let (text, args) = side_by_side(
        &[[2, 11, 12, 1]; 2],
        [5, 5, 1, 40],
        &[(0, false), (1, false)],
    );
    check(&text, &args, 1);
}

#[test]
fn dependent_unbalanced_or_gemm_convolutions_stay_apart() {
    // At HIGHEST precision both run on the patch GEMM, whose filter gradient here is summed
    // differently on one thread and on two: paired, it would change the bits.
    let x = [3, 9, 13, 11];
    let highest = backward(x, 13).replace("->01bf", "->01bf, operand_precision={highest,highest}");
    let highest = highest.replace("->b01f", "->b01f, operand_precision={highest,highest}");
    check(&highest, &backward_args(x, 13), 0);
    // The second convolution reads the first: a forward stack.
    let text = "HloModule m\n\nENTRY e {\n  \
                x = f32[2,8,8,11] parameter(0)\n  \
                k = f32[5,5,11,11] parameter(1)\n  \
                a = f32[2,8,8,11] convolution(x, k), window={size=5x5 pad=2_2x2_2}, dim_labels=b01f_01io->b01f\n  \
                ROOT b = f32[2,8,8,11] convolution(a, k), window={size=5x5 pad=2_2x2_2}, dim_labels=b01f_01io->b01f\n}\n";
    let args = [
        pseudo_random_f32(&[2, 8, 8, 11], 1, 0),
        pseudo_random_f32(&[5, 5, 11, 11], 2, 0),
    ];
    check(text, &args, 0);
    // Independent, but one has 16 times the other's work: the larger one alone on one core
    // would take longer than the pair saves.
    let two = [(0, false), (1, false)];
    let (text, args) = side_by_side(&[[8, 8, 8, 11], [2, 4, 8, 11]], [5, 5, 11, 11], &two);
    check(&text, &args, 0);
    // Two of batch 0: nothing to run, nothing paired.
    let (text, args) = side_by_side(&[[0, 8, 8, 11]; 2], [5, 5, 11, 11], &two);
    check(&text, &args, 0);
    // The same two at the same size pair up.
    let (text, args) = side_by_side(&[[8, 8, 8, 11]; 2], [5, 5, 11, 11], &two);
    check(&text, &args, 1);
}

/// JAX's b128 MNIST training step: conv 2's data and filter gradients run side by side, with
/// the same bits as one after the other.
#[test]
fn mnist_step_pairs_conv_2s_gradients_with_the_same_bits() {
    let mut module = tessel_tests::corpus_module("mnist_cnn_train_step_b128");
    optimize(&mut module, &CompileOptions::default()).unwrap();
    let args = tessel_tests::corpus_args("mnist_cnn_train_step_b128.inputs.safetensors");
    let (on, on_pairs) = PAIR.run(&module, &args, true, 2);
    let (off, off_pairs) = PAIR.run(&module, &args, false, 2);
    assert_eq!((on_pairs, off_pairs), (1, 0));
    for (leaf, (a, b)) in on.iter().zip(&off).enumerate() {
        assert!(a == b, "output {leaf} differs with the convolutions paired");
    }
}

/// A partner need not be the convolution run just before: here a small one runs between two
/// of the same size, and the second of those pairs with the first.
#[test]
fn a_convolution_pairs_with_the_latest_one_that_fits() {
    // The third reads the first's input with the window reversed, so CSE keeps it apart.
    let convs = [(0, false), (1, false), (0, true)];
    let (text, args) = side_by_side(&[[8, 8, 8, 11], [2, 4, 8, 11]], [5, 5, 11, 11], &convs);
    check(&text, &args, 1);
}

/// A module of 5x5 "same" forward convolutions: parameters `x0`, `x1`, ... of the NHWC shapes
/// `inputs`, then `k` of `kernel`; convolution `c{i}` reads input `convs[i].0`, its window
/// reversed when `convs[i].1`; the root is the tuple of all of them. With its arguments.
fn side_by_side(
    inputs: &[[i64; 4]],
    kernel: [i64; 4],
    convs: &[(usize, bool)],
) -> (String, Vec<Literal>) {
    let shape = |d: &[i64]| {
        format!(
            "f32[{}]",
            d.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let out = |i: usize| {
        let [n, h, w, _] = inputs[convs[i].0];
        shape(&[n, h, w, kernel[3]])
    };
    let mut lines: Vec<String> = inputs
        .iter()
        .enumerate()
        .map(|(i, d)| format!("x{i} = {} parameter({i})", shape(d)))
        .collect();
    lines.push(format!(
        "k = {} parameter({})",
        shape(&kernel),
        inputs.len()
    ));
    for (i, &(input, reversed)) in convs.iter().enumerate() {
        let rev = if reversed { " rhs_reversal=1x1" } else { "" };
        lines.push(format!(
            "c{i} = {} convolution(x{input}, k), window={{size=5x5 pad=2_2x2_2{rev}}}, dim_labels=b01f_01io->b01f",
            out(i)
        ));
    }
    let shapes: Vec<String> = (0..convs.len()).map(out).collect();
    let names: Vec<String> = (0..convs.len()).map(|i| format!("c{i}")).collect();
    lines.push(format!(
        "ROOT t = ({}) tuple({})",
        shapes.join(", "),
        names.join(", ")
    ));
    let text = format!("HloModule m\n\nENTRY e {{\n  {}\n}}\n", lines.join("\n  "));
    let mut args: Vec<Literal> = inputs
        .iter()
        .enumerate()
        .map(|(i, d)| pseudo_random_f32(d, i as u32 + 1, 0))
        .collect();
    args.push(pseudo_random_f32(&kernel, inputs.len() as u32 + 1, 0));
    (text, args)
}

/// A JAX program of three conv layers (`cnn_two_conv_layers_step` in the JAX corpus, which
/// checks it against JAX's outputs): the 5x5 layer's gradients pair up, with the same bits as
/// one after the other; the 3x3 layer's stay apart (`is_three_by_three` in
/// `routines/conv_pair.rs`).
#[test]
fn a_three_layer_cnn_pairs_its_5x5_layers_gradients() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/jax_user_programs");
    let text = std::fs::read_to_string(dir.join("cnn_two_conv_layers_step.hlo")).expect("reads");
    let args = tessel_runtime::host_io::read_safetensors(
        dir.join("cnn_two_conv_layers_step.inputs.safetensors"),
    )
    .expect("reads inputs");
    let mut args: Vec<(usize, Literal)> = args
        .into_iter()
        .map(|(k, a)| (k.parse().expect("a numbered input"), Literal::Array(a)))
        .collect();
    args.sort_by_key(|(k, _)| *k);
    let args: Vec<Literal> = args.into_iter().map(|(_, a)| a).collect();
    let mut module = tessel_compiler::hlo_text::parse_module(&text, None).expect("parses");
    optimize(&mut module, &CompileOptions::default()).unwrap();
    let (on, on_pairs) = PAIR.run(&module, &args, true, 2);
    let (off, off_pairs) = PAIR.run(&module, &args, false, 2);
    assert_eq!((on_pairs, off_pairs), (1, 0));
    assert!(on == off, "the outputs differ with the convolutions paired");
}

/// Random programs of convolutions (forward, with and without a reversed window, and filter
/// gradients whose results later convolutions take as kernels), tanh and adds over a few
/// batch sizes, with only their dead ends as outputs, so that buffers are reused around the
/// pairs: pairing on and off give the same bits, and the interpreter's results.
#[test]
fn random_convolution_programs_give_the_same_bits_paired() {
    let mut total_pairs = 0;
    for seed in 1..=100u64 {
        let (text, args) = random_program(seed);
        let mut module = tessel_compiler::hlo_text::parse_module(&text, None)
            .unwrap_or_else(|e| panic!("seed {seed}: {e:?}\n{text}"));
        optimize(&mut module, &CompileOptions::default()).unwrap();
        let (on, pairs) = PAIR.run(&module, &args, true, 2);
        let (off, _) = PAIR.run(&module, &args, false, 2);
        assert!(on == off, "seed {seed}: paired outputs differ\n{text}");
        total_pairs += pairs;
        let want = tessel_compiler::interpreter::evaluate(&module, &args).expect("interprets");
        let got = tessel_runtime::jit::compile(&module, &Default::default())
            .expect("compiles")
            .run(&args)
            .expect("runs");
        // Winograd's error is relative to the magnitude of a sum's terms, which chains of
        // convolutions (and filter gradients taken as kernels) make large, also before a tanh
        // brings the value back near 1: so 1e-3 of the largest output anywhere in the
        // program. This catches a wrong or overwritten value; the bits above are the
        // pairing's own check.
        let leaves = want.leaves();
        let scale = leaves
            .iter()
            .flat_map(|w| (0..w.len()).map(|j| w.data.get_f64(j).abs()))
            .fold(1.0, f64::max);
        for (g, w) in got.leaves().iter().zip(leaves) {
            for j in 0..w.len() {
                let (a, b) = (g.data.get_f64(j), w.data.get_f64(j));
                assert!(
                    (a - b).abs() <= 1e-3 * scale,
                    "seed {seed}: {a} vs {b}\n{text}"
                );
            }
        }
    }
    // The generator makes pairs often; a rule that never pairs would pass the checks above.
    assert!(
        total_pairs >= 50,
        "only {total_pairs} pairs in 100 programs"
    );
}

/// One random program (see the test above) and its arguments: `x0` and `x1` images of
/// batch 2 and 8 (6 x 7 pixels, 5 channels), kernels `k3` and `k5`.
fn random_program(seed: u64) -> (String, Vec<Literal>) {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut below = |n: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % n as u64) as usize
    };
    let (h, w, c) = (6, 7, 5);
    let image = |b: usize| format!("f32[{b},{h},{w},{c}]");
    let kernel = |r: usize| format!("f32[{r},{r},{c},{c}]");
    let mut lines = vec![
        format!("x0 = {} parameter(0)", image(2)),
        format!("x1 = {} parameter(1)", image(8)),
        format!("k3 = {} parameter(2)", kernel(3)),
        format!("k5 = {} parameter(3)", kernel(5)),
    ];
    // Values: name, batch (images) or window (kernels), and whether something reads it.
    let mut images: Vec<(String, usize, bool)> =
        vec![("x0".into(), 2, false), ("x1".into(), 8, false)];
    let mut kernels: Vec<(String, usize, bool)> =
        vec![("k3".into(), 3, false), ("k5".into(), 5, false)];
    for i in 0..8 + below(6) {
        let name = format!("v{i}");
        match below(5) {
            // A forward convolution, its window reversed half the time (a data gradient).
            0 | 1 => {
                let (a, k) = (below(images.len()), below(kernels.len()));
                let (r, b) = (kernels[k].1, images[a].1);
                let rev = if below(2) == 0 {
                    " rhs_reversal=1x1"
                } else {
                    ""
                };
                let p = r / 2;
                lines.push(format!(
                    "{name} = {} convolution({}, {}), window={{size={r}x{r} pad={p}_{p}x{p}_{p}{rev}}}, dim_labels=b01f_01io->b01f",
                    image(b), images[a].0, kernels[k].0
                ));
                images[a].2 = true;
                kernels[k].2 = true;
                images.push((name, b, false));
            }
            // A filter gradient of two images of one batch: a kernel for later convolutions.
            2 => {
                let a = below(images.len());
                let b = images[a].1;
                let same: Vec<usize> = (0..images.len()).filter(|&j| images[j].1 == b).collect();
                let d = same[below(same.len())];
                let r = [3, 5][below(2)];
                let p = r / 2;
                lines.push(format!(
                    "{name} = {} convolution({}, {}), window={{size={h}x{w} pad={p}_{p}x{p}_{p}}}, dim_labels=f01b_i01o->01bf",
                    kernel(r), images[a].0, images[d].0
                ));
                images[a].2 = true;
                images[d].2 = true;
                kernels.push((name, r, false));
            }
            3 => {
                let a = below(images.len());
                lines.push(format!(
                    "{name} = {} tanh({})",
                    image(images[a].1),
                    images[a].0
                ));
                images[a].2 = true;
                images.push((name, images[a].1, false));
            }
            _ => {
                let a = below(images.len());
                let b = images[a].1;
                let same: Vec<usize> = (0..images.len()).filter(|&j| images[j].1 == b).collect();
                let d = same[below(same.len())];
                lines.push(format!(
                    "{name} = {} add({}, {})",
                    image(b),
                    images[a].0,
                    images[d].0
                ));
                images[a].2 = true;
                images[d].2 = true;
                images.push((name, b, false));
            }
        }
    }
    // The dead ends are the outputs (the parameters left unread are not).
    let outputs: Vec<(String, String)> = images
        .iter()
        .skip(2)
        .filter(|v| !v.2)
        .map(|v| (v.0.clone(), image(v.1)))
        .chain(
            kernels
                .iter()
                .skip(2)
                .filter(|v| !v.2)
                .map(|v| (v.0.clone(), kernel(v.1))),
        )
        .collect();
    let shapes: Vec<&str> = outputs.iter().map(|o| o.1.as_str()).collect();
    let names: Vec<&str> = outputs.iter().map(|o| o.0.as_str()).collect();
    lines.push(format!(
        "ROOT t = ({}) tuple({})",
        shapes.join(", "),
        names.join(", ")
    ));
    let text = format!("HloModule m\n\nENTRY e {{\n  {}\n}}\n", lines.join("\n  "));
    let args = vec![
        pseudo_random_f32(&[2, h as i64, w as i64, c as i64], 1, 0),
        pseudo_random_f32(&[8, h as i64, w as i64, c as i64], 2, 0),
        pseudo_random_f32(&[3, 3, c as i64, c as i64], 3, 0),
        pseudo_random_f32(&[5, 5, c as i64, c as i64], 4, 0),
    ];
    (text, args)
}

/// Inside a while loop's body (as in the estimator's training loop): the two convolutions of
/// each iteration pair up, their state stays in place across iterations, and the bits are
/// those of one after the other. The condition is `i != 3`, a trip count the loop unroller
/// does not read (`loop_counter.rs`), so that the loop stays a loop.
#[test]
fn a_loop_body_pairs_its_convolutions() {
    // The new state through a tanh each, and the convolutions' results as the new state
    // themselves, crossed and not: then the buffer each convolution writes from the first's
    // position is a state buffer the other convolution reads there.
    for results in ["a2, b2", "cb, ca", "ca, cb"] {
        check_loop_body(results);
    }
}

fn check_loop_body(results: &str) {
    let s = "(s32[], f32[2,6,7,5], f32[2,6,7,5], f32[5,5,5,5])";
    let x = "f32[2,6,7,5]";
    let text = format!(
        "HloModule m\n\n\
         cond {{\n  cp = {s} parameter(0)\n  ci = s32[] get-tuple-element(cp), index=0\n  \
         ck = s32[] constant(3)\n  ROOT lt = pred[] compare(ci, ck), direction=NE\n}}\n\n\
         body {{\n  p = {s} parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  \
         a = {x} get-tuple-element(p), index=1\n  b = {x} get-tuple-element(p), index=2\n  \
         k = f32[5,5,5,5] get-tuple-element(p), index=3\n  \
         one = s32[] constant(1)\n  i2 = s32[] add(i, one)\n  \
         ca = {x} convolution(a, k), window={{size=5x5 pad=2_2x2_2}}, dim_labels=b01f_01io->b01f\n  \
         cb = {x} convolution(b, k), window={{size=5x5 pad=2_2x2_2 rhs_reversal=1x1}}, dim_labels=b01f_01io->b01f\n  \
         a2 = {x} tanh(cb)\n  b2 = {x} tanh(ca)\n  \
         ROOT t = {s} tuple(i2, {results}, k)\n}}\n\n\
         ENTRY main {{\n  a0 = {x} parameter(0)\n  b0 = {x} parameter(1)\n  \
         k0 = f32[5,5,5,5] parameter(2)\n  \
         zero = s32[] constant(0)\n  init = {s} tuple(zero, a0, b0, k0)\n  \
         ROOT w = {s} while(init), condition=cond, body=body\n}}\n"
    );
    let args = [
        pseudo_random_f32(&[2, 6, 7, 5], 1, 0),
        pseudo_random_f32(&[2, 6, 7, 5], 2, 0),
        small_kernel(&[5, 5, 5, 5], 3),
    ];
    check(&text, &args, 1);
}

/// A kernel of values in [-0.25, 0.25): the loop applies it three times, and the 5x5
/// Winograd routine's rounding would otherwise grow past the interpreter comparison's
/// tolerance.
fn small_kernel(dims: &[i64], seed: u32) -> Literal {
    let Literal::Array(a) = pseudo_random_f32(dims, seed, 0) else {
        unreachable!("an array")
    };
    let v = (0..a.len())
        .map(|i| a.data.get_f64(i) as f32 / 8.0)
        .collect();
    Literal::Array(Array::f32(dims, v))
}

/// One `JitBufferNeeds` (as a device's pipeline options hold) used for two modules in turn:
/// the pairs it worked out for the first do not leak into the second's assignment.
#[test]
fn buffer_needs_used_twice_forget_the_first_modules_pairs() {
    use tessel_compiler::passes::{assign_buffers_with, BufferNeeds};
    use tessel_runtime::jit::arena_plan::{plan_arena, JitBufferNeeds};
    let parse = |text: &str| {
        let mut m = tessel_compiler::hlo_text::parse_module(text, None).expect("parses");
        optimize(&mut m, &CompileOptions::default()).unwrap();
        m
    };
    let paired = parse(&backward([3, 9, 13, 11], 13));
    // The same instruction numbers, with the second convolution reading the first.
    let stacked = parse(
        &backward([3, 9, 13, 11], 13)
            .replace("convolution(dy, rk)", "convolution(dk, rk)")
            .replace("dx = f32[3,9,13,11]", "dx = f32[5,5,11,11]")
            .replace("f32[3,9,13,11]) tuple", "f32[5,5,11,11]) tuple"),
    );
    let options = tessel_runtime::jit::JitOptions::default();
    let needs = JitBufferNeeds::new(options.clone());
    let comp = paired.entry;
    let (first, second) = paired
        .entry()
        .instructions()
        .find_map(|(id, _)| needs.written_at(&paired, comp, id).map(|a| (a, id)))
        .expect("the gradients pair up");
    // The second module's instruction at the same number is a convolution too: asked after
    // `begin`, the needs answer for that module.
    assert!(matches!(
        stacked.entry().get(second).op,
        tessel_compiler::ir::Op::Convolution(_)
    ));
    needs.begin(&stacked);
    assert_eq!(needs.written_at(&stacked, stacked.entry, second), None);
    needs.begin(&paired);
    assert_eq!(needs.written_at(&paired, comp, second), Some(first));
    // And whole assignments with the needs reused equal fresh ones.
    for m in [&paired, &stacked, &paired] {
        let reused = assign_buffers_with(m, &needs);
        let fresh = plan_arena(m, &options);
        assert_eq!(reused.written_early, fresh.written_early);
        assert_eq!(reused.peak_bytes, fresh.peak_bytes);
    }
}

/// Convolutions inside the branches of a `conditional`: one branch's two independent
/// convolutions pair, the other's layer folds its max-pool; both branches taken in turn give
/// the same bits paired or not and the interpreter's results (the pair rule and the folds are
/// worked out per branch computation).
#[test]
fn convolutions_in_conditional_branches_pair_and_fold() {
    let x = "f32[2,8,8,6]";
    let text = format!(
        "HloModule m\n\n\
         maxf {{\n  ma = f32[] parameter(0)\n  mb = f32[] parameter(1)\n  ROOT mm = f32[] maximum(ma, mb)\n}}\n\n\
         pair {{\n  p = ({x}, {x}, f32[5,5,6,6]) parameter(0)\n  \
         a = {x} get-tuple-element(p), index=0\n  b = {x} get-tuple-element(p), index=1\n  \
         k = f32[5,5,6,6] get-tuple-element(p), index=2\n  \
         ca = {x} convolution(a, k), window={{size=5x5 pad=2_2x2_2}}, dim_labels=b01f_01io->b01f\n  \
         cb = {x} convolution(b, k), window={{size=5x5 pad=2_2x2_2 rhs_reversal=1x1}}, dim_labels=b01f_01io->b01f\n  \
         s = {x} add(ca, cb)\n  \
         ninf = f32[] constant(-inf)\n  \
         ROOT r = f32[2,4,4,6] reduce-window(s, ninf), window={{size=1x2x2x1 stride=1x2x2x1}}, to_apply=maxf\n}}\n\n\
         layer {{\n  p = ({x}, {x}, f32[5,5,6,6]) parameter(0)\n  \
         a = {x} get-tuple-element(p), index=0\n  k = f32[5,5,6,6] get-tuple-element(p), index=2\n  \
         c = {x} convolution(a, k), window={{size=5x5 pad=2_2x2_2}}, dim_labels=b01f_01io->b01f\n  \
         zero = f32[] constant(0)\n  zeros = {x} broadcast(zero), dimensions={{}}\n  \
         relu = {x} maximum(c, zeros)\n  ninf = f32[] constant(-inf)\n  \
         ROOT r = f32[2,4,4,6] reduce-window(relu, ninf), window={{size=1x2x2x1 stride=1x2x2x1}}, to_apply=maxf\n}}\n\n\
         ENTRY main {{\n  which = pred[] parameter(0)\n  a = {x} parameter(1)\n  b = {x} parameter(2)\n  \
         k = f32[5,5,6,6] parameter(3)\n  ops = ({x}, {x}, f32[5,5,6,6]) tuple(a, b, k)\n  \
         ROOT c = f32[2,4,4,6] conditional(which, ops, ops), true_computation=pair, false_computation=layer\n}}\n"
    );
    for which in [true, false] {
        let args = [
            Literal::Array(Array::new(
                ArrayShape::new(ElementType::Pred, &[]),
                ArrayData::Pred(vec![which]),
            )),
            pseudo_random_f32(&[2, 8, 8, 6], 1, 0),
            pseudo_random_f32(&[2, 8, 8, 6], 2, 0),
            pseudo_random_f32(&[5, 5, 6, 6], 3, 0),
        ];
        check(&text, &args, 1);
    }
}
