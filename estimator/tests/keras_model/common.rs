//! Reading a fixture and running its model through `model_to_estimator_from_parts`.

use std::path::{Path, PathBuf};
use tessel_compiler::ir::Array;
use tessel_estimator::config::{RunConfig, TpuConfig};
use tessel_estimator::input::Dataset;
use tessel_estimator::keras::fixture_dir::read_fixture_dir;
use tessel_estimator::keras::npz::read_npz;
use tessel_estimator::keras::{model_to_estimator_from_parts, KerasOptions, KerasParts};
use tessel_estimator::{Input, TpuEstimator};

pub const MODELS: &[&str] = &[
    "mnist_cnn",
    "two_in_two_out",
    "resnet_block",
    "text_conv1d",
    "separable",
    "seq1d",
    "activations",
    "regularized",
    "dropouts",
];

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/keras_builder")
        .join(name)
}

pub fn parts(name: &str) -> KerasParts {
    read_fixture_dir(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `io.npz`'s arrays whose key starts with `prefix:`, keyed by the rest.
pub fn io(name: &str, prefix: &str) -> Vec<(String, Array)> {
    read_npz(&fixture(name).join("io.npz"))
        .unwrap()
        .into_iter()
        .filter_map(|(k, a)| {
            k.strip_prefix(&format!("{prefix}:"))
                .map(|n| (n.to_string(), a))
        })
        .collect()
}

pub fn values(a: &Array) -> Vec<f64> {
    (0..a.len()).map(|i| a.data.get_f64(i)).collect()
}

/// An estimator of the fixture's model in a fresh model_dir, `shards` replicas.
pub fn estimator(parts: &KerasParts, dir: &Path, batch: usize, shards: usize) -> TpuEstimator {
    let config = RunConfig {
        model_dir: Some(dir.to_path_buf()),
        tf_random_seed: Some(1),
        tpu_config: TpuConfig {
            iterations_per_loop: 1,
            num_shards: Some(shards),
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    let options = KerasOptions {
        train_batch_size: batch,
        eval_batch_size: Some(batch),
        predict_batch_size: Some(batch),
        ..KerasOptions::default()
    };
    model_to_estimator_from_parts(parts, config, options)
        .unwrap_or_else(|e| panic!("{e}"))
        .quiet()
}

/// An input_fn over these columns, batched by the estimator's per-shard batch, repeated.
pub fn input_fn(
    columns: Vec<(String, Array)>,
    repeat: bool,
) -> impl Fn(&tessel_estimator::Params) -> Result<Input, tessel_estimator::EstimatorError> {
    move |params| {
        let ds = Dataset::from_tensor_slices(columns.clone())?;
        let ds = if repeat { ds.repeat(None) } else { ds };
        Ok(Input::features_only(
            ds.batch(params.batch_size() as u64, repeat)?,
        ))
    }
}

/// `|a - b| <= tol * max(|b|, floor)` elementwise.
pub fn assert_close(what: &str, a: &[f64], b: &[f64], tol: f64, floor: f64) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * y.abs().max(floor),
            "{what}[{i}]: tessel {x}, Keras {y} (tolerance {tol})"
        );
    }
}
