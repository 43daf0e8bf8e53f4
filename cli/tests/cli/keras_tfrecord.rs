//! `tessel keras train|evaluate|predict --feature-spec`: TFRecord files of tf.train.Example
//! as a Keras model's data, and a spec that does not fit the model.

use super::keras::{model, tessel, text};
use std::path::{Path, PathBuf};
use tessel_estimator::input::example::{Example, Feature};
use tessel_estimator::input::tfrecord::{Compression, RecordFileWriter};
use tessel_runtime::host_io::read_safetensors;

/// 24 Examples: a 12x12x1 `image` (float_list) and a one-hot `label` of 10 (float_list).
fn records(dir: &Path) -> PathBuf {
    let path = dir.join("train.tfrecord");
    let mut w = RecordFileWriter::create(&path, Compression::None).unwrap();
    for i in 0..24usize {
        let image: Vec<f32> = (0..144)
            .map(|k| (((i * 144 + k) * 37 % 101) as f32) / 101.0)
            .collect();
        let label: Vec<f32> = (0..10).map(|c| (c == i % 10) as u8 as f32).collect();
        let e = Example::from_features([
            ("image".to_string(), Feature::floats(image)),
            ("label".to_string(), Feature::floats(label)),
        ]);
        w.write(&e.to_bytes()).unwrap();
    }
    w.commit().unwrap();
    path
}

fn write_spec(dir: &Path, image_shape: &str) -> PathBuf {
    let path = dir.join("spec.json");
    std::fs::write(
        &path,
        format!(
            r#"{{"features": {{"image": {{"shape": {image_shape}, "dtype": "float32"}},
                "label": {{"shape": [10], "dtype": "float32"}}}}, "label_key": "label"}}"#
        ),
    )
    .unwrap();
    path
}

#[test]
fn train_evaluate_and_predict_on_tfrecords() {
    let dir = tempfile::tempdir().unwrap();
    let data = records(dir.path());
    let spec = write_spec(dir.path(), "[12, 12, 1]");
    let md = dir.path().join("md");
    let (m, data, spec, md) = (
        model(),
        data.to_str().unwrap(),
        spec.to_str().unwrap(),
        md.to_str().unwrap(),
    );
    let m = m.to_str().unwrap();
    let o = tessel(&[
        "keras",
        "train",
        m,
        "--data",
        data,
        "--eval-data",
        data,
        "--feature-spec",
        spec,
        "--batch-size",
        "8",
        "--steps",
        "4",
        "--model-dir",
        md,
        "--iterations",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("trained to step 4"), "{out}");
    // Evaluation sees every record once (24 = 3 batches of 8).
    assert!(
        out.contains("examples = 24") && out.contains("accuracy = "),
        "{out}"
    );
    let o = tessel(&[
        "keras",
        "evaluate",
        m,
        "--data",
        data,
        "--feature-spec",
        spec,
        "--batch-size",
        "5",
        "--model-dir",
        md,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("global_step = 4") && out.contains("examples = 24"),
        "{out}"
    );
    let y = dir.path().join("y.safetensors");
    let o = tessel(&[
        "keras",
        "predict",
        m,
        "--data",
        data,
        "--feature-spec",
        spec,
        "--outputs",
        y.to_str().unwrap(),
        "--model-dir",
        md,
        "--batch-size",
        "8",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let outputs = read_safetensors(&y).unwrap();
    assert_eq!(outputs[0].0, "logits");
    assert_eq!(outputs[0].1.shape.dims.to_vec(), vec![24, 10]);
}

#[test]
fn a_spec_that_does_not_fit_the_model_is_an_error_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let data = records(dir.path());
    let spec = write_spec(dir.path(), "[144]");
    let md = dir.path().join("md");
    let o = tessel(&[
        "keras",
        "train",
        model().to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--feature-spec",
        spec.to_str().unwrap(),
        "--steps",
        "1",
        "--model-dir",
        md.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains(
            "feature `image` has shape [144], the model's input `image` takes [12, 12, 1]"
        ),
        "{}",
        text(&o)
    );
    assert!(!md.exists(), "nothing was written");
}
