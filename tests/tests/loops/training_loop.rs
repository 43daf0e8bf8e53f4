//! Compiled training loops: the wrapped module's shape, JAX's numbers for the CNN loop, bitwise
//! determinism, and faults on one replica stopping every replica promptly.

use std::time::{Duration, Instant};
use tessel_compiler::hlo_text::{parse_module, parse_module_file, print_module, PrintOptions};
use tessel_compiler::ir::{Array, ArrayData, ElementType, Literal, Module, Op, Shape};
use tessel_compiler::training_loop::{wrap_in_training_loop, LoopError};
use tessel_runtime::feed::HostFeed;
use tessel_runtime::feed::{stacked_source, unstack, FeedError, FeedSource};
use tessel_runtime::host_io::read_safetensors;
use tessel_runtime::jit::JitOptions;
use tessel_runtime::replicas::evaluate_replicated_with_feed;
use tessel_runtime::session::{
    compile, compile_loop, Device, LoopOptions, LoopProgram, LoopSpec, Outfeed, Outputs,
};

/// `step` in a loop of `k` iterations fed with `infeed`, compiled for `device`.
pub(super) fn make_loop(step: &Module, k: u64, infeed: &[u32], device: Device) -> LoopProgram {
    let spec = LoopSpec {
        iterations: k,
        infeed: infeed.to_vec(),
    };
    compile_loop(step, &spec, &device).unwrap()
}

/// The loop on `replicas` interpreter replicas.
fn interp_loop(step: &Module, k: u64, infeed: &[u32], replicas: usize) -> LoopProgram {
    make_loop(
        step,
        k,
        infeed,
        Device::interpreter().with_replicas(replicas),
    )
}

/// A shard_map module run once on `device`: the global outputs.
pub(super) fn run_global(step: &Module, device: Device, args: &[Array]) -> Vec<Array> {
    let program = compile(step, &device).unwrap();
    let inputs = program.bind_ordered(args.to_vec()).unwrap();
    match program.run(&inputs).unwrap() {
        Outputs::Global(leaves) => leaves,
        Outputs::PerReplica(_) => unreachable!("a shard_map program gives global arrays"),
    }
}

