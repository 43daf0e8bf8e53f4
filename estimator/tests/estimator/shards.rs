//! Two shards (`num_shards: 2`, `use_tpu`) with CrossShardOptimizer: each shard gets half
//! the global batch, training learns and is bitwise reproducible, and evaluation hands
//! `metric_fn` both shards' outfed tensors concatenated in replica order.

use crate::support::tiny::{self, ckpt_bytes, config, temp_dir, FEATURES};
use std::sync::{Arc, Mutex};
use tessel_compiler::trace::Tensor;
use tessel_estimator::checkpoint::read_checkpoint;
use tessel_estimator::estimator::{EvalMetrics, Features, HostTensors};
use tessel_estimator::metrics::MetricSet;
use tessel_estimator::{
    EstimatorError, Graph, Mode, Params, RunConfig, TpuConfig, TpuEstimator, TpuEstimatorSpec,
};

fn two_shards(dir: &std::path::Path) -> RunConfig {
    RunConfig {
        tpu_config: TpuConfig {
            num_shards: Some(2),
            iterations_per_loop: 20,
            ..TpuConfig::default()
        },
        ..config(dir, 20, 1000)
    }
}

type Seen = Arc<Mutex<Vec<(Mode, Vec<i64>)>>>;

/// The tiny model_fn, recording the features' shape per mode, and in EVAL a metric_fn that
/// also records every `labels` array it is handed.
fn recording_model(
    seen: Seen,
    labels_seen: Arc<Mutex<Vec<i32>>>,
) -> impl Fn(
    &mut Graph,
    &Features,
    Option<&Tensor>,
    Mode,
    &Params,
) -> Result<TpuEstimatorSpec, EstimatorError>
       + Send
       + Sync
       + 'static {
    move |g, features, labels, mode, params| {
        seen.lock().unwrap().push((
            mode,
            features["x"]
                .shape()
                .map(|s| s.dims.to_vec())
                .unwrap_or_default(),
        ));
        let mut spec = tiny::model_fn(g, features, labels, mode, params)?;
        if let Some(m) = spec.eval_metrics.take() {
            let inner = m.metric_fn;
            let record = Arc::clone(&labels_seen);
            spec.eval_metrics = Some(EvalMetrics {
                metric_fn: Box::new(move |set: &mut MetricSet, t: &HostTensors| {
                    // The labels of real examples (not the all-padding batch the
                    // metric_fn is checked on when the model_fn is traced).
                    let l = &t["labels"];
                    let mask = t.mask().expect("evaluate gives a mask");
                    record.lock().unwrap().extend(
                        (0..l.len())
                            .filter(|&i| mask.data.get_f64(i) == 1.0)
                            .map(|i| l.data.get_i64(i) as i32),
                    );
                    inner(set, t)
                }),
                tensors: m.tensors,
            });
        }
        Ok(spec)
    }
}

/// The model's predictions on the host from a checkpoint's variables (f64).
fn host_accuracy(dir: &std::path::Path, step: i64) -> f64 {
    let c = read_checkpoint(&dir.join(format!("model.ckpt-{step}.safetensors"))).unwrap();
    let var = |n: &str| -> Vec<f64> {
        let a = &c.variables.iter().find(|(name, _)| name == n).unwrap().1;
        (0..a.len()).map(|i| a.data.get_f64(i)).collect()
    };
    let (w1, b1, w2, b2) = (
        var("dense/kernel"),
        var("dense/bias"),
        var("dense_1/kernel"),
        var("dense_1/bias"),
    );
    let hidden = b1.len();
    let classes = b2.len();
    let (x, y) = tiny::data();
    let mut hits = 0;
    for (row, &label) in x.chunks(FEATURES).zip(&y) {
        let h: Vec<f64> = (0..hidden)
            .map(|j| {
                let s: f64 = (0..FEATURES)
                    .map(|i| row[i] as f64 * w1[i * hidden + j])
                    .sum();
                (s + b1[j]).max(0.0)
            })
            .collect();
        let logits: Vec<f64> = (0..classes)
            .map(|c| (0..hidden).map(|j| h[j] * w2[j * classes + c]).sum::<f64>() + b2[c])
            .collect();
        let class = (0..classes)
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
            .unwrap();
        hits += (class as i32 == label) as usize;
    }
    hits as f64 / y.len() as f64
}

