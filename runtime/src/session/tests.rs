//! Tests of the session API: corpus modules compiled and run on both backends, a loop run
//! twice with its state carried between the runs, a shard_map module, and the errors a
//! library user matches on.

use super::*;
use crate::feed::stacked_source;
use crate::host_io::read_safetensors;
use std::path::PathBuf;
use tessel_compiler::hlo_text::{parse_module, parse_module_file};
use tessel_compiler::ir::{Array, Module};

fn corpus(file: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/conformance");
    assert!(
        dir.is_dir(),
        "tests/corpus/conformance is missing: the session tests need it"
    );
    dir.join(file)
}

fn load(name: &str) -> Module {
    parse_module_file(&corpus(&format!("{name}.hlo"))).unwrap()
}

fn tensors(file: &str) -> Vec<(String, Array)> {
    read_safetensors(corpus(file)).unwrap()
}

/// Outputs keyed "I", compared with JAX's within 1e-5 + `rel` |b|.
fn assert_close(got: Vec<(String, Array)>, want: Vec<(String, Array)>, rel: f64) {
    assert_eq!(got.len(), want.len());
    for (key, w) in want {
        let g = &got.iter().find(|(k, _)| *k == key).expect("output key").1;
        assert_eq!(g.shape, w.shape, "output {key}");
        for j in 0..w.len() {
            let (a, b) = (g.data.get_f64(j), w.data.get_f64(j));
            assert!(
                (a - b).abs() <= 1e-5 + rel * b.abs(),
                "{key}[{j}]: {a} vs {b}"
            );
        }
    }
}

#[test]
fn a_corpus_module_runs_on_both_backends() {
    let name = "tanh_matmul_sum";
    let module = load(name);
    for device in [Device::interpreter(), Device::jit()] {
        let program = compile(&module, &device).unwrap();
        assert_eq!(program.form(), ProgramForm::Single);
        assert_eq!(program.parameters().len(), 1);
        assert_eq!(program.stats().is_some(), device.backend == Backend::Jit);
        let inputs = program
            .bind(tensors(&format!("{name}.inputs.safetensors")))
            .unwrap();
        let out = program.run(&inputs).unwrap();
        // Runs again on the same bound inputs, to the same bits.
        assert_eq!(program.run(&inputs).unwrap(), out);
        assert_close(
            out.keyed(),
            tensors(&format!("{name}.outputs.safetensors")),
            1e-4,
        );
    }
}

#[test]
fn a_shard_map_module_sets_the_replicas_to_its_mesh() {
    let sharded = load("dp_tanh_regression_r4");
    assert_eq!(Device::jit().with_replicas_of(&sharded).replicas, 4);
    let single = load("tanh_matmul_sum");
    let device = Device::jit().with_replicas(3).with_replicas_of(&single);
    assert_eq!(device.replicas, 3);
}

#[test]
fn a_shard_map_module_takes_and_gives_global_arrays() {
    let name = "dp_tanh_regression_r4";
    let module = load(name);
    for device in [Device::interpreter(), Device::jit()] {
        let program = compile(&module, &device.with_replicas(4)).unwrap();
        assert_eq!(program.form(), ProgramForm::ShardMap);
        let inputs = program
            .bind(tensors(&format!("{name}.inputs.safetensors")))
            .unwrap();
        let out = program.run(&inputs).unwrap();
        assert!(matches!(out, Outputs::Global(_)));
        assert_close(
            out.keyed(),
            tensors(&format!("{name}.outputs.safetensors")),
            1e-4,
        );
    }
}

/// w <- w * x per iteration; the per-iteration output is the sum of w * x.
const STEP: &str = r#"HloModule scale

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY step {
  w = f32[3] parameter(0)
  x = f32[3] parameter(1)
  m = f32[3] multiply(w, x)
  z = f32[] constant(0)
  total = f32[] reduce(m, z), dimensions={0}, to_apply=add_f32
  ROOT t = (f32[3], f32[]) tuple(m, total)
}
"#;

fn xs(iterations: usize, from: usize) -> Array {
    let v = (0..iterations * 3)
        .map(|i| 0.5 + ((from * 3 + i) % 5) as f32 * 0.25)
        .collect();
    Array::f32(&[iterations as i64, 3], v)
}

fn spec(iterations: u64) -> LoopSpec {
    LoopSpec {
        iterations,
        infeed: vec![1],
    }
}