/// An SGD step on 4 replicas: w -= 0.125 * all-reduce(w * x + log x); loss = sum of that.
/// A negative x gives NaN (log). On replica `bad`, the gradient goes through a custom call
/// the interpreter has no kernel for (a failure on one replica only).
pub(super) fn sgd_step(bad: Option<u32>) -> Module {
    let branch = match bad {
        Some(r) => format!(
            r#"
  rid = u32[] replica-id()
  bad = u32[] constant({r})
  is_bad = pred[] compare(rid, bad), direction=EQ
  g2 = f32[4] conditional(is_bad, gl, gl), true_computation=missing_kernel, false_computation=identity"#
        ),
        None => "\n  g2 = f32[4] copy(gl)".to_string(),
    };
    // Only the faulty step holds the custom call: the JIT's device refuses a module with it.
    let missing = match bad {
        Some(_) => {
            "missing_kernel {\n  p2 = f32[4] parameter(0)\n  ROOT c2 = f32[4] custom-call(p2), \
             custom_call_target=\"tessel.test.missing_kernel\"\n}\n\n"
        }
        None => "",
    };
    let text = format!(
        r#"HloModule sgd_step, replica_count=4

add_f32 {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

identity {{
  p = f32[4] parameter(0)
  ROOT c = f32[4] copy(p)
}}

{missing}ENTRY step {{
  w = f32[4] parameter(0)
  x = f32[4] parameter(1)
  g = f32[4] multiply(w, x)
  lx = f32[4] log(x)
  gl = f32[4] add(g, lx){branch}
  gs = f32[4] all-reduce(g2), replica_groups={{}}, to_apply=add_f32
  lr = f32[] constant(0.125)
  lrb = f32[4] broadcast(lr), dimensions={{}}
  d = f32[4] multiply(gs, lrb)
  w2 = f32[4] subtract(w, d)
  zero = f32[] constant(0)
  loss = f32[] reduce(gs, zero), dimensions={{0}}, to_apply=add_f32
  ROOT t = (f32[4], f32[]) tuple(w2, loss)
}}
"#
    );
    parse_module(&text, None).unwrap()
}

pub(super) fn f32s(dims: &[i64], v: Vec<f32>) -> Array {
    Array::f32(dims, v)
}

/// Replica r's arguments: w, and x stacked `k` deep (all positive).
pub(super) fn sgd_args(replicas: usize, k: usize) -> Vec<Vec<Array>> {
    (0..replicas)
        .map(|r| {
            let w = f32s(&[4], vec![0.5, -0.25, 1.0, 0.125]);
            let x = (0..k * 4)
                .map(|i| 1.0 + ((i * 7 + r * 3) % 11) as f32 / 8.0)
                .collect();
            vec![w, f32s(&[k as i64, 4], x)]
        })
        .collect()
}

pub(super) fn f32_data(a: &Array) -> &[f32] {
    match &a.data {
        ArrayData::F32(v) => v,
        _ => panic!("not f32"),
    }
}

#[test]
fn the_loop_is_one_while_with_its_trip_count_and_the_feeds_inside() {
    let m = wrap_in_training_loop(&sgd_step(None), 5, &[1]).unwrap();
    tessel_compiler::verifier::verify(&m).unwrap();
    let text = print_module(&m, &PrintOptions::default());
    let whiles: Vec<&str> = text.lines().filter(|l| l.contains(" while(")).collect();
    assert_eq!(whiles.len(), 1, "{text}");
    assert!(
        whiles[0].contains(r#"backend_config={"known_trip_count":{"n":"5"}}"#),
        "{}",
        whiles[0]
    );
    let body_id = match &m
        .entry()
        .instructions()
        .find(|(_, i)| matches!(i.op, Op::While { .. }))
        .unwrap()
        .1
        .op
    {
        Op::While { body, .. } => *body,
        _ => unreachable!(),
    };
    let body = m.computation(body_id);
    let opcodes: Vec<&str> = body
        .instructions()
        .map(|(_, i)| i.op.opcode_name())
        .collect();
    for want in ["infeed", "outfeed", "call"] {
        assert!(
            opcodes.contains(&want),
            "{want} missing from the body: {opcodes:?}"
        );
    }
    // The entry takes only the carried parameter and returns its final value.
    let (params, result) = m.entry_signature();
    assert_eq!(params, vec![Shape::array(ElementType::F32, &[4])]);
    assert_eq!(
        result,
        Shape::Tuple(vec![Shape::array(ElementType::F32, &[4])])
    );
    // The dump parses back to the same text.
    let again = parse_module(&text, None).unwrap();
    assert_eq!(print_module(&again, &PrintOptions::default()), text);
}

#[test]
fn bad_loop_requests_are_explained() {
    let step = sgd_step(None);
    assert_eq!(
        wrap_in_training_loop(&step, 0, &[1]).unwrap_err(),
        LoopError::NoIterations
    );
    assert!(matches!(
        wrap_in_training_loop(&step, 3, &[7]).unwrap_err(),
        LoopError::NoSuchParameter { index: 7, count: 2 }
    ));
    assert!(matches!(
        wrap_in_training_loop(&step, 3, &[1, 1]).unwrap_err(),
        LoopError::Repeated { index: 1 }
    ));
    // Feeding w leaves x carried, but output 0 (w's new value) is then x's: shapes agree, so
    // this is legal; feeding nothing makes x carried and output 1 (f32[]) its new value: not.
    let e = wrap_in_training_loop(&step, 3, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("carried parameter 1 (x)") && e.contains("f32[]"),
        "{e}"
    );
    let looped = wrap_in_training_loop(&step, 3, &[1]).unwrap();
    let e = wrap_in_training_loop(&looped, 3, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("infeed") || e.contains("outfeed"), "{e}");
}

/// The loop equals K separate runs of the step, threading w through by hand.
#[test]
fn the_loop_equals_k_steps_on_four_replicas_and_is_deterministic() {
    let k = 6;
    let step = sgd_step(None);
    let lp = interp_loop(&step, k as u64, &[1], 4);
    let args = sgd_args(4, k);
    let a = lp.run(args.clone(), &LoopOptions::default()).unwrap();
    let b = lp.run(args.clone(), &LoopOptions::default()).unwrap();
    assert_eq!(a, b, "two runs differ");
    for r in 0..4 {
        for (x, y) in a.replica_outputs(r).iter().zip(b.replica_outputs(r)) {
            assert_eq!(x.data.to_le_bytes(), y.data.to_le_bytes());
        }
    }
    // By hand: K runs of the step.
    let mut w: Vec<Array> = args.iter().map(|a| a[0].clone()).collect();
    let mut losses: Vec<Vec<f32>> = vec![Vec::new(); 4];
    for i in 0..k {
        let per_replica: Vec<Vec<Literal>> = (0..4)
            .map(|r| {
                let x = f32_data(&args[r][1])[i * 4..i * 4 + 4].to_vec();
                vec![Literal::Array(w[r].clone()), Literal::Array(f32s(&[4], x))]
            })
            .collect();
        let out = tessel_runtime::replicas::evaluate_replicated(&step, per_replica).unwrap();
        for (r, o) in out.into_iter().enumerate() {
            let leaves: Vec<Array> = o.leaves().into_iter().cloned().collect();
            w[r] = leaves[0].clone();
            losses[r].push(f32_data(&leaves[1])[0]);
        }
    }
    for r in 0..4 {
        assert_eq!(a.carried[r], vec![w[r].clone()], "replica {r}");
        assert_eq!(a.per_iteration[r][0].shape.dims.as_slice(), &[k as i64]);
        assert_eq!(f32_data(&a.per_iteration[r][0]), losses[r].as_slice());
    }
}

pub(super) fn assert_prompt(start: Instant) {
    let took = start.elapsed();
    assert!(took < Duration::from_secs(1), "stopping took {took:?}");
}

#[test]
fn a_kernel_failure_on_one_replica_stops_all_replicas_naming_it() {
    let lp = interp_loop(&sgd_step(Some(2)), 4, &[1], 4);
    let start = Instant::now();
    let e = lp.run(sgd_args(4, 4), &LoopOptions::default()).unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica(), Some(2), "{e}");
    assert!(e.to_string().contains("tessel.test.missing_kernel"), "{e}");
}

/// Sources for replicas 0..4 with `x` stacked k deep; `replace` swaps in replica r's own.
fn sources(k: usize, r_bad: usize, bad: FeedSource) -> (Vec<Vec<Array>>, Vec<FeedSource>) {
    let mut bad = Some(bad);
    sgd_args(4, k)
        .into_iter()
        .enumerate()
        .map(|(r, a)| {
            let src = if r == r_bad {
                bad.take().unwrap()
            } else {
                stacked_source(vec![a[1].clone()]).unwrap()
            };
            (vec![a[0].clone()], src)
        })
        .unzip()
}

fn x_value(v: f32) -> Literal {
    Literal::Tuple(vec![Literal::Array(f32s(&[4], vec![v; 4]))])
}

#[test]
fn an_infeed_closed_early_is_an_error_on_that_replica_not_a_hang() {
    let lp = interp_loop(&sgd_step(None), 5, &[1], 4);
    let short: FeedSource = Box::new((0..2).map(|_| Ok(x_value(1.5))));
    let (state, srcs) = sources(5, 3, short);
    let start = Instant::now();
    let e = lp
        .run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica(), Some(3), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("infeed closed after 2 values") && m.contains("ran out after 2"),
        "{m}"
    );
}

