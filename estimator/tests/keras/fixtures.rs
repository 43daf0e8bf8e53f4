//! Where the Keras fixtures are, and the models they hold.

use std::path::PathBuf;

/// The models `make_fixtures.py` writes (one folder each).
pub const MODELS: &[&str] = &[
    "mnist_cnn",
    "two_in_two_out",
    "resnet_block",
    "text_conv1d",
    "depthwise_separable",
    "pooling1d",
    "activations_mlp",
    "layer_norm_mlp",
    "zero_pad_reshape",
    "gated_regularized",
    "shared_layers",
    "nested_sequential",
    "bn_mlp",
];

pub fn keras_fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keras")
}

pub fn model_file(model: &str, file: &str) -> PathBuf {
    keras_fixtures().join(model).join(file)
}

pub fn h5py_file(name: &str) -> PathBuf {
    keras_fixtures().join("h5py").join(name)
}

/// Reads every group, attribute and dataset under `group`, returning how many datasets it
/// read (an error on the first thing that does not read).
pub fn walk(
    group: &tessel_estimator::keras::hdf5::Group<'_>,
) -> Result<usize, tessel_estimator::keras::file::KerasFileError> {
    use tessel_estimator::keras::hdf5::{Datatype, Node};
    let mut datasets = 0;
    for attr in group.attributes()? {
        match attr.datatype {
            Datatype::FixedString { .. } | Datatype::VarString => attr.strings().map(drop)?,
            _ => attr.numbers().map(drop)?,
        }
    }
    for name in group.member_names()? {
        match group.member(&name)? {
            Some(Node::Group(g)) => datasets += walk(&g)?,
            Some(Node::Dataset(d)) => {
                match d.datatype {
                    Datatype::FixedString { .. } | Datatype::VarString => {
                        d.read_strings().map(drop)?
                    }
                    _ => d.read_f32().map(drop)?,
                }
                datasets += 1;
            }
            None => {}
        }
    }
    Ok(datasets)
}
