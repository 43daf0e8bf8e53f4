//! The JIT takes every arena offset from the compiler's buffer assignment with its needs
//! (`jit::arena_plan`): on corpus modules after the default pipeline, the program's arena is
//! the assignment's peak, every value it places is at the assignment's offsets, the scratch it
//! asks for is the scratch the assignment planned, and every buffer is 64-byte aligned. Then
//! hand-written modules, unoptimized, against the interpreter: a callee per call site,
//! in-place writes only where the kernel reads at the written index, loop copies through
//! planned temporaries.

use std::collections::BTreeMap;
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::{parse_module, parse_module_file};
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, Literal, Module};
use tessel_compiler::passes::BufferKind;
use tessel_compiler::training_loop::wrap_in_training_loop;
use tessel_runtime::arena::BUFFER_ALIGN;
use tessel_runtime::jit::arena_plan::plan_arena;
use tessel_runtime::jit::{compile, JitOptions};
use tessel_runtime::shard_map::{is_shard_map_module, per_replica_module};
use tessel_tests::corpus_dir;

fn corpus_module(file: &str) -> Module {
    parse_module_file(&corpus_dir().unwrap().join(file)).unwrap()
}

/// Optimizes `m` as `tessel compile` does, then checks the program against the assignment.
fn check(what: &str, mut m: Module) {
    optimize(&mut m, &CompileOptions::default()).unwrap();
    if is_shard_map_module(&m) {
        m = per_replica_module(&m).unwrap();
    }
    let options = JitOptions::default();
    let exe = compile(&m, &options).unwrap();
    let plan = plan_arena(&m, &options);
    let stats = exe.stats();

    assert_eq!(
        stats.arena_bytes, plan.peak_bytes as usize,
        "{what}: JIT arena and assignment peak"
    );
    assert!(!stats.placements.is_empty(), "{what}: no value placed");
    for (key, offsets) in &stats.placements {
        let planned: Vec<usize> = plan.value_buffers[key]
            .iter()
            .flatten()
            .map(|&b| plan.buffers[b].offset as usize)
            .collect();
        assert_eq!(offsets, &planned, "{what}: offsets of {key:?}");
    }

    let mut asked: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (name, bytes) in &stats.scratch {
        asked.entry(name.clone()).or_default().push(*bytes as i64);
    }
    let mut planned: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (&(inst, id), buffers) in &plan.scratch_buffers {
        let name = m.computation(plan.instances[inst]).get(id).name.clone();
        let sizes = planned.entry(name).or_default();
        sizes.extend(buffers.iter().map(|&b| plan.buffers[b].size));
    }
    assert_eq!(
        asked, planned,
        "{what}: scratch asked (left) and planned (right)"
    );

    for b in &plan.buffers {
        if b.kind == BufferKind::Constant {
            assert_eq!(
                b.offset, -1,
                "{what}: a constant in the arena: {:?}",
                b.values
            );
        } else {
            assert_eq!(b.offset % BUFFER_ALIGN as i64, 0, "{what}: {:?}", b.values);
            assert!(
                b.offset + b.size <= plan.peak_bytes,
                "{what}: {:?}",
                b.values
            );
        }
    }
    eprintln!(
        "{what}: arena {} bytes (lower bound {}), {} buffers, {} scratch requests",
        stats.arena_bytes,
        plan.lower_bound_bytes,
        plan.buffers.len(),
        stats.scratch.len()
    );
}

#[test]
fn mnist_b8_step() {
    check(
        "mnist b8 step",
        corpus_module("mnist_cnn_train_step_b8.hlo"),
    );
}

#[test]
fn mnist_b8_step_as_a_loop_of_5() {
    let step = corpus_module("mnist_cnn_train_step_b8.hlo");
    // Images, labels and key are fed per iteration (see the corpus README).
    let looped = wrap_in_training_loop(&step, 5, &[8, 9, 10]).unwrap();
    check("mnist b8 loop5", looped);
}