#[test]
fn a_failing_data_source_and_wrongly_shaped_data_fail_their_replica() {
    let lp = interp_loop(&sgd_step(None), 5, &[1], 4);
    // A source's own typed error (here an io::Error, as a file dataset's) reaches the loop's
    // error with its whole message.
    let failing: FeedSource = Box::new(
        [
            Ok(x_value(1.5)),
            Err(FeedError::source(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "cannot read shard 7: record 3 at offset 120 is corrupt",
            ))),
        ]
        .into_iter(),
    );
    let (state, srcs) = sources(5, 1, failing);
    let start = Instant::now();
    let e = lp
        .run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica(), Some(1), "{e}");
    assert!(
        e.to_string()
            .contains("failed at value 1: cannot read shard 7: record 3 at offset 120 is corrupt"),
        "{e}"
    );

    let wrong: FeedSource = Box::new(std::iter::once(Ok(Literal::Tuple(vec![Literal::Array(
        f32s(&[3], vec![1.0; 3]),
    )]))));
    let (state, srcs) = sources(5, 0, wrong);
    let e = lp
        .run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap_err();
    assert_eq!(e.replica(), Some(0), "{e}");
    assert!(
        e.to_string()
            .contains("fed (f32[3]) to an infeed of (f32[4])"),
        "{e}"
    );
}

