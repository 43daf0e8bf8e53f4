//! Replicas on the JIT: `Executable::run_replicated` runs one compiled program on N replicas
//! whose collectives (all-reduce with simple and general reducers and replica groups,
//! all-gather, reduce-scatter, collective-permute, replica-id, partition-id) give bitwise the
//! interpreter's values, the same on every run; a fault on one replica (kernel error, panic
//! in a routine, panic on its thread, a failing collective, bad arguments) stops every
//! replica promptly, naming the one that failed.

use std::time::{Duration, Instant};
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::ir::{Array, ArrayData, Literal, Module};
use tessel_runtime::jit::{compile, Executable, JitOptions};
use tessel_runtime::replicas::{evaluate_replicated, Fault, Injection, ReplicaOptions};

const COLLECTIVES: &str = r#"
HloModule collectives_r4

add {
  add.a = f32[] parameter(0)
  add.b = f32[] parameter(1)
  ROOT add.s = f32[] add(add.a, add.b)
}

max {
  max.a = f32[] parameter(0)
  max.b = f32[] parameter(1)
  ROOT max.m = f32[] maximum(max.a, max.b)
}

halved_sum {
  hs.a = f32[] parameter(0)
  hs.b = f32[] parameter(1)
  hs.s = f32[] add(hs.a, hs.b)
  hs.h = f32[] constant(0.5)
  ROOT hs.r = f32[] multiply(hs.s, hs.h)
}

ENTRY main {
  x = f32[8] parameter(0)
  id = u32[] replica-id()
  idf = f32[] convert(id)
  idb = f32[8] broadcast(idf), dimensions={}
  y = f32[8] add(x, idb)
  sum = f32[8] all-reduce(y), replica_groups={}, to_apply=add
  pairmax = f32[8] all-reduce(y), replica_groups={{0,2},{1,3}}, to_apply=max
  halved = f32[8] all-reduce(y), replica_groups={{3,1,0,2}}, to_apply=halved_sum
  gathered = f32[32] all-gather(y), dimensions={0}, replica_groups={{0,1,2,3}}
  scattered = f32[2] reduce-scatter(y), dimensions={0}, replica_groups={{0,1,2,3}}, to_apply=add
  shifted = f32[8] collective-permute(y), source_target_pairs={{0,1},{1,2},{2,3}}
  both = (f32[8], f32[2]) all-reduce(y, scattered), replica_groups={}, to_apply=add
  both0 = f32[8] get-tuple-element(both), index=0
  both1 = f32[2] get-tuple-element(both), index=1
  pid = u32[] partition-id()
  ROOT t = (f32[8], f32[8], f32[8], f32[32], f32[2], f32[8], f32[8], f32[2], u32[], u32[]) tuple(sum, pairmax, halved, gathered, scattered, shifted, both0, both1, id, pid)
}
"#;

fn parse(text: &str) -> Module {
    parse_module(text, None).unwrap_or_else(|e| panic!("{e}"))
}