#[test]
fn fori_loop_sin() {
    check("fori_loop_sin", corpus_module("fori_loop_sin.hlo"));
}

#[test]
fn data_parallel_modules() {
    for file in [
        "dp_mnist_cnn_train_step_r4_b32.hlo",
        "dp_tanh_regression_r4.hlo",
    ] {
        check(file, corpus_module(file));
    }
}

#[test]
fn mnist_b128_step() {
    check(
        "mnist b128 step",
        corpus_module("mnist_cnn_train_step_b128.hlo"),
    );
}

/// Compiles `text` unoptimized on the JIT and checks it against the interpreter and its own
/// assignment; returns the assignment.
fn against_interpreter(text: &str, args: &[Literal]) -> tessel_compiler::passes::BufferAssignment {
    let m = parse_module(text, None).unwrap();
    let want = evaluate(&m, args).unwrap();
    let options = JitOptions::default();
    let exe = compile(&m, &options).unwrap();
    assert_eq!(exe.run(args).unwrap(), want);
    let plan = plan_arena(&m, &options);
    assert_eq!(exe.stats().arena_bytes, plan.peak_bytes as usize);
    for (key, offsets) in &exe.stats().placements {
        let planned: Vec<usize> = plan.value_buffers[key]
            .iter()
            .flatten()
            .map(|&b| plan.buffers[b].offset as usize)
            .collect();
        assert_eq!(offsets, &planned, "offsets of {key:?}");
    }
    plan
}

fn f32s(data: &[f32]) -> Literal {
    Literal::Array(Array::f32(&[data.len() as i64], data.to_vec()))
}

/// Whether some buffer of `plan` holds both values.
fn share(plan: &tessel_compiler::passes::BufferAssignment, a: &str, b: &str) -> bool {
    plan.buffers
        .iter()
        .any(|buf| buf.values.iter().any(|v| v == a) && buf.values.iter().any(|v| v == b))
}

#[test]
fn a_callee_gets_buffers_per_call_site() {
    let plan = against_interpreter(
        "HloModule twice\n\nsq {\n  x = f32[8] parameter(0)\n  ROOT y = f32[8] multiply(x, x)\n}\n\nENTRY main {\n  a = f32[8] parameter(0)\n  c1 = f32[8] call(a), to_apply=sq\n  c2 = f32[8] call(c1), to_apply=sq\n  ROOT s = f32[8] add(c1, c2)\n}\n",
        &[f32s(&[1.0, 2.0, 3.0, 0.5, -1.0, 4.0, 1.5, 2.5])],
    );
    // The entry, then `sq` once per call site.
    assert_eq!(plan.instances.len(), 3);
    let ys: Vec<_> = plan
        .buffers
        .iter()
        .filter(|b| b.values.iter().any(|v| v == "y"))
        .collect();
    assert_eq!(ys.len(), 2, "one buffer of y per call site");
}

#[test]
fn in_place_only_where_the_kernel_reads_at_the_written_index() {
    // `t` dies at `u`, which reads it reversed (recomputed in its kernel): no sharing. `v`
    // reads the dot `w` elementwise (through a recomputed negate) where `w` dies, and is itself
    // recomputed in the root `o`: `o` may take w's buffer. (Values are multiples of 1/64: exact in any summation order.)
    let m: Vec<f32> = (0..64)
        .map(|i| ((i * 7) % 11) as f32 * 0.125 - 0.5)
        .collect();
    let plan = against_interpreter(
        "HloModule aligned\n\nENTRY main {\n  a = f32[8] parameter(0)\n  m = f32[8,8] parameter(1)\n  t = f32[8] multiply(a, a)\n  r = f32[8] reverse(t), dimensions={0}\n  u = f32[8] add(t, r)\n  w = f32[8] dot(m, u), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  n = f32[8] negate(w)\n  v = f32[8] multiply(n, u)\n  ROOT o = f32[8] add(v, u)\n}\n",
        &[
            f32s(&[1.0, 2.0, 3.0, 0.5, -1.0, 4.0, 1.5, 2.5]),
            Literal::Array(Array::f32(&[8, 8], m)),
        ],
    );
    assert!(!share(&plan, "t", "u"), "u must not overwrite t");
    // `n` and `v` are recomputed in the root's kernel, which reads `w` at its index.
    assert!(
        share(&plan, "w", "o"),
        "o reads w at its index:\n{}",
        plan.to_text()
    );
}