#[test]
fn the_nan_check_names_the_parameter() {
    let lp = interp_loop(&sgd_step(None), 3, &[1], 4);
    let mut args = sgd_args(4, 3);
    // Replica 3's data at iteration 1 is negative: log gives NaN, all-reduce spreads it to
    // element 1 of every replica's w.
    if let ArrayData::F32(v) = &mut args[3][1].data {
        v[5] = -1.0;
    }
    let quiet = lp.run(args.clone(), &LoopOptions::default()).unwrap();
    assert!(f32_data(&quiet.carried[0][0])[1].is_nan());
    let checked = LoopOptions {
        nan_check: true,
        ..LoopOptions::default()
    };
    let e = lp.run(args.clone(), &checked).unwrap_err().to_string();
    assert!(e.contains("NaN check: carried parameter 0 (w)"), "{e}");
    assert!(lp.run(sgd_args(4, 3), &checked).is_ok());
}

/// A feed whose infeed panics for one replica (a bug in host code) stops every replica.
struct PanickingFeed {
    inner: tessel_runtime::feed::HostQueues,
}

impl HostFeed for PanickingFeed {
    fn infeed(&self, replica: usize, shape: &Shape) -> Result<Literal, String> {
        if replica == 1 {
            panic!("host feed bug");
        }
        self.inner.infeed(replica, shape)
    }
    fn outfeed(&self, replica: usize, value: Literal) -> Result<(), String> {
        self.inner.outfeed(replica, value)
    }
    fn abort(&self, replica: usize, message: &str) {
        self.inner.abort(replica, message)
    }
}

#[test]
fn a_panic_on_one_replica_stops_the_others() {
    let m = wrap_in_training_loop(&sgd_step(None), 3, &[1]).unwrap();
    let (inner, _rx) = tessel_runtime::feed::HostQueues::new(4, 2);
    for r in 0..4 {
        for _ in 0..2 {
            inner.push(r, x_value(2.0)).unwrap();
        }
    }
    let feed = PanickingFeed { inner };
    let args = (0..4)
        .map(|_| vec![Literal::Array(f32s(&[4], vec![1.0; 4]))])
        .collect();
    let start = Instant::now();
    let e = evaluate_replicated_with_feed(&m, args, &feed).unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica, Some(1), "{e}");
    assert!(e.message.contains("panicked"), "{e}");
}

/// The fixture's step module, its carried inputs, and JAX's outputs keyed as in the file.
pub(super) type LoopFixture = (Module, Vec<Array>, Vec<(String, Array)>);

pub(super) fn corpus_loop_inputs() -> Option<LoopFixture> {
    let dir = tessel_tests::corpus_dir()?;
    let step = parse_module_file(&dir.join("mnist_cnn_train_step_b8.hlo")).unwrap();
    let mut inputs =
        read_safetensors(dir.join("mnist_cnn_train_step_b8.loop5.inputs.safetensors")).unwrap();
    inputs.sort_by_key(|(k, _)| k.parse::<usize>().unwrap());
    let args = inputs.into_iter().map(|(_, a)| a).collect();
    let want =
        read_safetensors(dir.join("mnist_cnn_train_step_b8.loop5.outputs.safetensors")).unwrap();
    Some((step, args, want))
}

