//! Collectives on replicas in threads: values, groups, determinism, and failure without deadlock.

use super::super::evaluate_replicated;
use super::*;
use crate::ir::CollectiveAttrs;

fn replicated(m: &Module, per_replica: Vec<Array>) -> Result<Vec<Array>, super::super::EvalError> {
    let args = per_replica
        .into_iter()
        .map(|a| vec![Literal::Array(a)])
        .collect();
    evaluate_replicated(m, args).map(|v| v.into_iter().map(|l| l.into_array().unwrap()).collect())
}

fn all_reduce_module(groups: Vec<Vec<i64>>, n: i64) -> Module {
    let mut b = ModuleBuilder::new();
    let add = b.binary_computation(BinaryOp::Add, ElementType::F32);
    let s = Shape::array(ElementType::F32, &[n]);
    let x = b.param(0, s.clone());
    let collective = CollectiveAttrs {
        replica_groups: groups,
        ..Default::default()
    };
    let r = b.op(
        Op::AllReduce {
            collective,
            to_apply: add,
        },
        s,
        &[x],
    );
    b.finish(r)
}

#[test]
fn all_reduce_sums_over_all_replicas_and_over_groups() {
    let inputs: Vec<Array> = (0..4)
        .map(|r| f32s(&[2], &[r as f32, 10.0 * r as f32]))
        .collect();
    let out = replicated(&all_reduce_module(vec![], 2), inputs.clone()).unwrap();
    for o in &out {
        assert_eq!(as_f32(o), &[6.0, 60.0]);
    }
    let out = replicated(&all_reduce_module(vec![vec![0, 2], vec![3, 1]], 2), inputs).unwrap();
    assert_eq!(as_f32(&out[0]), &[2.0, 20.0]);
    assert_eq!(as_f32(&out[1]), &[4.0, 40.0]);
    assert_eq!(as_f32(&out[2]), &[2.0, 20.0]);
    assert_eq!(as_f32(&out[3]), &[4.0, 40.0]);
}

#[test]
fn replicated_runs_are_bitwise_deterministic() {
    let m = all_reduce_module(vec![], 1000);
    let inputs: Vec<Array> = (0..4).map(|r| pseudo_random(&[1000], r)).collect();
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
    let f = ElementType::F32;
    let mut b = ModuleBuilder::new();
    let add = b.binary_computation(BinaryOp::Add, f);
    let x = b.param(0, Shape::array(f, &[2]));
    let gathered = b.op(
        Op::AllGather {
            collective: CollectiveAttrs::default(),
            dimension: 0,
        },
        Shape::array(f, &[6]),
        &[x],
    );
    let scattered = b.op(
        Op::ReduceScatter {
            collective: CollectiveAttrs::default(),
            dimension: 0,
            to_apply: add,
        },
        Shape::array(f, &[2]),
        &[gathered],
    );
    let permuted = b.op(
        Op::CollectivePermute {
            channel_id: None,
            source_target_pairs: vec![(0, 1), (1, 2)],
        },
        Shape::array(f, &[2]),
        &[x],
    );
    let id = b.op(Op::ReplicaId, Shape::scalar(ElementType::U32), &[]);
    let t = b.op(
        Op::Tuple,
        Shape::Tuple(vec![
            Shape::array(f, &[6]),
            Shape::array(f, &[2]),
            Shape::array(f, &[2]),
            Shape::scalar(ElementType::U32),
        ]),
        &[gathered, scattered, permuted, id],
    );
    let m = b.finish(t);
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
    let mut b = ModuleBuilder::new();
    let s = ElementType::S32;
    let f = ElementType::F32;
    let add = b.binary_computation(BinaryOp::Add, f);
    let state = Shape::Tuple(vec![Shape::scalar(s), Shape::scalar(f)]);
    let st = state.clone();
    let cond = b.computation("cond", move |b| {
        let p = b.param(0, st);
        let i = b.op(Op::GetTupleElement { index: 0 }, Shape::scalar(s), &[p]);
        let three = b.constant(Array::scalar_s32(3));
        b.op(
            Op::Compare {
                direction: crate::ir::ComparisonDirection::Lt,
                comparison_type: None,
            },
            Shape::scalar(ElementType::Pred),
            &[i, three],
        )
    });
    let st = state.clone();
    let body = b.computation("body", move |b| {
        let p = b.param(0, st.clone());
        let i = b.op(Op::GetTupleElement { index: 0 }, Shape::scalar(s), &[p]);
        let x = b.op(Op::GetTupleElement { index: 1 }, Shape::scalar(f), &[p]);
        let one = b.constant(Array::scalar_s32(1));
        let i2 = b.op(Op::Binary(BinaryOp::Add), Shape::scalar(s), &[i, one]);
        let x2 = b.op(
            Op::AllReduce {
                collective: CollectiveAttrs::default(),
                to_apply: add,
            },
            Shape::scalar(f),
            &[x],
        );
        b.op(Op::Tuple, st, &[i2, x2])
    });
    let x = b.param(0, Shape::scalar(f));
    let zero = b.constant(Array::scalar_s32(0));
    let init = b.op(Op::Tuple, state.clone(), &[zero, x]);
    let w = b.op(
        Op::While {
            condition: cond,
            body,
        },
        state,
        &[init],
    );
    let r = b.op(Op::GetTupleElement { index: 1 }, Shape::scalar(f), &[w]);
    let m = b.finish(r);
    let out = replicated(&m, vec![Array::scalar_f32(1.0), Array::scalar_f32(2.0)]).unwrap();
    assert_eq!(as_f32(&out[0]), &[12.0]);
    assert_eq!(as_f32(&out[1]), &[12.0]);
}

#[test]
fn a_failing_replica_stops_the_others_instead_of_deadlocking() {
    // Replica 2 gets an argument of the wrong shape; the others wait at the all-reduce and must stop.
    let mut b = ModuleBuilder::new();
    let f = ElementType::F32;
    let add = b.binary_computation(BinaryOp::Add, f);
    let x = b.param(0, Shape::array(f, &[2]));
    let r = b.op(
        Op::AllReduce {
            collective: CollectiveAttrs::default(),
            to_apply: add,
        },
        Shape::array(f, &[2]),
        &[x],
    );
    let m = b.finish(r);
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
    let m = all_reduce_module(vec![vec![0, 5]], 1);
    let e = replicated(&m, vec![f32s(&[1], &[1.]), f32s(&[1], &[2.])]).unwrap_err();
    assert!(e.message.contains("names replica 5"), "{e}");
}

#[test]
fn single_replica_collectives_are_identity() {
    let m = all_reduce_module(vec![], 2);
    assert_eq!(as_f32(&run_array(&m, &[f32s(&[2], &[1., 2.])])), &[1., 2.]);
}
