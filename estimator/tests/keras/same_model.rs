//! The three formats tf.keras 2.15 saved one model in give the same weights and the same
//! architecture.

use crate::fixtures::{model_file, MODELS};
use serde_json::Value;
use tessel_estimator::keras::file::{read_keras_file, KerasFile};

fn layer_summary(k: &KerasFile) -> Vec<(String, String)> {
    k.model_config["config"]["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .map(|l| {
            let name = l["config"]["name"].as_str().unwrap_or_default().to_string();
            let class = l["class_name"].as_str().unwrap_or_default().to_string();
            (name, class)
        })
        .collect()
}

#[test]
fn the_three_tf_keras_formats_give_identical_weights_and_equivalent_configs() {
    for model in MODELS {
        let zip = read_keras_file(&model_file(model, "tf.keras")).expect("tf.keras");
        let h5 = read_keras_file(&model_file(model, "tf.h5")).expect("tf.h5");
        let saved = read_keras_file(&model_file(model, "tf_savedmodel")).expect("savedmodel");
        for other in [&h5, &saved] {
            assert_eq!(zip.weights, other.weights, "{model}: {:?}", other.format);
            assert_eq!(
                zip.model_config["class_name"], other.model_config["class_name"],
                "{model}"
            );
            assert_eq!(layer_summary(&zip), layer_summary(other), "{model}");
        }
        // The optimizer is the same in `compile_config` and `training_config`.
        let zip_opt = &zip.compile_config.as_ref().expect("compiled")["optimizer"]["config"];
        let h5_opt = &h5.compile_config.as_ref().expect("compiled")["optimizer_config"]["config"];
        assert_eq!(zip_opt["learning_rate"], h5_opt["learning_rate"], "{model}");
        assert_ne!(zip_opt["learning_rate"], Value::Null, "{model}");
    }
}
