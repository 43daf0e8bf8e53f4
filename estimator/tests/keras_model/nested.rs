//! Models used as layers of other models: their layers are inlined as `outer/inner`, and a
//! frozen nested model (`trainable = False`) freezes its layers.

use crate::common::{assert_close, estimator, input_fn, values};
use std::path::Path;
use tessel_estimator::keras::npz::read_npz;
use tessel_estimator::keras::read_model;

fn file(model: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/keras")
        .join(model)
        .join("keras3.keras")
}

#[test]
fn a_frozen_nested_model_keeps_its_weights_while_the_outer_layers_train() {
    let path = file("nested_sequential");
    let mut parts = read_model(&path).unwrap();
    let layers = parts.model_config["config"]["layers"]
        .as_array_mut()
        .unwrap();
    let inner = layers
        .iter_mut()
        .find(|l| l["class_name"] == "Sequential")
        .expect("the fixture nests a Sequential");
    inner["config"]["trainable"] = false.into();
    let saved_inner = parts.weights["inner/inner_dense"][0].data.clone();
    let saved_outer = parts.weights["outer_dense"][0].data.clone();
    let train = read_npz(&path.with_file_name("keras3_train.npz")).unwrap();
    let rows = train[0].1.shape.dims[0] as usize;
    let columns: Vec<_> = train
        .into_iter()
        .map(|(k, a)| (k.trim_start_matches("target:").to_string(), a))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let est = estimator(&parts, dir.path(), rows, 1);
    est.train(input_fn(columns, true), None, Some(3)).unwrap();
    let ckpt =
        tessel_runtime::host_io::read_safetensors(dir.path().join("model.ckpt-3.safetensors"))
            .unwrap();
    let var = |name: &str| {
        let (_, a) = ckpt
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no variable {name}"));
        values(a)
    };
    let as_f64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    assert_eq!(var("inner/inner_dense/kernel"), as_f64(&saved_inner));
    assert_ne!(var("outer_dense/kernel"), as_f64(&saved_outer));
}

#[test]
fn a_nested_sequential_without_an_input_layer_takes_the_outer_tensor() {
    // A nested Sequential's config may lack an InputLayer (one built by being called, as
    // older Keras saved it): the outer model's tensor is its input.
    let path = file("nested_sequential");
    let mut parts = read_model(&path).unwrap();
    let layers = parts.model_config["config"]["layers"]
        .as_array_mut()
        .unwrap();
    let inner = layers
        .iter_mut()
        .find(|l| l["class_name"] == "Sequential")
        .unwrap();
    let inner_layers = inner["config"]["layers"].as_array_mut().unwrap();
    assert_eq!(inner_layers[0]["class_name"], "InputLayer");
    inner_layers.remove(0);
    inner["config"]
        .as_object_mut()
        .unwrap()
        .remove("build_input_shape");
    let predict = read_npz(&path.with_file_name("keras3_predict.npz")).unwrap();
    let (outputs, inputs): (Vec<_>, Vec<_>) = predict
        .into_iter()
        .partition(|(k, _)| k.starts_with("output:"));
    let rows = inputs[0].1.shape.dims[0] as usize;
    let dir = tempfile::tempdir().unwrap();
    let est = estimator(&parts, dir.path(), rows, 1);
    let got: Vec<f64> = est
        .predict(input_fn(inputs, false), None)
        .unwrap()
        .map(|r| r.unwrap())
        .flat_map(|r| values(&r["probs"]))
        .collect();
    assert_eq!(outputs[0].0, "output:probs");
    assert_close("probs", &got, &values(&outputs[0].1), 1e-5, 1e-2);
}