/// Two runs of a 2-iteration loop, the state of the first carried into the second, equal one
/// run of a 4-iteration loop; the second run delivers its outfeed to a callback.
#[test]
fn a_loop_runs_twice_with_its_state_carried() {
    let step = parse_module(STEP, None).unwrap();
    let w0 = Array::f32(&[3], vec![1.0, 2.0, -1.0]);
    for device in [Device::interpreter(), Device::jit()] {
        let whole = compile_loop(&step, &spec(4), &device).unwrap();
        let want = whole
            .run(vec![vec![w0.clone(), xs(4, 0)]], &LoopOptions::default())
            .unwrap();
        let half = compile_loop(&step, &spec(2), &device).unwrap();
        let first = half
            .run(vec![vec![w0.clone(), xs(2, 0)]], &LoopOptions::default())
            .unwrap();
        let mut delivered: Vec<(usize, u64, Vec<Array>)> = Vec::new();
        let mut deliver = |r: usize, k: u64, values: Vec<Array>| delivered.push((r, k, values));
        let second = half
            .run_fed(
                first.carried.clone(),
                vec![stacked_source(vec![xs(2, 2)]).unwrap()],
                Outfeed::Callback(&mut deliver),
                &LoopOptions::default(),
            )
            .unwrap();
        assert_eq!(second.carried, want.carried, "{:?}", device.backend);
        assert!(second.per_iteration[0].is_empty());
        let losses: Vec<f64> = (0..4)
            .map(|k| want.per_iteration[0][0].data.get_f64(k))
            .collect();
        let mut got: Vec<f64> = (0..2)
            .map(|k| first.per_iteration[0][0].data.get_f64(k))
            .collect();
        assert_eq!(delivered.len(), 2);
        for (i, (r, k, values)) in delivered.iter().enumerate() {
            assert_eq!((*r, *k), (0, i as u64));
            got.push(values[0].data.get_f64(0));
        }
        assert_eq!(got, losses, "{:?}", device.backend);
    }
}

/// The JIT keeps a loop's final state in its arenas: a run given the token of the run whose
/// state it is passed starts from what the device holds (shown here by passing other values
/// with the token, which the contract forbids), on one replica and on two; a token whose
/// state another run has replaced finds nothing held and the values passed are written.
#[test]
fn a_loop_starts_from_the_state_its_device_kept() {
    let step = parse_module(STEP, None).unwrap();
    let w0 = Array::f32(&[3], vec![1.0, 2.0, -1.0]);
    // Replica r starts from its own state, so an arena given to another replica would show.
    let w = |r: usize| Array::f32(&[3], vec![1.0 + r as f32, 2.0, -1.0 - r as f32]);
    let other = Array::f32(&[3], vec![7.0, 7.0, 7.0]);
    let source = |from| vec![stacked_source(vec![xs(2, from)]).unwrap()];
    let interpreted = compile_loop(&step, &spec(2), &Device::interpreter()).unwrap();
    let out = interpreted
        .run(vec![vec![w0.clone(), xs(2, 0)]], &LoopOptions::default())
        .unwrap();
    assert_eq!(out.on_device, None);
    for replicas in [1, 2] {
        let device = Device::jit().with_replicas(replicas);
        let whole = compile_loop(&step, &spec(4), &device).unwrap();
        let args = (0..replicas).map(|r| vec![w(r), xs(4, 0)]).collect();
        let want = whole.run(args, &LoopOptions::default()).unwrap();
        let half = compile_loop(&step, &spec(2), &device).unwrap();
        let first = half
            .run_fed(
                (0..replicas).map(|r| vec![w(r)]).collect(),
                (0..replicas).flat_map(|_| source(0)).collect(),
                Outfeed::Collect,
                &LoopOptions::default(),
            )
            .unwrap();
        let kept = LoopOptions {
            carried_on_device: first.on_device,
            ..LoopOptions::default()
        };
        assert!(kept.carried_on_device.is_some());
        let second = half
            .run_fed(
                vec![vec![other.clone()]; replicas],
                (0..replicas).flat_map(|_| source(2)).collect(),
                Outfeed::Collect,
                &kept,
            )
            .unwrap();
        assert_eq!(second.carried, want.carried, "{replicas} replicas");
        assert_ne!(second.on_device, first.on_device);
        // `second` replaced the state `first`'s token named: the values passed count.
        let third = half
            .run_fed(
                (0..replicas).map(|r| vec![w(r)]).collect(),
                (0..replicas).flat_map(|_| source(0)).collect(),
                Outfeed::Collect,
                &kept,
            )
            .unwrap();
        assert_eq!(third.carried, first.carried, "{replicas} replicas");
    }
}

