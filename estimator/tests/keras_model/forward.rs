//! Forward outputs equal Keras's `predict()` on the fixture inputs.

use crate::common::*;
use std::collections::BTreeMap;

fn check_forward(flavour: &str, model: &str) {
    let name = format!("{flavour}_{model}");
    let parts = parts(&name);
    let dir = tempfile::tempdir().unwrap();
    let est = estimator(&parts, dir.path(), 5, 1);
    let inputs = io(&name, "in");
    let expected: BTreeMap<String, _> = io(&name, "out").into_iter().collect();
    let rows: Vec<_> = est
        .predict(input_fn(inputs, false), None)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(rows.len(), 5, "{name}: rows");
    for (out, want) in &expected {
        let got: Vec<f64> = rows.iter().flat_map(|r| values(&r[out])).collect();
        // Relative 1e-5, with an absolute floor for values near zero.
        assert_close(&format!("{name} {out}"), &got, &values(want), 1e-5, 1e-2);
    }
}

macro_rules! forward_tests {
    ($($test:ident: $flavour:literal $model:literal,)*) => {
        $(#[test] fn $test() { check_forward($flavour, $model); })*
    };
}

forward_tests! {
    tf_mnist_cnn: "tf" "mnist_cnn",
    tf_two_in_two_out: "tf" "two_in_two_out",
    tf_resnet_block: "tf" "resnet_block",
    tf_text_conv1d: "tf" "text_conv1d",
    tf_separable: "tf" "separable",
    tf_seq1d: "tf" "seq1d",
    tf_activations: "tf" "activations",
    tf_regularized: "tf" "regularized",
    tf_dropouts: "tf" "dropouts",
    keras3_mnist_cnn: "keras3" "mnist_cnn",
    keras3_two_in_two_out: "keras3" "two_in_two_out",
    keras3_resnet_block: "keras3" "resnet_block",
    keras3_text_conv1d: "keras3" "text_conv1d",
    keras3_separable: "keras3" "separable",
    keras3_seq1d: "keras3" "seq1d",
    keras3_activations: "keras3" "activations",
    keras3_regularized: "keras3" "regularized",
    keras3_dropouts: "keras3" "dropouts",
}