#[test]
fn the_mnist_cnn_loop_gives_jax_numbers() {
    let (step, args, want) = corpus_loop_inputs().expect("the corpus is missing");
    let lp = interp_loop(&step, 5, &[8, 9, 10], 1);
    let got = lp
        .run(
            vec![args],
            &LoopOptions {
                nan_check: true,
                ..LoopOptions::default()
            },
        )
        .unwrap()
        .replica_outputs(0);
    assert_eq!(got.len(), want.len());
    for (key, w) in &want {
        let g = &got[key.parse::<usize>().unwrap()];
        assert_eq!(g.shape, w.shape, "output {key}");
        let (g, w) = (f32_data(g), f32_data(w));
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            // The corpus tolerance, with 1e-3 relative for the convolutions' long sums.
            assert!(
                (a - b).abs() <= 1e-5 + 1e-3 * b.abs(),
                "output {key}[{i}]: {a} vs JAX {b}"
            );
        }
    }
}

/// A step whose root is not a tuple and has no per-iteration outputs: w <- w + x.
#[test]
fn a_single_output_step_loops_and_infeed_needs_a_feed() {
    let step = parse_module(
        "HloModule acc\n\nENTRY acc {\n  w = f32[2] parameter(0)\n  x = f32[2] parameter(1)\n  ROOT s = f32[2] add(w, x)\n}\n",
        None,
    )
    .unwrap();
    let lp = interp_loop(&step, 3, &[1], 1);
    assert_eq!(lp.signature().per_iteration_outputs, 0);
    let args = vec![vec![
        f32s(&[2], vec![1.0, 2.0]),
        f32s(&[3, 2], vec![1.0, 10.0, 2.0, 20.0, 3.0, 30.0]),
    ]];
    let out = lp.run(args, &LoopOptions::default()).unwrap();
    assert_eq!(out.carried[0], vec![f32s(&[2], vec![7.0, 62.0])]);
    assert!(out.per_iteration[0].is_empty());
    let e = tessel_compiler::interpreter::evaluate(
        lp.module(),
        &[Literal::Array(f32s(&[2], vec![0.0, 0.0]))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("infeed needs a host feed"), "{e}");
}

// ---- The same loops compiled by the JIT ----

/// One replica's SGD step: w -= 0.125 * (w * x + log x); loss = sum of that (NaN for x < 0).
fn sgd_step_one_replica() -> Module {
    parse_module(
        r#"HloModule sgd_one

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY step {
  w = f32[4] parameter(0)
  x = f32[4] parameter(1)
  g = f32[4] multiply(w, x)
  lx = f32[4] log(x)
  gl = f32[4] add(g, lx)
  lr = f32[] constant(0.125)
  lrb = f32[4] broadcast(lr), dimensions={}
  d = f32[4] multiply(gl, lrb)
  w2 = f32[4] subtract(w, d)
  zero = f32[] constant(0)
  loss = f32[] reduce(gl, zero), dimensions={0}, to_apply=add_f32
  ROOT t = (f32[4], f32[]) tuple(w2, loss)
}
"#,
        None,
    )
    .unwrap()
}

pub(super) fn jit_loop(step: &Module, k: u64, infeed: &[u32], replicas: usize) -> LoopProgram {
    make_loop(step, k, infeed, Device::jit().with_replicas(replicas))
}

/// Replica 0's state and source from `sgd_args`, with `source` replacing the data when given.
fn one_replica(k: usize, source: Option<FeedSource>) -> (Vec<Vec<Array>>, Vec<FeedSource>) {
    let a = sgd_args(1, k).remove(0);
    let src = source.unwrap_or_else(|| stacked_source(vec![a[1].clone()]).unwrap());
    (vec![vec![a[0].clone()]], vec![src])
}

#[test]
fn the_jit_loop_gives_the_interpreters_numbers() {
    let step = sgd_step_one_replica();
    let k = 7;
    let interp = interp_loop(&step, k, &[1], 1);
    let jit = jit_loop(&step, k, &[1], 1);
    let args = sgd_args(1, k as usize);
    let want = interp.run(args.clone(), &LoopOptions::default()).unwrap();
    let got = jit.run(args.clone(), &LoopOptions::default()).unwrap();
    assert_eq!(got.per_iteration[0][0].shape.dims.as_slice(), &[k as i64]);
    for (g, w) in got.replica_outputs(0).iter().zip(want.replica_outputs(0)) {
        assert_eq!(g.shape, w.shape);
        for (a, b) in f32_data(g).iter().zip(f32_data(&w)) {
            // The JIT's log is within 1 ulp of the interpreter's.
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
    }
    // The executable is compiled once and reused: a second run gives bitwise the same.
    let again = jit.run(args, &LoopOptions::default()).unwrap();
    assert_eq!(got, again);
}

/// The JIT's loop is the JIT's step run K times, bitwise, and gives JAX's numbers: the losses
/// and dense layers within the corpus tolerance; the convolution parameters within 2e-4, because
/// at iteration 3 one max-pool window of the second convolution holds two nearly equal maxima
/// and the JIT's GEMM rounding (either GEMM) picks the other one, which moves that iteration's
/// convolution gradients by up to 1.6e-4 (the JIT's single step on iteration 3's inputs differs
/// from the interpreter's by as much; every other iteration agrees to 1e-8).
#[test]
fn the_mnist_cnn_loop_gives_jax_numbers_on_the_jit() {
    let (step, args, want) = corpus_loop_inputs().expect("the corpus is missing");
    let lp = jit_loop(&step, 5, &[8, 9, 10], 1);
    let got = lp
        .run(
            vec![args.clone()],
            &LoopOptions {
                nan_check: true,
                ..LoopOptions::default()
            },
        )
        .unwrap()
        .replica_outputs(0);

    // By hand: the optimized step compiled alone, run 5 times, the state threaded through.
    let mut optimized = step.clone();
    tessel_compiler::compile::optimize(&mut optimized, &Default::default()).unwrap();
    let exe = tessel_runtime::jit::compile(&optimized, &JitOptions::default()).unwrap();
    let fed: Vec<Vec<Array>> = args[8..].iter().map(|a| unstack(a).unwrap()).collect();
    let mut state: Vec<Array> = args[..8].to_vec();
    let mut losses = Vec::new();
    for k in 0..5 {
        let mut a: Vec<Literal> = state.iter().cloned().map(Literal::Array).collect();
        a.extend(fed.iter().map(|f| Literal::Array(f[k].clone())));
        let out: Vec<Array> = exe.run(&a).unwrap().leaves().into_iter().cloned().collect();
        state = out[..8].to_vec();
        losses.extend_from_slice(f32_data(&out[8]));
    }
    for (i, s) in state.iter().enumerate() {
        assert_eq!(s, &got[i], "parameter {i} after the loop");
    }
    assert_eq!(f32_data(&got[8]), losses.as_slice());

    assert_eq!(got.len(), want.len());
    for (key, w) in &want {
        let o = key.parse::<usize>().unwrap();
        let g = &got[o];
        assert_eq!(g.shape, w.shape, "output {key}");
        let (g, w) = (f32_data(g), f32_data(w));
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            let tol = if o < 4 { 2e-4 } else { 1e-5 + 1e-3 * b.abs() };
            assert!((a - b).abs() <= tol, "output {key}[{i}]: {a} vs JAX {b}");
        }
    }
}

#[test]
fn a_closed_infeed_stops_the_jit_loop_with_an_error() {
    let lp = jit_loop(&sgd_step_one_replica(), 5, &[1], 1);
    let short: FeedSource = Box::new((0..2).map(|_| Ok(x_value(1.5))));
    let (state, srcs) = one_replica(5, Some(short));
    let start = Instant::now();
    let e = lp
        .run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap_err()
        .to_string();
    assert_prompt(start);
    assert!(
        e.contains("infeed closed after 2 values") && e.contains("ran out after 2"),
        "{e}"
    );
    // The executable is still usable after a failed run.
    let (state, srcs) = one_replica(5, None);
    lp.run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap();
}

#[test]
fn a_failing_source_or_wrongly_shaped_data_stops_the_jit_loop() {
    let lp = jit_loop(&sgd_step_one_replica(), 5, &[1], 1);
    let failing: FeedSource = Box::new(
        [
            Ok(x_value(1.5)),
            Err(FeedError::message("cannot read shard 7")),
        ]
        .into_iter(),
    );
    let (state, srcs) = one_replica(5, Some(failing));
    let start = Instant::now();
    let e = lp
        .run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap_err()
        .to_string();
    assert_prompt(start);
    assert!(e.contains("cannot read shard 7"), "{e}");

    let wrong: FeedSource = Box::new(std::iter::once(Ok(Literal::Tuple(vec![Literal::Array(
        f32s(&[3], vec![1.0; 3]),
    )]))));
    let (state, srcs) = one_replica(5, Some(wrong));
    let e = lp
        .run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("fed (f32[3]) to an infeed of (f32[4])"), "{e}");
}