#[test]
fn bad_bindings_are_binding_errors() {
    let program = compile(&load("tanh_matmul_sum"), &Device::interpreter()).unwrap();
    let e = program.bind(Vec::new()).unwrap_err();
    assert!(
        matches!(
            e,
            SessionError::Binding(BindError::Missing { index: 0, .. })
        ),
        "{e}"
    );
    let e = program
        .bind(vec![("0".into(), Array::f32(&[1], vec![0.0]))])
        .unwrap_err();
    assert!(
        matches!(
            e,
            SessionError::Binding(BindError::Mismatch { index: 0, .. })
        ),
        "{e}"
    );
    let mut inputs = tensors("tanh_matmul_sum.inputs.safetensors");
    inputs.push(("1".into(), Array::f32(&[1], vec![0.0])));
    let e = program.bind(inputs).unwrap_err();
    assert!(
        matches!(e, SessionError::Binding(BindError::Extra { count: 1, .. })),
        "{e}"
    );
    let step = parse_module(STEP, None).unwrap();
    let lp = compile_loop(&step, &spec(4), &Device::interpreter()).unwrap();
    let e = lp
        .bind(vec![
            ("0".into(), Array::f32(&[3], vec![1.0; 3])),
            ("1".into(), Array::f32(&[3], vec![1.0; 3])),
        ])
        .unwrap_err();
    assert!(e.to_string().contains("stacked 4 deep"), "{e}");
}

#[test]
fn an_illegal_module_is_refused_by_the_jit_not_the_interpreter() {
    let module = load("x64_mean");
    let e = compile(&module, &Device::jit()).err().unwrap();
    match e {
        SessionError::NotLegal {
            diagnostics,
            rendered,
        } => {
            assert!(!diagnostics.is_empty());
            assert!(rendered.contains(diagnostics[0].code), "{rendered}");
        }
        other => panic!("expected NotLegal, got {other}"),
    }
    compile(&module, &Device::interpreter()).unwrap();
}

#[test]
fn a_wrong_replica_count_is_a_replica_count_error() {
    let e = compile(
        &load("dp_tanh_regression_r4"),
        &Device::jit().with_replicas(2),
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            SessionError::ReplicaCount(ReplicaCountError::Mesh {
                expected: 4,
                got: 2,
                ..
            })
        ),
        "{e}"
    );
    let e = compile(
        &load("tanh_matmul_sum"),
        &Device::interpreter().with_replicas(0),
    )
    .err()
    .unwrap();
    assert!(
        matches!(e, SessionError::ReplicaCount(ReplicaCountError::Zero)),
        "{e}"
    );
    let step = parse_module(STEP, None).unwrap();
    let lp = compile_loop(&step, &spec(2), &Device::interpreter().with_replicas(2)).unwrap();
    let one = vec![vec![Array::f32(&[3], vec![1.0; 3]), xs(2, 0)]];
    let e = lp.run(one, &LoopOptions::default()).unwrap_err();
    assert!(
        matches!(
            e,
            SessionError::ReplicaCount(ReplicaCountError::Arguments {
                expected: 2,
                got: 1
            })
        ),
        "{e}"
    );
}

#[test]
fn an_invalid_module_and_a_bad_loop_spec_are_typed() {
    let module = parse_module(STEP, None).unwrap();
    let e = compile_loop(&module, &spec(0), &Device::interpreter())
        .err()
        .unwrap();
    assert!(matches!(e, SessionError::Loop(_)), "{e}");
    let e = compile_loop(
        &module,
        &LoopSpec {
            iterations: 2,
            infeed: vec![7],
        },
        &Device::interpreter(),
    )
    .err()
    .unwrap();
    assert!(!e.to_string().contains("--"), "library wording: {e}");
    // An instruction whose shape disagrees with its operand's fails verification.
    let bad = parse_module(
        "HloModule bad\n\nENTRY main {\n  x = f32[2] parameter(0)\n  ROOT y = f32[3] negate(x)\n}\n",
        None,
    );
    let e = compile(&bad.unwrap(), &Device::interpreter())
        .err()
        .unwrap();
    assert!(matches!(e, SessionError::Invalid(_)), "{e}");
}

/// The JIT lays its arena out with the assignment the optimizer's report made, without
/// computing it again: that holds only while the report's needs are the JIT's. Checked on
/// a training step (convolutions, scratch, a loop) and a `fori_loop`.
#[test]
fn the_reported_buffer_assignment_is_the_jits_arena_plan() {
    let device = Device::jit();
    for name in ["mnist_cnn_train_step_b8", "fori_loop_sin"] {
        let mut optimized = load(name);
        let report =
            tessel_compiler::compile::optimize(&mut optimized, &device.pipeline_options()).unwrap();
        let planned = crate::jit::arena_plan::plan_arena(&optimized, &device.jit_options());
        assert_eq!(report.buffers.to_text(), planned.to_text(), "{name}");
    }
}
