//! Every fixture model reads in every format it was saved in.

use crate::fixtures::{model_file, MODELS};
use tessel_estimator::keras::file::{read_keras_file, KerasFormat};

#[test]
fn every_keras_zip_fixture_reads_with_its_config_and_weights() {
    for model in MODELS {
        for (file, version) in [("keras3.keras", "3."), ("tf.keras", "2.15")] {
            let path = model_file(model, file);
            let k = read_keras_file(&path).unwrap_or_else(|e| panic!("{model}/{file}: {e}"));
            assert_eq!(k.format, KerasFormat::KerasV3Zip);
            assert!(
                k.keras_version
                    .as_deref()
                    .is_some_and(|v| v.starts_with(version)),
                "{model}/{file}: {:?}",
                k.keras_version
            );
            assert!(
                k.model_config["config"]["layers"].is_array(),
                "{model}/{file}"
            );
            assert!(k.compile_config.is_some(), "{model}/{file}: compiled");
            assert!(!k.weights.is_empty(), "{model}/{file}");
            for (layer, arrays) in &k.weights {
                for a in arrays {
                    assert_eq!(
                        a.shape.iter().product::<usize>(),
                        a.data.len(),
                        "{model}/{file}: {layer}/{}",
                        a.name
                    );
                }
            }
        }
    }
}

#[test]
fn every_legacy_h5_fixture_reads_with_its_training_config() {
    for model in MODELS {
        let k =
            read_keras_file(&model_file(model, "tf.h5")).unwrap_or_else(|e| panic!("{model}: {e}"));
        assert_eq!(k.format, KerasFormat::LegacyH5);
        assert_eq!(k.keras_version.as_deref(), Some("2.15.0"), "{model}");
        assert!(k.model_config["config"]["layers"].is_array(), "{model}");
        let training = k.compile_config.as_ref().expect("compiled");
        assert!(
            training["optimizer_config"].is_object(),
            "{model}: {training}"
        );
        assert!(!k.weights.is_empty(), "{model}");
    }
}

#[test]
fn every_savedmodel_fixture_reads_its_metadata_and_variables() {
    for model in MODELS {
        let k = read_keras_file(&model_file(model, "tf_savedmodel"))
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        assert_eq!(k.format, KerasFormat::SavedModel);
        assert!(
            k.keras_version
                .as_deref()
                .is_some_and(|v| v.starts_with("2.15")),
            "{model}"
        );
        assert_eq!(k.model_config["config"]["name"], *model, "{model}");
        assert!(k.compile_config.is_some(), "{model}");
        assert!(!k.weights.is_empty(), "{model}");
    }
}

#[test]
fn weight_names_follow_keras_order_and_the_layers_options() {
    for file in ["keras3.keras", "tf.keras", "tf.h5", "tf_savedmodel"] {
        let names = |model: &str, layer: &str| -> Vec<String> {
            let k = read_keras_file(&model_file(model, file)).expect("reads");
            let arrays = k.weights.get(layer).unwrap_or_else(|| {
                panic!("{model}/{file}: no `{layer}` in {:?}", k.weights.keys())
            });
            arrays.iter().map(|a| a.name.clone()).collect()
        };
        // use_bias=False
        assert_eq!(names("resnet_block", "stem"), ["kernel"], "{file}");
        assert_eq!(
            names("resnet_block", "res_bn"),
            ["gamma", "beta", "moving_mean", "moving_variance"],
            "{file}"
        );
        // center=False: no beta
        assert_eq!(
            names("bn_mlp", "bn"),
            ["gamma", "moving_mean", "moving_variance"],
            "{file}"
        );
        assert_eq!(
            names("depthwise_separable", "separable"),
            ["depthwise_kernel", "pointwise_kernel", "bias"],
            "{file}"
        );
        // Keras 3 names a depthwise convolution's kernel `kernel`, tf.keras `depthwise_kernel`
        let depthwise = if file == "keras3.keras" {
            "kernel"
        } else {
            "depthwise_kernel"
        };
        assert_eq!(
            names("depthwise_separable", "depthwise"),
            [depthwise, "bias"],
            "{file}"
        );
        assert_eq!(names("text_conv1d", "embed"), ["embeddings"], "{file}");
        assert_eq!(names("layer_norm_mlp", "ln"), ["gamma", "beta"], "{file}");
        // a nested Sequential's layers are keyed outer/inner
        assert_eq!(
            names("nested_sequential", "inner/inner_dense"),
            ["kernel", "bias"],
            "{file}"
        );
        assert_eq!(
            names("nested_sequential", "inner/inner_out"),
            ["kernel", "bias"],
            "{file}"
        );
    }
}

#[test]
fn shapes_are_keras_shapes() {
    for file in ["keras3.keras", "tf.keras", "tf.h5", "tf_savedmodel"] {
        let k = read_keras_file(&model_file("mnist_cnn", file)).expect("reads");
        let conv1 = &k.weights["conv1"];
        assert_eq!(conv1[0].shape, [3, 3, 1, 4], "{file}");
        assert_eq!(conv1[1].shape, [4], "{file}");
        assert_eq!(k.weights["logits"][0].shape, [16, 10], "{file}");
        let dw = &read_keras_file(&model_file("depthwise_separable", file))
            .expect("reads")
            .weights["depthwise"];
        assert_eq!(dw[0].shape, [3, 3, 4, 2], "{file}");
        // layers without weights have no entry
        assert!(!k.weights.contains_key("pool1") && !k.weights.contains_key("flatten"));
    }
}
