//! CrossShardOptimizer: 2 replicas with MEAN give the update of 1 replica on the
//! concatenated batch; SUM doubles it; groups sum within themselves; TF's errors for bad
//! groups and for training on several replicas without it; bitwise determinism.

use crate::support::{assert_close, f32_array, f32s, finish, finish_for_loop, F32};
use tessel_compiler::ir::Array;
use tessel_estimator::model::cross_shard::verify_group_assignment;
use tessel_estimator::model::optimizers::{Adam, GradientDescent};
use tessel_estimator::model::{
    CrossShardError, CrossShardOptimizer, Graph, Initializer, Mode, Optimizer, OptimizerError,
    Reduction,
};
use tessel_runtime::session::Device;

const ROWS: [[f64; 3]; 8] = [
    [1.0, 2.0, -1.0],
    [0.5, -1.5, 2.0],
    [-2.0, 0.25, 1.0],
    [1.5, 1.0, 0.5],
    [0.0, 1.0, 1.0],
    [-1.0, 0.5, -0.5],
    [2.0, -1.0, 0.25],
    [0.75, 0.5, -2.0],
];
const YS: [f64; 8] = [1.0, -2.0, 0.5, 3.0, -1.0, 0.25, 2.0, -0.5];

fn linear_graph(batch: i64, num_shards: usize) -> (Graph, tessel_compiler::trace::Tensor) {
    let mut g = Graph::new("linear", Mode::Train, None);
    g.set_num_shards(num_shards);
    let x = g.tracer.parameter("x", &[batch, 3], F32);
    let y = g.tracer.parameter("y", &[batch, 1], F32);
    let w0 = Initializer::Value(f32_array(&[3, 1], &[0.5, -1.0, 2.0]));
    let w = g.variables.push(&mut g.tracer, "w", &[3, 1], F32, w0, true);
    let b0 = Initializer::Value(f32_array(&[1], &[0.3]));
    let b = g.variables.push(&mut g.tracer, "b", &[1], F32, b0, true);
    let (w, b) = (
        g.variables.get(w).tensor.clone(),
        g.variables.get(b).tensor.clone(),
    );
    let r = x.matmul(&w) + &b - &y;
    (g, (&r * &r).reduce_mean(&[], false))
}

fn data(range: std::ops::Range<usize>) -> Vec<Array> {
    let n = range.len() as i64;
    let flat: Vec<f64> = ROWS[range.clone()].iter().flatten().copied().collect();
    vec![f32_array(&[n, 3], &flat), f32_array(&[n, 1], &YS[range])]
}

fn flat(vars: &[Array]) -> Vec<f64> {
    vars[..2].iter().flat_map(f32s).collect()
}

/// One replica, `opt` on rows `range`, 3 steps: w and b.
fn single<O: Optimizer>(opt: O, range: std::ops::Range<usize>) -> Vec<f64> {
    let (mut g, loss) = linear_graph(range.len() as i64, 1);
    opt.minimize(&mut g, &loss).unwrap();
    let (history, _) = finish(g).run(Device::interpreter(), &data(range), 3);
    flat(&history[2])
}

/// `shards.len()` replicas, replica r on rows `shards[r]`, 3 steps: each replica's w and b.
fn replicated<O: Optimizer>(
    device: Device,
    opt: CrossShardOptimizer<O>,
    shards: &[std::ops::Range<usize>],
) -> Vec<Vec<Array>> {
    let (mut g, loss) = linear_graph(shards[0].len() as i64, shards.len());
    let train_op = opt.minimize(&mut g, &loss).unwrap();
    assert!(train_op.is_cross_shard());
    train_op.validate_for_replicas(shards.len()).unwrap();
    let feeds: Vec<Vec<Array>> = shards.iter().map(|r| data(r.clone())).collect();
    finish(g).run_replicated(device, &feeds, 3)
}