#[test]
fn two_shards_train_reproducibly_and_evaluate_in_replica_order() {
    let dir = temp_dir("shards_a");
    let seen: Seen = Arc::default();
    let labels_seen: Arc<Mutex<Vec<i32>>> = Arc::default();
    let batch_seen: Arc<Mutex<Vec<usize>>> = Arc::default();
    let p = Params::new().with("learning_rate", 0.05);
    let est = TpuEstimator::new(
        recording_model(Arc::clone(&seen), Arc::clone(&labels_seen)),
        two_shards(&dir),
        p.clone(),
        true,
        8,
        Some(8),
        None,
    )
    .unwrap()
    .quiet();
    assert_eq!(est.replicas(), 2);
    let bs = Arc::clone(&batch_seen);
    let before = est.evaluate(tiny::eval_input, Some(12)).unwrap();
    let r = est
        .train(
            move |params: &Params| {
                bs.lock().unwrap().push(params.batch_size());
                tiny::train_input(params)
            },
            None,
            Some(300),
        )
        .unwrap();
    // Per-shard batch: params["batch_size"] and the traced features are half the global 8.
    assert_eq!(*batch_seen.lock().unwrap(), vec![4]);
    for (mode, dims) in seen.lock().unwrap().iter() {
        assert_eq!(dims, &vec![4, FEATURES as i64], "{mode:?}");
    }

    labels_seen.lock().unwrap().clear();
    let after = est.evaluate(tiny::eval_input, Some(12)).unwrap();
    // It learns.
    assert!(
        after.loss < 0.5 * before.loss,
        "eval loss {} -> {} (train's final {:?})",
        before.loss,
        after.loss,
        r.final_loss
    );
    // Both shards' tensors reach metric_fn concatenated in replica order: batch j of the
    // dataset (4 examples) went to shard j % 2, so the labels come back in dataset order.
    assert_eq!(after.examples, 96);
    let (_, y) = tiny::data();
    assert_eq!(*labels_seen.lock().unwrap(), y);
    let mean = y.iter().map(|&v| v as f64).sum::<f64>() / y.len() as f64;
    assert!((after.metric("label_mean").unwrap() - mean).abs() < 1e-6);
    let host = host_accuracy(&dir, 300);
    assert!(
        (after.metric("accuracy").unwrap() - host).abs() < 1e-9,
        "device {:?} vs host {host}",
        after.metric("accuracy")
    );
    assert!(host > 0.8, "accuracy {host}");

    // Bitwise reproducible: a second run writes the same checkpoint.
    let dir_b = temp_dir("shards_b");
    let est_b = TpuEstimator::new(
        tiny::model_fn,
        two_shards(&dir_b),
        p,
        true,
        8,
        Some(8),
        None,
    )
    .unwrap()
    .quiet();
    est_b.train(tiny::train_input, None, Some(300)).unwrap();
    assert!(ckpt_bytes(&dir, 300) == ckpt_bytes(&dir_b, 300));
}

/// Regression: with `per_host_input_for_training: PerShard` every shard's input_fn call got
/// the same params, so no input_fn could tell which shard it fed and every shard trained on
/// the same batches. Now `params["context"]` is the shard index: per-shard inputs that take
/// every other batch train exactly as one per-host input dealt to the shards in turn.
#[test]
fn per_shard_input_fns_get_their_shard_index() {
    use tessel_estimator::config::InputPipelineConfig;
    let contexts: Arc<Mutex<Vec<Option<i64>>>> = Arc::default();
    let per_shard_dir = temp_dir("per_shard");
    let mut c = two_shards(&per_shard_dir);
    c.tpu_config.per_host_input_for_training = InputPipelineConfig::PerShard;
    let est = TpuEstimator::new(tiny::model_fn, c, Params::new(), true, 8, None, None)
        .unwrap()
        .quiet();
    let seen = Arc::clone(&contexts);
    est.train(
        move |params: &Params| {
            let index = params.get("context").and_then(|p| p.as_i64());
            seen.lock().unwrap().push(index);
            per_shard_input(params)
        },
        None,
        Some(60),
    )
    .unwrap();
    assert_eq!(*contexts.lock().unwrap(), vec![Some(0), Some(1)]);

    let per_host_dir = temp_dir("per_host");
    let est = TpuEstimator::new(
        tiny::model_fn,
        two_shards(&per_host_dir),
        Params::new(),
        true,
        8,
        None,
        None,
    )
    .unwrap()
    .quiet();
    est.train(
        |params: &Params| {
            assert!(params.get("context").is_none());
            let ds = tiny::examples()
                .repeat(None)
                .batch(params.batch_size() as u64, true)?;
            Ok(tessel_estimator::Input::new(ds, "y"))
        },
        None,
        Some(60),
    )
    .unwrap();
    // The variables are equal; the input positions differ as they should (each
    // per-shard pipeline took 60 batches, the per-host one 120).
    let a = read_checkpoint(&per_shard_dir.join("model.ckpt-60.safetensors")).unwrap();
    let b = read_checkpoint(&per_host_dir.join("model.ckpt-60.safetensors")).unwrap();
    assert!(a.variables == b.variables);
    let batches = |c: &tessel_estimator::checkpoint::Checkpoint| c.input_state[0].1.data.get_i64(0);
    assert_eq!((batches(&a), batches(&b)), (60, 120));

    // Per-shard inputs resume exactly too: 30 then 60 equals 60 at once.
    let resumed_dir = temp_dir("per_shard_resumed");
    for max in [30, 60] {
        let mut c = two_shards(&resumed_dir);
        c.tpu_config.per_host_input_for_training = InputPipelineConfig::PerShard;
        TpuEstimator::new(tiny::model_fn, c, Params::new(), true, 8, None, None)
            .unwrap()
            .quiet()
            .train(per_shard_input, None, Some(max))
            .unwrap();
    }
    assert!(ckpt_bytes(&per_shard_dir, 60) == ckpt_bytes(&resumed_dir, 60));
}

/// Shard `params["context"]` of 2 reads batches i, i+2, ... of the examples (96 examples
/// make 24 batches of 4, an even number, so epochs line up with per-host dealing).
fn per_shard_input(params: &Params) -> Result<tessel_estimator::Input, EstimatorError> {
    let index = params.get("context").and_then(|p| p.as_i64());
    let ds = tiny::examples()
        .batch(params.batch_size() as u64, true)?
        .shard(2, index.unwrap_or(0) as u64)?
        .repeat(None);
    Ok(tessel_estimator::Input::new(ds, "y"))
}
