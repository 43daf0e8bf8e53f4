//! The three formats tf.keras 2.15 saved one model in give the same weights and the same
//! architecture, and every format keys and names the weights as Keras does.

use crate::fixtures::{model_file, MODELS};
use serde_json::Value;
use std::collections::BTreeSet;
use tessel_estimator::keras::file::{read_keras_file, KerasFile, KerasFileError};

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

/// The names `<layer>/<weight>` of the weights Keras itself listed after training
/// (`<prefix>trained.npz`: a zip of `<name>.npy` files).
fn trained_names(model: &str, npz: &str) -> BTreeSet<String> {
    let file = std::fs::File::open(model_file(model, npz)).expect("npz");
    let zip = zip::ZipArchive::new(file).expect("an npz is a zip");
    zip.file_names()
        .map(|n| {
            let n = n.expect("a UTF-8 member name");
            n.strip_suffix(".npy").unwrap_or(&n).to_string()
        })
        .collect()
}

#[test]
fn weights_are_keyed_and_named_as_keras_names_them() {
    for model in MODELS {
        for (file, npz) in [
            ("keras3.keras", "keras3_trained.npz"),
            ("tf.keras", "tf_trained.npz"),
            ("tf.h5", "tf_trained.npz"),
            ("tf_savedmodel", "tf_trained.npz"),
        ] {
            let k = read_keras_file(&model_file(model, file)).expect("reads");
            let names: BTreeSet<String> = k
                .weights
                .iter()
                .flat_map(|(layer, arrays)| {
                    arrays.iter().map(move |a| format!("{layer}/{}", a.name))
                })
                .collect();
            assert_eq!(names, trained_names(model, npz), "{model}/{file}");
        }
    }
}

#[test]
fn a_keras_zip_whose_config_disagrees_with_its_weights_is_refused() {
    // Swap the names of two Dense layers in config.json: model.weights.h5 (Keras 3) records
    // which layer each `vars` group belongs to, and the walk must notice.
    let path = model_file("activations_mlp", "keras3.keras");
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&path).expect("fixture")).expect("zip");
    let dir = tempfile::tempdir().expect("tempdir");
    let out_path = dir.path().join("swapped.keras");
    let mut out = zip::ZipWriter::new(std::fs::File::create(&out_path).expect("creates"));
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).expect("entry");
        let name = entry.name().expect("a UTF-8 member name").to_string();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes).expect("reads");
        if name == "config.json" {
            let text = String::from_utf8(bytes).expect("utf-8");
            bytes = text
                .replace("\"d_swish\"", "\"@@\"")
                .replace("\"d_silu\"", "\"d_swish\"")
                .replace("\"@@\"", "\"d_silu\"")
                .into_bytes();
        }
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        out.start_file(name, options).expect("starts");
        std::io::Write::write_all(&mut out, &bytes).expect("writes");
    }
    out.finish().expect("finishes");
    let err = read_keras_file(&out_path).expect_err("disagrees");
    let shown = err.to_string();
    assert!(
        matches!(err, KerasFileError::NotKeras { .. })
            && shown.contains("`d_swish`")
            && shown.contains("`d_silu`"),
        "{shown}"
    );
}
