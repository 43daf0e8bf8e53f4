//! TFRecord input for Keras models: the JSON feature spec, its errors (each names the feature
//! and what was expected), and the records it parses.

use std::path::{Path, PathBuf};
use tessel_estimator::input::example::{Example, Feature};
use tessel_estimator::input::tfrecord::{Compression, RecordFileWriter};
use tessel_estimator::input::Value;
use tessel_estimator::keras::feature_spec::{parse_feature_spec, KerasFeatureSpec};
use tessel_estimator::keras::{read_model, KerasParts};

fn mnist() -> KerasParts {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keras/mnist_cnn/keras3.keras");
    read_model(&path).unwrap()
}

fn spec(json: &str) -> KerasFeatureSpec {
    parse_feature_spec(json, "spec.json").unwrap_or_else(|e| panic!("{e}"))
}

fn spec_error(json: &str) -> String {
    parse_feature_spec(json, "spec.json")
        .unwrap_err()
        .to_string()
}

const GOOD: &str = r#"{"features": {
    "image": {"shape": [12, 12, 1], "dtype": "float32"},
    "label": {"shape": [10], "dtype": "tf.float32"}},
  "label_key": "label"}"#;

#[test]
fn a_spec_reads_fixed_len_features_and_the_label_key() {
    let s = spec(GOOD);
    assert_eq!(s.label_key.as_deref(), Some("label"));
    assert_eq!(s.compression, Compression::None);
    let names: Vec<&str> = s.parse.features.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["image", "label"]);
    s.check_model(&mnist(), true).unwrap();
    let gz = spec(
        r#"{"features": {"x": {"shape": [12, 12, 1], "dtype": "float32"},
        "y": {"shape": [10], "dtype": "float32", "default_value": 0}}, "compression_type": "GZIP"}"#,
    );
    assert_eq!(gz.compression, Compression::Gzip);
    gz.check_model(&mnist(), true).unwrap();
}

#[test]
fn malformed_specs_name_the_feature_and_what_was_expected() {
    let cases = [
        ("[1, 2]", "expected a JSON object with `features`"),
        (r#"{"feature": {}}"#, "unknown key `feature`"),
        (r#"{"features": {}}"#, "`features` is empty"),
        (
            r#"{"features": {"image": {"shape": [12], "dtype": "float64"}}}"#,
            "feature `image`: dtype `float64`: expected \"float32\" or \"int64\"",
        ),
        (
            r#"{"features": {"image": {"shape": [12], "dtype": "string"}}}"#,
            "feature `image`: dtype string is not read",
        ),
        (
            r#"{"features": {"image": {"shape": [12, -1], "dtype": "float32"}}}"#,
            "feature `image`: shape [Number(12), Number(-1)]: expected non-negative integers",
        ),
        (
            r#"{"features": {"image": {"shape": [2], "dtype": "int64", "default_value": [1.5, 2]}}}"#,
            "feature `image`: default_value [1.5,2] is not a Int64 value",
        ),
        (
            r#"{"features": {"image": {"shape": [2], "dtype": "int64", "default_value": [1]}}}"#,
            "feature \"image\": the default has 1 int64_list values, the shape [2] needs 2",
        ),
        (
            r#"{"features": {"image": {"shape": [2], "dtype": "int64", "kind": "VarLen"}}}"#,
            "feature `image`: unknown key `kind`",
        ),
        (
            r#"{"features": {"image": {"shape": [2], "dtype": "int64"}}, "label_key": "label"}"#,
            "`label_key` is `label`, which is not one of the features (image)",
        ),
        (
            r#"{"features": {"image": {"dtype": "int64"}}, "compression_type": "LZ4"}"#,
            "LZ4",
        ),
        (
            r#"{"features": {"image": {"shape": [4294967296, 4294967296], "dtype": "float32", "default_value": 0}}}"#,
            "feature `image`: shape [4294967296, 4294967296] has too many elements",
        ),
    ];
    for (json, want) in cases {
        let e = spec_error(json);
        assert!(e.starts_with("feature spec spec.json: "), "{e}");
        assert!(e.contains(want), "{json}: {e}");
    }
}

#[test]
fn a_spec_that_does_not_fit_the_model_names_the_feature_and_the_input() {
    let m = mnist();
    let cases = [
        (
            r#"{"features": {"image": {"shape": [144], "dtype": "float32"}}, "label_key": "image"}"#,
            "feature `image` has shape [144], the model's input `image` takes [12, 12, 1] per example",
        ),
        (
            r#"{"features": {"pixels": {"shape": [12, 12, 1], "dtype": "float32"}}}"#,
            "no feature for the model's input `image` or `x` (the spec has pixels)",
        ),
        (
            r#"{"features": {"x": {"shape": [12, 12, 1], "dtype": "float32"}}}"#,
            "no target for the model's output `logits`: set `label_key`, or name a feature `logits` or `y`",
        ),
    ];
    for (json, want) in cases {
        let e = spec(json).check_model(&m, true).unwrap_err();
        assert!(e.contains(want), "{json}: {e}");
    }
    // Prediction needs no target.
    spec(r#"{"features": {"x": {"shape": [12, 12, 1], "dtype": "float32"}}}"#)
        .check_model(&m, false)
        .unwrap();
}

/// `n` Examples of a 2x2 float image and an int64 label, written with the crate's writer.
fn records(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("data.tfrecord");
    let mut w = RecordFileWriter::create(&path, Compression::None).unwrap();
    for i in 0..n {
        let image: Vec<f32> = (0..4).map(|k| (i * 4 + k) as f32).collect();
        let e = Example::from_features([
            ("image".to_string(), Feature::floats(image)),
            ("label".to_string(), Feature::int64s(vec![i as i64])),
        ]);
        w.write(&e.to_bytes()).unwrap();
    }
    w.commit().unwrap();
    path
}

#[test]
fn the_dataset_parses_the_records_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = records(dir.path(), 3);
    let s = spec(
        r#"{"features": {"image": {"shape": [2, 2], "dtype": "float32"},
            "label": {"shape": [], "dtype": "int64"}}, "label_key": "label"}"#,
    );
    let elements: Vec<_> = s
        .dataset(&[file])
        .unwrap()
        .iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(elements.len(), 3);
    let Value::Dense(image) = &elements[2].values[0] else {
        panic!("{:?}", elements[2].values[0]);
    };
    assert_eq!(image.shape.dims.to_vec(), vec![2, 2]);
    assert_eq!(image.data.get_f64(3), 11.0);
    let Value::Dense(label) = &elements[2].values[1] else {
        panic!("{:?}", elements[2].values[1]);
    };
    assert_eq!(label.data.get_f64(0), 2.0);
}
