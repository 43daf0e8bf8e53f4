//! The Keras files of `tests/fixtures/keras/` (written by `tests/keras/make_fixtures.py`:
//! `.keras` zips from Keras 3 and tf.keras 2.15, legacy `.h5` files and tf.keras SavedModel
//! directories) through
//! `model_to_estimator`: predictions equal Keras's, and three training steps give Keras's
//! weights (dropout rates set to 0, as the script trained them).

use crate::common::{assert_close, estimator, input_fn, values};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tessel_estimator::keras::npz::read_npz;
use tessel_estimator::keras::read_model;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keras")
}

/// Every (model, file, npz prefix) of the fixtures.
fn cases() -> Vec<(String, PathBuf, &'static str)> {
    let mut out = Vec::new();
    let mut models: Vec<_> = std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("keras3.keras").is_file())
        .collect();
    models.sort();
    for m in models {
        let name = m.file_name().unwrap().to_string_lossy().to_string();
        for (file, prefix) in [
            ("keras3.keras", "keras3_"),
            ("tf.keras", "tf_"),
            ("tf.h5", "tf_"),
            ("tf_savedmodel", "tf_"),
        ] {
            out.push((name.clone(), m.join(file), prefix));
        }
    }
    out
}

#[test]
fn predictions_equal_keras() {
    let mut checked = 0;
    for (_, file, prefix) in cases() {
        let what = format!("{}", file.display());
        let parts = match read_model(&file) {
            Ok(p) => p,
            Err(e) => panic!("{what}: {e}"),
        };
        let dir = tempfile::tempdir().unwrap();
        let predict = read_npz(&file.with_file_name(format!("{prefix}predict.npz"))).unwrap();
        let (outputs, inputs): (Vec<_>, Vec<_>) = predict
            .into_iter()
            .partition(|(k, _)| k.starts_with("output:"));
        let rows = inputs[0].1.shape.dims[0] as usize;
        let est = estimator(&parts, dir.path(), rows, 1);
        let got: Vec<BTreeMap<String, _>> = est
            .predict(input_fn(inputs, false), None)
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for (key, want) in outputs {
            let out = key.trim_start_matches("output:");
            let g: Vec<f64> = got.iter().flat_map(|r| values(&r[out])).collect();
            assert_close(&format!("{what} {out}"), &g, &values(&want), 1e-5, 1e-2);
        }
        checked += 1;
    }
    assert!(checked >= 30, "{checked} files checked");
}

#[test]
fn three_training_steps_equal_keras() {
    let mut checked = 0;
    for (model, file, prefix) in cases() {
        let what = format!("{}", file.display());
        let mut parts = read_model(&file).unwrap();
        // The script trained with every dropout rate at 0.
        for layer in parts.model_config["config"]["layers"]
            .as_array_mut()
            .unwrap()
        {
            if layer["class_name"]
                .as_str()
                .is_some_and(|c| c.contains("Dropout"))
            {
                layer["config"]["rate"] = 0.0.into();
            }
        }
        // Keras 3 does not save Huber's delta (its get_config leaves it out): the script's
        // in-memory model trained with 0.5, a reload of its file would use 1.0.
        if prefix == "keras3_" && model == "activations_mlp" {
            parts.compile_config.as_mut().unwrap()["loss"] =
                serde_json::json!({"class_name": "Huber", "config": {"delta": 0.5}});
        }
        let train = read_npz(&file.with_file_name(format!("{prefix}train.npz"))).unwrap();
        let rows = train[0].1.shape.dims[0] as usize;
        let columns: Vec<_> = train
            .into_iter()
            .map(|(k, a)| (k.trim_start_matches("target:").to_string(), a))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let est = estimator(&parts, dir.path(), rows, 1);
        est.train(input_fn(columns, true), None, Some(3))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let saved =
            tessel_runtime::host_io::read_safetensors(dir.path().join("model.ckpt-3.safetensors"))
                .unwrap();
        let trained = read_npz(&file.with_file_name(format!("{prefix}trained.npz"))).unwrap();
        for (var, want) in trained {
            // Keras 3 calls a DepthwiseConv2D's kernel `kernel`, tf.keras (and the file
            // reader) `depthwise_kernel`.
            let alias = var.replace("/kernel", "/depthwise_kernel");
            let got = saved
                .iter()
                .find(|(n, _)| *n == var || *n == alias)
                .unwrap_or_else(|| panic!("{what}: no variable {var}"));
            assert_close(
                &format!("{what} {var}"),
                &values(&got.1),
                &values(&want),
                1e-4,
                1e-2,
            );
        }
        checked += 1;
    }
    assert!(checked >= 30, "{checked} files checked");
}
