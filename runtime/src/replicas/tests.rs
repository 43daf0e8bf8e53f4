//! The interpreter on replicas in threads: collective values and groups, determinism,
//! collectives in loops, failure without deadlock, and the gradient of an all-reduce.

use super::evaluate_replicated;
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::{evaluate, EvalError};
use tessel_compiler::ir::{Array, ArrayData, Literal, Module};

fn parse(text: &str) -> Module {
    parse_module(text, None).unwrap_or_else(|e| panic!("{e}"))
}

fn f32s(dims: &[i64], v: &[f32]) -> Array {
    Array::f32(dims, v.to_vec())
}

fn as_f32(a: &Array) -> &[f32] {
    match &a.data {
        ArrayData::F32(v) => v,
        other => panic!("expected f32, got {:?}", other.element_type()),
    }
}

/// A deterministic pseudo-random f32 array in [-1, 1).
fn pseudo_random(n: i64, seed: u64) -> Array {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let v = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Array::f32(&[n], v)
}

fn replicated(m: &Module, per_replica: Vec<Array>) -> Result<Vec<Array>, EvalError> {
    let args = per_replica
        .into_iter()
        .map(|a| vec![Literal::Array(a)])
        .collect();
    evaluate_replicated(m, args).map(|v| v.into_iter().map(|l| l.into_array().unwrap()).collect())
}

/// `all-reduce(x)` summing over `groups` (HLO text, e.g. `{}` or `{{0,2},{3,1}}`).
fn all_reduce_module(groups: &str, n: i64) -> Module {
    parse(&format!(
        "HloModule all_reduce

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY main {{
  x = f32[{n}] parameter(0)
  ROOT r = f32[{n}] all-reduce(x), replica_groups={groups}, to_apply=add
}}
"
    ))
}

#[test]
fn all_reduce_sums_over_all_replicas_and_over_groups() {
    let inputs: Vec<Array> = (0..4)
        .map(|r| f32s(&[2], &[r as f32, 10.0 * r as f32]))
        .collect();
    let out = replicated(&all_reduce_module("{}", 2), inputs.clone()).unwrap();
    for o in &out {
        assert_eq!(as_f32(o), &[6.0, 60.0]);
    }
    let out = replicated(&all_reduce_module("{{0,2},{3,1}}", 2), inputs).unwrap();
    assert_eq!(as_f32(&out[0]), &[2.0, 20.0]);
    assert_eq!(as_f32(&out[1]), &[4.0, 40.0]);
    assert_eq!(as_f32(&out[2]), &[2.0, 20.0]);
    assert_eq!(as_f32(&out[3]), &[4.0, 40.0]);
}

#[test]
fn replicated_runs_are_bitwise_deterministic() {
    let m = all_reduce_module("{}", 1000);
    let inputs: Vec<Array> = (0..4).map(|r| pseudo_random(1000, r)).collect();
    let a = replicated(&m, inputs.clone()).unwrap();
    let b = replicated(&m, inputs).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.data.to_le_bytes(), y.data.to_le_bytes());
    }
    for x in &a[1..] {
        assert_eq!(
            x.data.to_le_bytes(),
            a[0].data.to_le_bytes(),
            "replicas differ"
        );
    }
}

#[test]
fn all_gather_reduce_scatter_permute_and_replica_id() {
    let m = parse(
        "HloModule mixed

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[2] parameter(0)
  gathered = f32[6] all-gather(x), dimensions={0}, replica_groups={}
  scattered = f32[2] reduce-scatter(gathered), dimensions={0}, replica_groups={}, to_apply=add
  permuted = f32[2] collective-permute(x), source_target_pairs={{0,1},{1,2}}
  id = u32[] replica-id()
  ROOT t = (f32[6], f32[2], f32[2], u32[]) tuple(gathered, scattered, permuted, id)
}
",
    );
    let args = (0..3)
        .map(|r| vec![Literal::Array(f32s(&[2], &[r as f32, r as f32 + 0.5]))])
        .collect();
    let out = evaluate_replicated(&m, args).unwrap();
    for (r, o) in out.iter().enumerate() {
        let l = o.leaves();
        assert_eq!(as_f32(l[0]), &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
        // Each replica gets its third of 3 * gathered.
        let third: Vec<f32> = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5][2 * r..2 * r + 2]
            .iter()
            .map(|v| v * 3.0)
            .collect();
        assert_eq!(as_f32(l[1]), &third[..]);
        let want_perm = match r {
            0 => vec![0.0, 0.0],
            1 => vec![0.0, 0.5],
            _ => vec![1.0, 1.5],
        };
        assert_eq!(as_f32(l[2]), &want_perm[..]);
        assert_eq!(l[3].data, ArrayData::U32(vec![r as u32]));
    }
}