#[test]
fn the_nan_check_stops_the_jit_loop_naming_the_parameter() {
    let lp = jit_loop(&sgd_step_one_replica(), 3, &[1], 1);
    let mut args = sgd_args(1, 3);
    // Iteration 1's x[1] is negative: log gives NaN, which reaches w[1].
    if let ArrayData::F32(v) = &mut args[0][1].data {
        v[5] = -1.0;
    }
    let quiet = lp.run(args.clone(), &LoopOptions::default()).unwrap();
    assert!(f32_data(&quiet.carried[0][0])[1].is_nan());
    let checked = LoopOptions {
        nan_check: true,
        ..LoopOptions::default()
    };
    let e = lp.run(args, &checked).unwrap_err().to_string();
    assert!(
        e.contains("NaN check: carried parameter 0 (w) holds NaN (first at element 1)"),
        "{e}"
    );
    assert!(lp.run(sgd_args(1, 3), &checked).is_ok());
}

#[test]
fn a_compiled_infeed_without_a_host_feed_is_an_error() {
    let lp = jit_loop(&sgd_step_one_replica(), 2, &[1], 1);
    let w = Literal::Array(f32s(&[4], vec![1.0; 4]));
    let e = lp.executable().unwrap().run(&[w]).unwrap_err().to_string();
    assert!(e.contains("no host feed"), "{e}");
}