fn jit(m: &Module) -> Executable {
    compile(m, &JitOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn f32s(dims: &[i64], v: Vec<f32>) -> Array {
    Array::f32(dims, v)
}

/// Replica r's x: values whose float sums depend on the order of addition.
fn replica_inputs(n: usize) -> Vec<Vec<Literal>> {
    (0..n)
        .map(|r| {
            let v = (0..8)
                .map(|i| {
                    0.1 * (i as f32 + 1.0) + 1e-7 * (r as f32 + 1.0) * 3.3 + 1e4 * (r % 2) as f32
                })
                .collect();
            vec![Literal::Array(f32s(&[8], v))]
        })
        .collect()
}

fn bytes(l: &Literal) -> Vec<Vec<u8>> {
    l.leaves().iter().map(|a| a.data.to_le_bytes()).collect()
}

fn f32_data(a: &Array) -> &[f32] {
    match &a.data {
        ArrayData::F32(v) => v,
        other => panic!("expected f32, got {other:?}"),
    }
}

#[test]
fn collectives_give_the_interpreters_bits_on_every_replica() {
    let m = parse(COLLECTIVES);
    let want = evaluate_replicated(&m, replica_inputs(4)).unwrap();
    let mut optimized = m.clone();
    optimize(&mut optimized, &CompileOptions::default()).unwrap();
    for (what, module) in [("as parsed", &m), ("optimized", &optimized)] {
        let exe = jit(module);
        let got = exe.run_replicated(replica_inputs(4)).unwrap();
        for r in 0..4 {
            assert_eq!(bytes(&got[r]), bytes(&want[r]), "{what}: replica {r}");
        }
        // Every replica of a group holds the same bits; the shifted value is the sender's y.
        let leaves: Vec<Vec<Array>> = got
            .iter()
            .map(|l| l.leaves().into_iter().cloned().collect())
            .collect();
        for r in 1..4 {
            assert_eq!(
                leaves[r][0], leaves[0][0],
                "{what}: all-reduce on replica {r}"
            );
            assert_eq!(
                leaves[r][3], leaves[0][3],
                "{what}: all-gather on replica {r}"
            );
        }
        assert_eq!(leaves[2][1], leaves[0][1]);
        assert_eq!(leaves[3][1], leaves[1][1]);
        assert_eq!(
            f32_data(&leaves[0][5]),
            &[0.0; 8],
            "nobody sends to replica 0"
        );
        let y0 = &f32_data(&leaves[0][3])[0..8];
        assert_eq!(f32_data(&leaves[1][5]), y0);
        for (r, l) in leaves.iter().enumerate() {
            assert_eq!(l[8].data, ArrayData::U32(vec![r as u32]));
            assert_eq!(l[9].data, ArrayData::U32(vec![0]));
        }
    }
}

#[test]
fn replicated_runs_are_bitwise_reproducible() {
    let exe = jit(&parse(COLLECTIVES));
    let a = exe.run_replicated(replica_inputs(4)).unwrap();
    for _ in 0..5 {
        let b = exe.run_replicated(replica_inputs(4)).unwrap();
        for r in 0..4 {
            assert_eq!(bytes(&a[r]), bytes(&b[r]), "replica {r}");
        }
    }
    // The sum is the replica-id-order sum ((y0 + y1) + y2) + y3, whatever the timing.
    let ys: Vec<Vec<f32>> = (0..4)
        .map(|r| {
            let x = replica_inputs(4)[r][0].as_array().unwrap().clone();
            f32_data(&x).iter().map(|v| v + r as f32).collect()
        })
        .collect();
    let expected: Vec<f32> = (0..8)
        .map(|i| ((ys[0][i] + ys[1][i]) + ys[2][i]) + ys[3][i])
        .collect();
    assert_eq!(f32_data(a[2].leaves()[0]), expected.as_slice());
}

#[test]
fn one_replica_runs_collectives_as_the_identity() {
    let m = parse(
        r#"
HloModule one
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[3] parameter(0)
  s = f32[3] all-reduce(x), replica_groups={}, to_apply=add
  g = f32[3] all-gather(s), dimensions={0}, replica_groups={}
  id = u32[] replica-id()
  ROOT t = (f32[3], u32[]) tuple(g, id)
}
"#,
    );
    let exe = jit(&m);
    let x = Literal::Array(f32s(&[3], vec![1.5, -2.0, 3.25]));
    let out = exe.run(std::slice::from_ref(&x)).unwrap();
    assert_eq!(out.leaves()[0], x.as_array().unwrap());
    assert_eq!(out.leaves()[1].data, ArrayData::U32(vec![0]));
    let rep = exe.run_replicated(vec![vec![x.clone()]]).unwrap();
    assert_eq!(rep[0], out);
}

/// An all-reduce inside a loop: replicas meet at every iteration.
const LOOPED: &str = r#"
HloModule looped
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(50)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  s = f32[4] all-reduce(x), replica_groups={}, to_apply=add
  q = f32[] constant(0.25)
  qb = f32[4] broadcast(q), dimensions={}
  m = f32[4] multiply(s, qb)
  ROOT r = (s32[], f32[4]) tuple(i2, m)
}
ENTRY main {
  x = f32[4] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT out = f32[4] get-tuple-element(w), index=1
}
"#;