#[test]
fn two_replicas_mean_equal_one_replica_on_the_whole_batch() {
    for device in [Device::interpreter(), Device::jit()] {
        let want = single(GradientDescent::new(0.1), 0..8);
        let opt = CrossShardOptimizer::new(GradientDescent::new(0.1));
        let out = replicated(device.clone(), opt, &[0..4, 4..8]);
        for (r, vars) in out.iter().enumerate() {
            assert_close(&format!("replica {r}"), &flat(vars), &want, 1e-5);
        }
        let want = single(Adam::new(0.01), 0..8);
        let out = replicated(
            device,
            CrossShardOptimizer::new(Adam::new(0.01)),
            &[0..4, 4..8],
        );
        for (r, vars) in out.iter().enumerate() {
            assert_close(&format!("Adam replica {r}"), &flat(vars), &want, 1e-5);
        }
    }
}

#[test]
fn sum_reduction_adds_the_replicas_gradients() {
    // Each replica's loss is a mean over 4 rows; summing two gives twice the gradient of the
    // mean over 8, so SUM with lr matches one replica with 2 * lr.
    let want = single(GradientDescent::new(0.2), 0..8);
    let opt = CrossShardOptimizer::new(GradientDescent::new(0.1)).with_reduction(Reduction::Sum);
    for vars in replicated(Device::jit(), opt, &[0..4, 4..8]) {
        assert_close("SUM", &flat(&vars), &want, 1e-5);
    }
}

#[test]
fn groups_reduce_within_themselves_and_mean_divides_by_the_group_size() {
    // Replicas 0 and 2 share rows 0..4, 1 and 3 rows 4..8 (half each).
    let groups = vec![vec![0, 2], vec![3, 1]];
    let opt = CrossShardOptimizer::new(GradientDescent::new(0.1)).with_group_assignment(groups);
    let out = replicated(Device::interpreter(), opt, &[0..2, 4..6, 2..4, 6..8]);
    let a = single(GradientDescent::new(0.1), 0..4);
    let b = single(GradientDescent::new(0.1), 4..8);
    assert_close("group {0,2}", &flat(&out[0]), &a, 1e-5);
    assert_close("group {0,2}", &flat(&out[2]), &a, 1e-5);
    assert_close("group {1,3}", &flat(&out[1]), &b, 1e-5);
    assert_close("group {1,3}", &flat(&out[3]), &b, 1e-5);
}

#[test]
fn replicated_training_is_bitwise_deterministic() {
    let run = || {
        let opt = CrossShardOptimizer::new(Adam::new(0.01));
        replicated(Device::jit(), opt, &[0..2, 2..4, 4..6, 6..8])
    };
    let (a, b) = (run(), run());
    let bytes = |vars: &[Array]| {
        vars.iter()
            .map(|v| v.data.to_le_bytes())
            .collect::<Vec<_>>()
    };
    assert_eq!(bytes(&a[0]), bytes(&b[0]), "two runs differ");
    for r in 1..4 {
        assert_eq!(
            bytes(&a[r]),
            bytes(&a[0]),
            "replica {r} differs from replica 0"
        );
    }
}

#[test]
fn bad_group_assignments_give_tfs_errors() {
    let err = verify_group_assignment(&[vec![0, 1], vec![2]], 3).unwrap_err();
    assert_eq!(
        err.to_string(),
        "The size of each subgroup in `group_assignment` must be equal. Received: [[0, 1], [2]]"
    );
    let err = verify_group_assignment(&[vec![0, 1], vec![2, 5]], 4).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Argument `group_assignment` must be a permutation of range(4). Received: [[0, 1], [2, 5]]"
    );
    let repeated = verify_group_assignment(&[vec![0, 1], vec![1, 0]], 2).unwrap_err();
    assert!(matches!(
        repeated,
        CrossShardError::NotPermutation { num_shards: 2, .. }
    ));
    let missing = verify_group_assignment(&[vec![0], vec![1]], 3).unwrap_err();
    assert!(matches!(
        missing,
        CrossShardError::NotPermutation { num_shards: 3, .. }
    ));
    assert_eq!(verify_group_assignment(&[], 8), Ok(None));
    assert_eq!(
        verify_group_assignment(&[vec![1, 0], vec![3, 2]], 4),
        Ok(Some(2))
    );

    // Through minimize, before anything is traced.
    let (mut g, loss) = linear_graph(4, 2);
    let opt = CrossShardOptimizer::new(GradientDescent::new(0.1))
        .with_group_assignment(vec![vec![0, 1, 2]]);
    let err = opt.minimize(&mut g, &loss).unwrap_err();
    assert!(matches!(
        err,
        OptimizerError::CrossShard(CrossShardError::NotPermutation { .. })
    ));
}