#[test]
fn loop_copies_through_planned_temporaries() {
    // The state's two elements start as the same value (one takes over its buffer, the
    // other is copied from it) and the body swaps them.
    let plan = against_interpreter(
        "HloModule swap\n\ncond {\n  cp = (s32[], f32[8], f32[8]) parameter(0)\n  ci = s32[] get-tuple-element(cp), index=0\n  ck = s32[] constant(3)\n  ROOT lt = pred[] compare(ci, ck), direction=LT\n}\n\nbody {\n  p = (s32[], f32[8], f32[8]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  a = f32[8] get-tuple-element(p), index=1\n  b = f32[8] get-tuple-element(p), index=2\n  one = s32[] constant(1)\n  i2 = s32[] add(i, one)\n  b2 = f32[8] add(b, b)\n  ROOT t = (s32[], f32[8], f32[8]) tuple(i2, b2, a)\n}\n\nENTRY main {\n  a0 = f32[8] parameter(0)\n  x = f32[8] add(a0, a0)\n  zero = s32[] constant(0)\n  init = (s32[], f32[8], f32[8]) tuple(zero, x, x)\n  w = (s32[], f32[8], f32[8]) while(init), condition=cond, body=body\n  ra = f32[8] get-tuple-element(w), index=1\n  rb = f32[8] get-tuple-element(w), index=2\n  ROOT r = (f32[8], f32[8]) tuple(ra, rb)\n}\n",
        &[f32s(&[0.1, 0.2, 0.3, 0.5, -1.0, 0.4, 1.5, 2.5])],
    );
    let temps: usize = plan.loop_copy_temps.values().map(Vec::len).sum();
    assert!(
        temps >= 1,
        "the copies need a temporary: {:?}",
        plan.loop_copy_temps
    );
}

#[test]
fn a_multi_output_fusion_updates_loop_state_in_place() {
    // Adam's two moments as a training loop updates them: one fusion computes both new state
    // elements, each from both old ones (so each output reads at its index a buffer the other
    // output overwrites). Both outputs take the old elements' buffers: no copy back per
    // iteration, and the results are the interpreter's.
    let a: Vec<f32> = (0..67).map(|i| (i % 9) as f32 * 0.25 - 1.0).collect();
    let b: Vec<f32> = (0..67).map(|i| (i % 5) as f32 * 0.5 + 0.125).collect();
    let plan = against_interpreter(
        "HloModule moments\n\nupd {\n  x = f32[67] parameter(0)\n  y = f32[67] parameter(1)\n  h = f32[] constant(0.5)\n  hb = f32[67] broadcast(h), dimensions={}\n  q = f32[] constant(0.25)\n  qb = f32[67] broadcast(q), dimensions={}\n  x2 = f32[67] multiply(x, hb)\n  n0 = f32[67] add(x2, y)\n  y2 = f32[67] multiply(y, qb)\n  n1 = f32[67] subtract(y2, x)\n  ROOT r = (f32[67], f32[67]) tuple(n0, n1)\n}\n\ncond {\n  cp = (s32[], f32[67], f32[67]) parameter(0)\n  ci = s32[] get-tuple-element(cp), index=0\n  ck = s32[] constant(3)\n  ROOT lt = pred[] compare(ci, ck), direction=LT\n}\n\nbody {\n  p = (s32[], f32[67], f32[67]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  a = f32[67] get-tuple-element(p), index=1\n  b = f32[67] get-tuple-element(p), index=2\n  one = s32[] constant(1)\n  i2 = s32[] add(i, one)\n  f = (f32[67], f32[67]) fusion(a, b), kind=kLoop, calls=upd\n  f0 = f32[67] get-tuple-element(f), index=0\n  f1 = f32[67] get-tuple-element(f), index=1\n  ROOT t = (s32[], f32[67], f32[67]) tuple(i2, f0, f1)\n}\n\nENTRY main {\n  a0 = f32[67] parameter(0)\n  b0 = f32[67] parameter(1)\n  x = f32[67] add(a0, a0)\n  y = f32[67] add(b0, b0)\n  zero = s32[] constant(0)\n  init = (s32[], f32[67], f32[67]) tuple(zero, x, y)\n  w = (s32[], f32[67], f32[67]) while(init), condition=cond, body=body\n  ra = f32[67] get-tuple-element(w), index=1\n  rb = f32[67] get-tuple-element(w), index=2\n  ROOT r = (f32[67], f32[67]) tuple(ra, rb)\n}\n",
        &[f32s(&a), f32s(&b)],
    );
    for k in 1..=2 {
        let (old, new) = (format!("w{{{k}}}"), format!("f{{{}}}", k - 1));
        assert!(
            share(&plan, &old, &new),
            "{new} must overwrite {old}:\n{}",
            plan.to_text()
        );
    }
}

