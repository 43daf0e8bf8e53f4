//! Compiled training loops of shard_map steps: the per-replica body loops on every replica, on
//! both backends, and a replica thread that fails early releases the others.

use super::training_loop::{
    assert_prompt, f32_data, f32s, jit_loop, make_loop, run_global, sgd_step,
};
use std::time::{Duration, Instant};
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::{Array, Literal, Module};
use tessel_runtime::feed::unstack;
use tessel_runtime::host_io::read_safetensors;
use tessel_runtime::session::{Device, LoopOptions, LoopProgram};

/// A shard_map step, its global inputs (by parameter number) and the stacked inputs for a
/// K-iteration loop feeding `fed` (iteration j's batch: the fixture's batch with its rows
/// rotated by j, so that iterations differ).
fn sharded_fixture(name: &str, k: usize, fed: &[u32]) -> (Module, Vec<Array>, Vec<Vec<Array>>) {
    let dir = tessel_tests::corpus_dir().expect("the corpus is missing");
    let step = parse_module_file(&dir.join(format!("{name}.hlo"))).unwrap();
    let mut inputs = read_safetensors(dir.join(format!("{name}.inputs.safetensors"))).unwrap();
    inputs.sort_by_key(|(key, _)| key.parse::<usize>().unwrap());
    let globals: Vec<Array> = inputs.into_iter().map(|(_, a)| a).collect();
    let batches: Vec<Vec<Array>> = (0..k)
        .map(|j| {
            globals
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    if !fed.contains(&(i as u32)) {
                        return a.clone();
                    }
                    let rows = unstack(a).unwrap();
                    let n = rows.len();
                    let rotated: Vec<Array> = (0..n).map(|r| rows[(r + j) % n].clone()).collect();
                    tessel_runtime::feed::stack(&rotated).unwrap()
                })
                .collect()
        })
        .collect();
    let mut looped = globals.clone();
    for &i in fed {
        let parts: Vec<Array> = batches.iter().map(|b| b[i as usize].clone()).collect();
        looped[i as usize] = tessel_runtime::feed::stack(&parts).unwrap();
    }
    (step, looped, batches)
}

/// K sharded runs of the step with `run` (global arguments to global outputs), the carried
/// state threaded by hand: the final state, then the per-iteration outputs stacked.
fn by_hand(
    batches: &[Vec<Array>],
    carried: &[usize],
    run: &dyn Fn(&[Array]) -> Vec<Array>,
) -> Vec<Array> {
    let mut state: Vec<Array> = carried.iter().map(|&i| batches[0][i].clone()).collect();
    let mut per_iteration: Vec<Vec<Array>> = Vec::new();
    for batch in batches {
        let mut args = batch.clone();
        for (s, &i) in state.iter().zip(carried) {
            args[i] = s.clone();
        }
        let out = run(&args);
        state = out[..carried.len()].to_vec();
        per_iteration.push(out[carried.len()..].to_vec());
    }
    let mut all = state;
    for o in 0..per_iteration[0].len() {
        let parts: Vec<Array> = per_iteration.iter().map(|p| p[o].clone()).collect();
        all.push(tessel_runtime::feed::stack(&parts).unwrap());
    }
    all
}

#[test]
fn a_shard_map_step_loops_on_four_replicas_on_both_backends() {
    let k = 3;
    let (step, looped, batches) = sharded_fixture("dp_tanh_regression_r4", k, &[1]);
    let want = by_hand(&batches, &[0], &|args| {
        run_global(&step, Device::interpreter().with_replicas(4), args)
    });
    for device in [Device::interpreter(), Device::jit()] {
        let backend = device.backend;
        let sl = make_loop(&step, k as u64, &[1], device.with_replicas(4));
        let got = sl.run_global(&looped, &LoopOptions::default()).unwrap();
        assert_eq!(got.len(), want.len());
        assert_eq!(got[1].shape.dims.as_slice(), &[k as i64], "stacked losses");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.shape, w.shape, "{backend:?}");
            for (a, b) in f32_data(g).iter().zip(f32_data(w)) {
                assert!(
                    (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                    "{backend:?}: {a} vs {b}"
                );
            }
        }
    }
}

/// The data-parallel CNN step looped twice on the JIT equals two sharded runs of the JIT's
/// compiled body, bitwise.
#[test]
fn the_data_parallel_cnn_step_loops_on_the_jit() {
    let k = 2;
    let (step, looped, batches) = sharded_fixture("dp_mnist_cnn_train_step_r4_b32", k, &[8, 9, 10]);
    let device = Device::jit().with_replicas(4);
    let sl = make_loop(&step, k as u64, &[8, 9, 10], device.clone());
    let got = sl.run_global(&looped, &LoopOptions::default()).unwrap();
    let carried: Vec<usize> = (0..8).collect();
    let want = by_hand(&batches, &carried, &|args| {
        run_global(&step, device.clone(), args)
    });
    assert_eq!(got, want);
}

/// A replica thread that panics before running releases the replicas waiting on the feed (no
/// data ever comes here): the feed abort wakes them, not only the collective hub's poison.
#[test]
fn a_panicking_replica_thread_releases_replicas_waiting_on_the_infeed() {
    use tessel_runtime::replicas::{Fault, Injection, ReplicaOptions};
    // Leaked so that a hang (the bug this catches) fails the test instead of blocking it.
    let lp: &'static LoopProgram = Box::leak(Box::new(jit_loop(&sgd_step(None), 3, &[1], 4)));
    let (queues, rx) = tessel_runtime::feed::HostQueues::new(4, 2);
    let queues: &'static tessel_runtime::feed::HostQueues = Box::leak(Box::new(queues));
    let args = (0..4)
        .map(|_| vec![Literal::Array(f32s(&[4], vec![1.0; 4]))])
        .collect();
    let options = ReplicaOptions {
        inject: Some(Injection {
            replica: 1,
            at_collective: 0,
            fault: Fault::ThreadPanic,
        }),
        ..ReplicaOptions::default()
    };
    let (tx, done) = std::sync::mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        let out = lp
            .executable()
            .unwrap()
            .run_replicated_fed(args, queues, &options);
        let _ = tx.send(out);
    });
    let e = done
        .recv_timeout(Duration::from_secs(5))
        .expect("replicas waiting on the infeed never stopped")
        .unwrap_err();
    drop(rx);
    assert_prompt(start);
    assert_eq!(e.replica, Some(1), "{e}");
    assert!(e.message.contains("panicked"), "{e}");
    let (r, why) = queues.aborted().expect("the feed was aborted");
    assert_eq!(r, 1, "{why}");
}
