//! A run's collectives reuse their buffers from step to step (the hub's spare arrays): a loop
//! whose all-reduces of different sizes and element types alternate, and the same program run
//! again with another replica count, must give bitwise the values worked out here step by
//! step, on the JIT and the interpreter. A stale or mismatched spare would show as a wrong
//! element.

use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Literal, Module};
use tessel_runtime::jit::{compile, JitOptions};
use tessel_runtime::replicas::evaluate_replicated;

const STEPS: usize = 7;

/// Each step: `a = 0.5 * sum(a + r)` (f32[6]), `b = sum(b + r)` (s32[6]: the same count as
/// `a`, another type), `c = max(c + r) - 1.5` (f32[3]: another size), over all replicas.
const ALTERNATING: &str = r#"
HloModule alternating
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
addi {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] maximum(x, y)
}
cond {
  p = (s32[], f32[6], s32[6], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(7)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[6], s32[6], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  a = f32[6] get-tuple-element(p), index=1
  b = s32[6] get-tuple-element(p), index=2
  c = f32[3] get-tuple-element(p), index=3
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  id = u32[] replica-id()
  idi = s32[] convert(id)
  idf = f32[] convert(id)
  ra = f32[6] broadcast(idf), dimensions={}
  ya = f32[6] add(a, ra)
  sa = f32[6] all-reduce(ya), replica_groups={}, to_apply=add
  h = f32[] constant(0.5)
  half = f32[6] broadcast(h), dimensions={}
  a2 = f32[6] multiply(sa, half)
  rb = s32[6] broadcast(idi), dimensions={}
  yb = s32[6] add(b, rb)
  b2 = s32[6] all-reduce(yb), replica_groups={}, to_apply=addi
  rc = f32[3] broadcast(idf), dimensions={}
  yc = f32[3] add(c, rc)
  mc = f32[3] all-reduce(yc), replica_groups={}, to_apply=max
  d = f32[] constant(1.5)
  down = f32[3] broadcast(d), dimensions={}
  c2 = f32[3] subtract(mc, down)
  ROOT r = (s32[], f32[6], s32[6], f32[3]) tuple(i2, a2, b2, c2)
}
ENTRY main {
  a = f32[6] parameter(0)
  b = s32[6] parameter(1)
  c = f32[3] parameter(2)
  z = s32[] constant(0)
  init = (s32[], f32[6], s32[6], f32[3]) tuple(z, a, b, c)
  w = (s32[], f32[6], s32[6], f32[3]) while(init), condition=cond, body=body
  oa = f32[6] get-tuple-element(w), index=1
  ob = s32[6] get-tuple-element(w), index=2
  oc = f32[3] get-tuple-element(w), index=3
  ROOT out = (f32[6], s32[6], f32[3]) tuple(oa, ob, oc)
}
"#;

fn parse(text: &str) -> Module {
    parse_module(text, None).unwrap_or_else(|e| panic!("{e}"))
}

/// Replica r's starting values (`a`'s sums depend on the order of addition).
fn start(r: usize) -> (Vec<f32>, Vec<i32>, Vec<f32>) {
    let a = (0..6)
        .map(|i| 0.1 * (i as f32 + 1.0) + 1e-7 * (r as f32 + 1.0) * 3.3 + 1e4 * (r % 2) as f32)
        .collect();
    let b = (0..6).map(|i| i * 7 - r as i32).collect();
    let c = (0..3).map(|i| i as f32 - 0.25 * r as f32).collect();
    (a, b, c)
}

fn args(n: usize) -> Vec<Vec<Literal>> {
    (0..n)
        .map(|r| {
            let (a, b, c) = start(r);
            vec![
                Literal::Array(Array::f32(&[6], a)),
                Literal::Array(Array::new(
                    ArrayShape::new(ElementType::S32, &[6]),
                    ArrayData::S32(b),
                )),
                Literal::Array(Array::f32(&[3], c)),
            ]
        })
        .collect()
}

/// The loop's result on `n` replicas, step by step in replica order (every replica's).
fn expected(n: usize) -> (Vec<f32>, Vec<i32>, Vec<f32>) {
    let mut state: Vec<_> = (0..n).map(start).collect();
    for _ in 0..STEPS {
        let (mut a, mut b, mut c) = (vec![0f32; 6], vec![0i32; 6], vec![0f32; 3]);
        for i in 0..6 {
            let mut s = state[0].0[i];
            let mut t = state[0].1[i];
            for (r, st) in state.iter().enumerate().skip(1) {
                s += st.0[i] + r as f32;
                t = t.wrapping_add(st.1[i].wrapping_add(r as i32));
            }
            a[i] = s * 0.5;
            b[i] = t;
        }
        for (i, c) in c.iter_mut().enumerate() {
            let m = state
                .iter()
                .enumerate()
                .map(|(r, st)| st.2[i] + r as f32)
                .fold(f32::NEG_INFINITY, f32::max);
            *c = m - 1.5;
        }
        state = vec![(a, b, c); n];
    }
    state.swap_remove(0)
}

fn check(got: &[Literal], n: usize, what: &str) {
    let (a, b, c) = expected(n);
    assert_eq!(got.len(), n, "{what}");
    for (r, out) in got.iter().enumerate() {
        let leaves = out.leaves();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        match (&leaves[0].data, &leaves[1].data, &leaves[2].data) {
            (ArrayData::F32(ga), ArrayData::S32(gb), ArrayData::F32(gc)) => {
                assert_eq!(bits(ga), bits(&a), "{what}: replica {r}'s a");
                assert_eq!(gb, &b, "{what}: replica {r}'s b");
                assert_eq!(bits(gc), bits(&c), "{what}: replica {r}'s c");
            }
            other => panic!("{what}: unexpected result types {other:?}"),
        }
    }
}

#[test]
fn alternating_collectives_of_other_sizes_and_types_give_the_worked_out_bits() {
    let m = parse(ALTERNATING);
    let exe = compile(&m, &JitOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    // The same program on 2, then 3, then 2 replicas again: each run's spares fit its own.
    for n in [2, 3, 2] {
        let got = exe.run_replicated(args(n)).unwrap();
        check(&got, n, &format!("JIT on {n} replicas"));
    }
    for n in [3, 2] {
        let got = evaluate_replicated(&m, args(n)).unwrap();
        check(&got, n, &format!("interpreter on {n} replicas"));
    }
}