/// Batch normalization's two backward sums over a `[64, 8, 8, 32]` batch: one fusion, computed
/// in two parts on two threads, the second part's sums in scratch. Each partial result is
/// planned with 128 bytes clear on each side (`reduce::PARTIAL_GUARD`: 128 + 2 x 128 bytes
/// for 32 floats), so it does not sit in the lines next to the first part's sums; the program
/// asks for what was planned, and the sums match the interpreter's.
#[test]
fn a_split_reduces_partial_sums_are_planned_apart_from_other_buffers() {
    let text = r#"
HloModule batch_norm_sums
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[64,8,8,32]{3,2,1,0} parameter(0)
  dy = f32[64,8,8,32]{3,2,1,0} parameter(1)
  mean = f32[32]{0} parameter(2)
  mb = f32[64,8,8,32]{3,2,1,0} broadcast(mean), dimensions={3}
  d = f32[64,8,8,32]{3,2,1,0} subtract(x, mb)
  p = f32[64,8,8,32]{3,2,1,0} multiply(dy, d)
  zero = f32[] constant(0)
  sum_d = f32[32]{0} reduce(d, zero), dimensions={0,1,2}, to_apply=add
  sum_p = f32[32]{0} reduce(p, zero), dimensions={0,1,2}, to_apply=add
  ROOT t = (f32[32]{0}, f32[32]{0}) tuple(sum_d, sum_p)
}
"#;
    let m = parse_module(text, None).unwrap();
    check("batch-norm sums", m.clone());
    let mut optimized = m.clone();
    optimize(&mut optimized, &CompileOptions::default()).unwrap();
    let options = JitOptions::default();
    let plan = plan_arena(&optimized, &options);
    let scratch: Vec<i64> = plan
        .scratch_buffers
        .values()
        .flatten()
        .map(|&b| plan.buffers[b].size)
        .collect();
    assert_eq!(scratch, vec![384, 384], "two guarded partial results");

    let args = [
        tessel_tests::numerics::pseudo_random_f32(&[64, 8, 8, 32], 1, 64),
        tessel_tests::numerics::pseudo_random_f32(&[64, 8, 8, 32], 2, 64),
        tessel_tests::numerics::pseudo_random_f32(&[32], 3, 64),
    ];
    let want = evaluate(&m, &args).unwrap();
    let got = compile(&optimized, &options).unwrap().run(&args).unwrap();
    let tolerance = tessel_tests::numerics::Tolerance {
        atol: 1e-3,
        rtol: 1e-5,
    };
    tessel_tests::numerics::compare_literals(&got, &want, tolerance).unwrap();
}