/// Calls to memcpy in the program function's CLIF (kernels and routines are other calls).
fn memcpy_calls_in_program(dir: &std::path::Path) -> usize {
    let program = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".program.before_opt.clif")
        })
        .expect("the program's CLIF dump");
    let text = std::fs::read_to_string(program).unwrap();
    let memcpy: Vec<String> = text
        .lines()
        .filter(|l| l.contains("%Memcpy"))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    text.lines()
        .filter(|l| memcpy.iter().any(|f| l.contains(&format!("call {f}("))))
        .count()
}

/// The state is updated in place: the loop's state takes over the buffers the carried
/// parameters were written to (the JIT's parameters are donated) and the body writes the new
/// parameters there, so the only copy fills the counter before the loop: none per iteration,
/// and none of a carried parameter.
#[test]
fn the_jit_loop_updates_its_state_in_place() {
    let step = parse_module(
        "HloModule acc3\n\nENTRY acc3 {\n  a = f32[256] parameter(0)\n  b = f32[256] parameter(1)\n  x = f32[256] parameter(2)\n  s = f32[256] add(a, x)\n  m = f32[256] multiply(b, x)\n  ROOT t = (f32[256], f32[256]) tuple(s, m)\n}\n",
        None,
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("tessel_loop_state_{}", std::process::id()));
    let device = Device {
        dump_to: Some(dir.clone()),
        ..Device::jit()
    };
    let lp = make_loop(&step, 4, &[2], device);
    let copies = memcpy_calls_in_program(&dir.join("jit"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        copies, 1,
        "the loop copies its state (or no longer fills it)"
    );
    let x: Vec<f32> = (0..4 * 256).map(|i| (i % 7) as f32 * 0.5).collect();
    let args = vec![vec![
        f32s(&[256], vec![1.0; 256]),
        f32s(&[256], vec![2.0; 256]),
        f32s(&[4, 256], x.clone()),
    ]];
    let out = lp.run(args, &LoopOptions::default()).unwrap();
    for j in 0..256 {
        let xs: Vec<f32> = (0..4).map(|k| x[k * 256 + j]).collect();
        let sum = 1.0 + xs.iter().sum::<f32>();
        let prod = 2.0 * xs.iter().product::<f32>();
        assert_eq!(f32_data(&out.carried[0][0])[j], sum, "a[{j}]");
        assert_eq!(f32_data(&out.carried[0][1])[j], prod, "b[{j}]");
    }
}

/// The per-replica step with an all-reduce, compiled once, looping on 4 replicas: the
/// interpreter's numbers, bitwise the same in two runs.
#[test]
fn the_jit_loop_runs_on_four_replicas_like_the_interpreter() {
    let k = 6;
    let step = sgd_step(None);
    let jit = jit_loop(&step, k as u64, &[1], 4);
    let interp = interp_loop(&step, k as u64, &[1], 4);
    let args = sgd_args(4, k);
    let a = jit.run(args.clone(), &LoopOptions::default()).unwrap();
    let b = jit.run(args.clone(), &LoopOptions::default()).unwrap();
    assert_eq!(a, b, "two runs differ");
    let want = interp.run(args, &LoopOptions::default()).unwrap();
    for r in 0..4 {
        // Every replica holds the same all-reduced state.
        assert_eq!(a.carried[r], a.carried[0], "replica {r}");
        for (g, w) in a.replica_outputs(r).iter().zip(want.replica_outputs(r)) {
            assert_eq!(g.shape, w.shape);
            for (x, y) in f32_data(g).iter().zip(f32_data(&w)) {
                assert!(
                    (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                    "replica {r}: {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn faults_on_one_replica_stop_the_jit_loop_on_every_replica() {
    let lp = jit_loop(&sgd_step(None), 5, &[1], 4);
    // Replica 3's data runs out while the others wait for it at the all-reduce.
    let short: FeedSource = Box::new((0..2).map(|_| Ok(x_value(1.5))));
    let (state, srcs) = sources(5, 3, short);
    let start = Instant::now();
    let e = lp
        .run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica(), Some(3), "{e}");
    assert!(
        e.to_string().contains("infeed closed after 2 values"),
        "{e}"
    );

    // A source's own typed error (here an io::Error, as a file dataset's) reaches the loop's
    // error with its whole message.
    let failing: FeedSource = Box::new(
        [
            Ok(x_value(1.5)),
            Err(FeedError::source(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "cannot read shard 7: record 3 at offset 120 is corrupt",
            ))),
        ]
        .into_iter(),
    );
    let (state, srcs) = sources(5, 1, failing);
    let start = Instant::now();
    let e = lp
        .run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica(), Some(1), "{e}");
    assert!(
        e.to_string()
            .contains("failed at value 1: cannot read shard 7: record 3 at offset 120 is corrupt"),
        "{e}"
    );

    let wrong: FeedSource = Box::new(std::iter::once(Ok(Literal::Tuple(vec![Literal::Array(
        f32s(&[3], vec![1.0; 3]),
    )]))));
    let (state, srcs) = sources(5, 0, wrong);
    let e = lp
        .run_fed(state, srcs, Outfeed::Collect, &LoopOptions::default())
        .unwrap_err();
    assert_eq!(e.replica(), Some(0), "{e}");
    assert!(
        e.to_string()
            .contains("fed (f32[3]) to an infeed of (f32[4])"),
        "{e}"
    );

    // Replica 3's negative data makes NaN, which the all-reduce spreads to every replica.
    let mut args = sgd_args(4, 3);
    if let ArrayData::F32(v) = &mut args[3][1].data {
        v[5] = -1.0;
    }
    let checked = LoopOptions {
        nan_check: true,
        ..LoopOptions::default()
    };
    let lp = jit_loop(&sgd_step(None), 3, &[1], 4);
    let e = lp.run(args, &checked).unwrap_err().to_string();
    assert!(e.contains("NaN check: carried parameter 0 (w)"), "{e}");
    // And the executable still runs cleanly afterwards.
    lp.run(sgd_args(4, 3), &checked).unwrap();
}