#[test]
fn training_on_replicas_without_cross_shard_is_tfs_error() {
    let (mut g, loss) = linear_graph(4, 2);
    let train_op = GradientDescent::new(0.1).minimize(&mut g, &loss).unwrap();
    assert!(!train_op.is_cross_shard());
    assert_eq!(train_op.validate_for_replicas(1), Ok(()));
    let err = train_op.validate_for_replicas(2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "CrossShardOptimizer must be used for model training on TPUs."
    );
}

#[test]
fn one_replica_with_cross_shard_is_plain_training() {
    let want = single(GradientDescent::new(0.1), 0..4);
    let opt = CrossShardOptimizer::new(GradientDescent::new(0.1));
    #[allow(clippy::single_range_in_vec_init)] // one replica's rows
    let one_shard = [0..4];
    let out = replicated(Device::jit(), opt, &one_shard);
    assert_close("1 replica", &flat(&out[0]), &want, 1e-6);
}

/// The CrossShardOptimizer step as the estimator will run it: `K` iterations in one
/// compiled `while` loop on 2 JIT replicas, each fed its own half of the batch through
/// infeed, with the global step and variables carried; equal to `K` single steps.
#[test]
fn the_cross_shard_step_runs_as_a_compiled_loop_on_two_replicas() {
    use tessel_runtime::feed::stacked_source;
    use tessel_runtime::session::{compile_loop, LoopOptions, LoopSpec, Outfeed};

    const K: usize = 3;
    let (mut g, loss) = linear_graph(4, 2);
    CrossShardOptimizer::new(Adam::new(0.01))
        .minimize(&mut g, &loss)
        .unwrap();
    // The loop's contract: carried outputs first, in parameter order (step, then variables).
    let step = finish_for_loop(g);
    let spec = LoopSpec {
        iterations: K as u64,
        infeed: vec![1, 2],
    };
    let lp = compile_loop(&step.module, &spec, &Device::jit().with_replicas(2)).unwrap();
    let stack = |a: &Array| {
        let mut dims = vec![K as i64];
        dims.extend(a.shape.dims.iter());
        let values: Vec<f32> = (0..K).flat_map(|_| f32s(a)).map(|v| v as f32).collect();
        Array::f32(&dims, values)
    };
    let sources = [0..4, 4..8]
        .into_iter()
        .map(|r| stacked_source(data(r).iter().map(stack).collect()).unwrap())
        .collect();
    let mut state = vec![Array::scalar_s32(0)];
    state.extend(step.initial.iter().cloned());
    let out = lp
        .run_fed(
            vec![state.clone(), state],
            sources,
            Outfeed::Collect,
            &LoopOptions::default(),
        )
        .unwrap();
    let stepped = replicated(
        Device::jit(),
        CrossShardOptimizer::new(Adam::new(0.01)),
        &[0..4, 4..8],
    );
    for (r, (carried, stepped)) in out.carried.iter().zip(&stepped).enumerate() {
        assert_eq!(carried[0].data.get_i64(0), K as i64, "global step");
        for (k, (a, b)) in carried[1..].iter().zip(stepped).enumerate() {
            assert_close(
                &format!("replica {r} variable {}", step.names[k]),
                &f32s(a),
                &f32s(b),
                1e-6,
            );
        }
    }
}