fn looped_args(n: usize) -> Vec<Vec<Literal>> {
    (0..n)
        .map(|r| {
            vec![Literal::Array(f32s(
                &[4],
                vec![r as f32 * 0.3, 1.0, -0.5, 2.0],
            ))]
        })
        .collect()
}

fn assert_prompt(start: Instant) {
    let took = start.elapsed();
    assert!(took < Duration::from_secs(1), "stopping took {took:?}");
}

#[test]
fn a_loop_of_collectives_matches_the_interpreter() {
    let m = parse(LOOPED);
    let want = evaluate_replicated(&m, looped_args(4)).unwrap();
    let got = jit(&m).run_replicated(looped_args(4)).unwrap();
    for r in 0..4 {
        assert_eq!(bytes(&got[r]), bytes(&want[r]), "replica {r}");
    }
}

fn injected(replica: usize, at: u64, fault: Fault) -> ReplicaOptions {
    ReplicaOptions {
        inject: Some(Injection {
            replica,
            at_collective: at,
            fault,
        }),
        ..ReplicaOptions::default()
    }
}

#[test]
fn a_kernel_error_on_one_replica_stops_every_replica_naming_it() {
    let exe = jit(&parse(LOOPED));
    let start = Instant::now();
    let e = exe
        .run_replicated_with(looped_args(4), &injected(2, 17, Fault::KernelError))
        .unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica, Some(2), "{e}");
    assert!(
        e.message.contains("injected kernel error at collective 17"),
        "{e}"
    );
    assert!(e.to_string().starts_with("replica 2: "), "{e}");
    // The executable is still usable afterwards.
    assert!(exe.run_replicated(looped_args(4)).is_ok());
}

#[test]
fn a_panic_in_a_routine_or_on_a_replica_thread_stops_every_replica() {
    let exe = jit(&parse(LOOPED));
    let start = Instant::now();
    let e = exe
        .run_replicated_with(looped_args(4), &injected(0, 30, Fault::RoutinePanic))
        .unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica, Some(0), "{e}");
    assert!(e.message.contains("injected panic at collective 30"), "{e}");

    let start = Instant::now();
    let e = exe
        .run_replicated_with(looped_args(4), &injected(3, 0, Fault::ThreadPanic))
        .unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica, Some(3), "{e}");
    assert!(e.message.contains("panicked"), "{e}");
    assert!(exe.run_replicated(looped_args(4)).is_ok());
}

#[test]
fn a_failing_collective_stops_the_replicas_waiting_for_it() {
    // Replica 3 is in no group of the first all-reduce; 0, 1 and 2 pass it and wait for 3
    // at the second one.
    let m = parse(
        r#"
HloModule bad_groups
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[2] parameter(0)
  s = f32[2] all-reduce(x), replica_groups={{0,1,2}}, to_apply=add
  ROOT t = f32[2] all-reduce(s), replica_groups={}, to_apply=add
}
"#,
    );
    let exe = jit(&m);
    let args: Vec<Vec<Literal>> = (0..4)
        .map(|_| vec![Literal::Array(f32s(&[2], vec![1.0, 2.0]))])
        .collect();
    let start = Instant::now();
    let e = exe.run_replicated(args.clone()).unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica, Some(3), "{e}");
    assert!(e.message.contains("in no replica group"), "{e}");
    // The interpreter reports the same failure.
    let ie = evaluate_replicated(&m, args).unwrap_err();
    assert_eq!(ie.replica, Some(3));
}

#[test]
fn bad_arguments_on_one_replica_stop_the_others() {
    let exe = jit(&parse(LOOPED));
    let mut args = looped_args(4);
    args[1] = vec![Literal::Array(f32s(&[3], vec![1.0; 3]))];
    let start = Instant::now();
    let e = exe.run_replicated(args).unwrap_err();
    assert_prompt(start);
    assert_eq!(e.replica, Some(1), "{e}");
    assert!(e.message.contains("f32[4]"), "{e}");
    assert!(exe.run_replicated(Vec::new()).is_err());
}
