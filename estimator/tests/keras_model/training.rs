//! Three training steps on the fixture batch give Keras's weights after three
//! `train_on_batch` steps, for each optimizer (SGD momentum, Adam, RMSprop centered with
//! momentum, AdamW, Adagrad, SGD nesterov with ExponentialDecay, SGD clipnorm with
//! PiecewiseConstantDecay), with batch normalization's moving statistics and L1/L2 penalties.

use crate::common::*;
use tessel_estimator::keras::npz::read_npz;

fn check_training(flavour: &str, model: &str, shards: usize) {
    let name = format!("{flavour}_{model}");
    let parts = parts(&name);
    let dir = tempfile::tempdir().unwrap();
    let est = estimator(&parts, dir.path(), 8, shards);
    let mut columns = io(&name, "x");
    columns.extend(io(&name, "y"));
    est.train(input_fn(columns, true), None, Some(3))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let ckpt = dir.path().join("model.ckpt-3.safetensors");
    let saved = tessel_runtime::host_io::read_safetensors(&ckpt).unwrap();
    let trained = read_npz(&fixture(&name).join("trained.npz")).unwrap();
    assert!(!trained.is_empty());
    for (key, want) in trained {
        let (layer, rest) = key.rsplit_once('/').unwrap();
        let weight = rest.split_once(':').unwrap().1;
        let var = format!("{layer}/{weight}");
        let got = saved
            .iter()
            .find(|(n, _)| *n == var)
            .unwrap_or_else(|| panic!("{name}: no variable {var} in the checkpoint"));
        assert_close(
            &format!("{name} {var}"),
            &values(&got.1),
            &values(&want),
            1e-4,
            1e-2,
        );
    }
}

macro_rules! training_tests {
    ($($test:ident: $flavour:literal $model:literal,)*) => {
        $(#[test] fn $test() { check_training($flavour, $model, 1); })*
    };
}

training_tests! {
    tf_mnist_cnn_sgd_momentum: "tf" "mnist_cnn",
    tf_two_in_two_out_adam: "tf" "two_in_two_out",
    tf_resnet_block_adam_batch_norm: "tf" "resnet_block",
    tf_text_conv1d_rmsprop: "tf" "text_conv1d",
    tf_separable_adamw: "tf" "separable",
    tf_seq1d_adagrad_huber: "tf" "seq1d",
    tf_activations_nesterov_exponential_decay: "tf" "activations",
    tf_regularized_clipnorm_piecewise: "tf" "regularized",
    keras3_mnist_cnn_sgd_momentum: "keras3" "mnist_cnn",
    keras3_two_in_two_out_adam: "keras3" "two_in_two_out",
    keras3_resnet_block_adam_batch_norm: "keras3" "resnet_block",
    keras3_text_conv1d_rmsprop: "keras3" "text_conv1d",
    keras3_separable_adamw: "keras3" "separable",
    keras3_seq1d_adagrad_huber: "keras3" "seq1d",
    keras3_activations_nesterov_exponential_decay: "keras3" "activations",
    keras3_regularized_clipnorm_piecewise: "keras3" "regularized",
}

/// On two shards the global batch of 8 is split 4 + 4 and the gradients averaged by the
/// CrossShardOptimizer: the same three steps as Keras's on one device.
#[test]
fn keras3_mnist_cnn_two_shards() {
    check_training("keras3", "mnist_cnn", 2);
}
