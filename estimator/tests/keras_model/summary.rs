//! `summary` counts Keras's parameters per layer and in total, and lists what tessel
//! cannot run.

use crate::common::*;
use serde_json::Value;
use tessel_estimator::keras::summary;

#[test]
fn parameter_counts_match_keras() {
    for flavour in ["tf", "keras3"] {
        for model in MODELS {
            let name = format!("{flavour}_{model}");
            let s = summary(&parts(&name)).unwrap();
            let text = std::fs::read_to_string(fixture(&name).join("summary.json")).unwrap();
            let keras: Value = serde_json::from_str(&text).unwrap();
            assert!(s.problems.is_empty(), "{name}: {:?}", s.problems);
            assert_eq!(
                s.trainable,
                keras["trainable"].as_u64().unwrap(),
                "{name} trainable"
            );
            assert_eq!(
                s.non_trainable,
                keras["non_trainable"].as_u64().unwrap(),
                "{name} non-trainable"
            );
            for row in keras["layers"].as_array().unwrap() {
                let r = s
                    .rows
                    .iter()
                    .find(|r| r.name == row["name"].as_str().unwrap())
                    .unwrap();
                assert_eq!(
                    r.params,
                    row["params"].as_u64().unwrap(),
                    "{name} {}",
                    r.name
                );
                if let Some(shape) = row["output_shape"].as_array() {
                    let want: Vec<Option<i64>> = shape.iter().map(Value::as_i64).collect();
                    assert_eq!(r.output_shape.as_ref(), Some(&want), "{name} {}", r.name);
                }
            }
        }
    }
}

#[test]
fn unsupported_layers_are_listed_with_why() {
    let mut p = parts("keras3_mnist_cnn");
    p.model_config["config"]["layers"][6]["class_name"] = "GRU".into();
    p.model_config["config"]["layers"][1]["config"]["dilation_rate"] = serde_json::json!([2, 2]);
    let s = summary(&p).unwrap();
    assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
    let text = s.to_string();
    assert!(text.contains("tessel cannot run this model:"), "{text}");
    assert!(text.contains("class GRU is not supported"), "{text}");
    assert!(text.contains("dilation_rate"), "{text}");
}

#[test]
fn table_text() {
    let s = summary(&parts("keras3_mnist_cnn")).unwrap();
    let text = s.to_string();
    assert!(text.starts_with("Model: \"mnist_cnn\""), "{text}");
    assert!(text.contains("conv2d (Conv2D)"), "{text}");
    assert!(text.contains("(None, 12, 12, 4)"), "{text}");
    assert!(text.contains("tessel can run every layer"), "{text}");
}