#[test]
fn collectives_inside_a_loop_meet_once_per_iteration() {
    // while (i < 3) { x = all-reduce(x) } on 2 replicas: x doubles (summed over 2) each time.
    let m = parse(
        "HloModule looped

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

cond {
  p = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}

body {
  p = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[] all-reduce(x), replica_groups={}, to_apply=add
  ROOT t = (s32[], f32[]) tuple(i2, x2)
}

ENTRY main {
  x = f32[] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[]) tuple(zero, x)
  w = (s32[], f32[]) while(init), condition=cond, body=body
  ROOT r = f32[] get-tuple-element(w), index=1
}
",
    );
    let out = replicated(&m, vec![Array::scalar_f32(1.0), Array::scalar_f32(2.0)]).unwrap();
    assert_eq!(as_f32(&out[0]), &[12.0]);
    assert_eq!(as_f32(&out[1]), &[12.0]);
}

#[test]
fn a_failing_replica_stops_the_others_instead_of_deadlocking() {
    // Replica 2 gets an argument of the wrong shape; the others wait at the all-reduce and must stop.
    let m = all_reduce_module("{}", 2);
    let mut args: Vec<Vec<Literal>> = (0..4)
        .map(|_| vec![Literal::Array(f32s(&[2], &[1., 2.]))])
        .collect();
    args[2] = vec![Literal::Array(f32s(&[3], &[1., 2., 3.]))];
    let e = evaluate_replicated(&m, args).unwrap_err();
    assert_eq!(e.replica, Some(2), "{e}");
    assert!(e.message.contains("f32[2]"), "{e}");
}

#[test]
fn a_group_naming_a_missing_replica_is_an_error() {
    let m = all_reduce_module("{{0,5}}", 1);
    let e = replicated(&m, vec![f32s(&[1], &[1.]), f32s(&[1], &[2.])]).unwrap_err();
    assert!(e.message.contains("names replica 5"), "{e}");
}

#[test]
fn single_replica_collectives_are_identity() {
    let m = all_reduce_module("{}", 2);
    let out = evaluate(&m, &[Literal::Array(f32s(&[2], &[1., 2.]))]).unwrap();
    assert_eq!(as_f32(out.as_array().unwrap()), &[1., 2.]);
}

#[test]
fn all_reduce_sum_transposes_to_an_all_reduce_sum_like_psum() {
    // loss = sum(all-reduce(x * x)) on 2 replicas: the sum over both replicas' losses, so
    // d/dx_r = 2 replicas * 2 x_r.
    let m = parse(
        "HloModule psum

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[3] parameter(0)
  sq = f32[3] multiply(x, x)
  summed = f32[3] all-reduce(sq), replica_groups={}, to_apply=add
  zero = f32[] constant(0)
  ROOT loss = f32[] reduce(summed, zero), dimensions={0}, to_apply=add
}
",
    );
    let grad = tessel_compiler::autodiff::grad_module(&m, &[0]).unwrap();
    tessel_compiler::verifier::verify(&grad).unwrap_or_else(|e| panic!("{e:?}"));
    let xs = [[1.0f32, -2.0, 0.5], [3.0, 0.25, -1.0]];
    let args: Vec<Vec<Literal>> = xs
        .iter()
        .map(|v| vec![Literal::Array(Array::f32(&[3], v.to_vec()))])
        .collect();
    let outs = evaluate_replicated(&grad, args).unwrap();
    for (r, out) in outs.iter().enumerate() {
        let g = out.as_tuple().unwrap()[1].as_array().unwrap();
        for (i, &x) in xs[r].iter().enumerate() {
            assert_eq!(g.data.get_f64(i), 4.0 * x as f64, "replica {r} element {i}");
        }
    }
}
