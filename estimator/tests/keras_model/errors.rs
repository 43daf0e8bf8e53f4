//! Unsupported layers, options, activations, losses and optimizers are errors from
//! `model_to_estimator`, before any training, naming the layer, its class and the option.

use crate::common::*;
use serde_json::json;
use tessel_estimator::keras::{model_to_estimator_from_parts, KerasOptions, KerasParts};
use tessel_estimator::RunConfig;

fn error_of(parts: &KerasParts) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = RunConfig {
        model_dir: Some(dir.path().to_path_buf()),
        ..RunConfig::default()
    };
    match model_to_estimator_from_parts(parts, config, KerasOptions::default()) {
        Ok(_) => panic!("expected an error"),
        Err(e) => {
            // Nothing was written: the error came before any training.
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
            e.to_string()
        }
    }
}

/// The mnist_cnn fixture with layer `i`'s config changed by `f`.
fn with_layer(i: usize, f: impl FnOnce(&mut serde_json::Value)) -> KerasParts {
    let mut p = parts("keras3_mnist_cnn");
    f(&mut p.model_config["config"]["layers"][i]);
    p
}

#[test]
fn dilation_rate_names_layer_class_and_option() {
    let p = with_layer(1, |l| l["config"]["dilation_rate"] = json!([2, 2]));
    let e = error_of(&p);
    assert!(e.contains("layer `conv2d` (Conv2D)"), "{e}");
    assert!(e.contains("`dilation_rate` = [2,2]"), "{e}");
    assert!(e.contains("Escape hatch"), "{e}");
}

#[test]
fn groups_constraints_and_data_format_are_refused() {
    for (key, value, what) in [
        ("groups", json!(2), "grouped"),
        (
            "kernel_constraint",
            json!({"class_name": "MaxNorm", "config": {}}),
            "constraints",
        ),
        ("data_format", json!("channels_first"), "channels_last"),
        ("padding", json!("causal"), "valid"),
    ] {
        let p = with_layer(1, |l| l["config"][key] = value.clone());
        let e = error_of(&p);
        assert!(
            e.contains(&format!("`{key}`")) && e.contains(what),
            "{key}: {e}"
        );
    }
}

#[test]
fn an_unknown_option_is_not_ignored() {
    let p = with_layer(6, |l| l["config"]["some_future_option"] = json!(3));
    let e = error_of(&p);
    assert!(
        e.contains("`some_future_option` = 3") && e.contains("dense"),
        "{e}"
    );
}

#[test]
fn unsupported_layer_class() {
    let p = with_layer(6, |l| l["class_name"] = json!("LSTM"));
    let e = error_of(&p);
    assert!(
        e.contains("layer `dense`: class LSTM is not supported"),
        "{e}"
    );
}

#[test]
fn unsupported_activation() {
    let p = with_layer(6, |l| l["config"]["activation"] = json!("hard_sigmoid"));
    let e = error_of(&p);
    assert!(
        e.contains("`activation`") && e.contains("hard_sigmoid"),
        "{e}"
    );
}

#[test]
fn unsupported_loss_optimizer_and_schedule() {
    let mut p = parts("keras3_mnist_cnn");
    p.compile_config.as_mut().unwrap()["loss"] = json!("poisson");
    assert!(error_of(&p).contains("loss `poisson` is not supported"));
    let mut p = parts("keras3_mnist_cnn");
    p.compile_config.as_mut().unwrap()["optimizer"]["class_name"] = json!("Nadam");
    assert!(error_of(&p).contains("optimizer `Nadam` is not supported"));
    let mut p = parts("keras3_mnist_cnn");
    p.compile_config.as_mut().unwrap()["optimizer"]["config"]["learning_rate"] =
        json!({"class_name": "CosineDecayRestarts", "config": {}});
    assert!(error_of(&p).contains("CosineDecayRestarts"));
    let mut p = parts("keras3_mnist_cnn");
    p.compile_config.as_mut().unwrap()["optimizer"]["config"]["use_ema"] = json!(true);
    assert!(error_of(&p).contains("use_ema"));
}

#[test]
fn weights_that_do_not_fit() {
    let mut p = parts("keras3_mnist_cnn");
    p.weights.get_mut("dense").unwrap()[0].shape = vec![1, 2];
    let e = error_of(&p);
    assert!(e.contains("layer `dense`") && e.contains("shape"), "{e}");
    let mut p = parts("keras3_mnist_cnn");
    p.weights.remove("conv2d");
    let e = error_of(&p);
    assert!(
        e.contains("layer `conv2d`: the file has 0 weight(s)"),
        "{e}"
    );
}

#[test]
fn a_model_without_compile_config_needs_a_loss() {
    let mut p = parts("keras3_mnist_cnn");
    p.compile_config = None;
    assert!(error_of(&p).contains("no compile config"));
}
