//! The Fashion-MNIST CNN of `examples/fashion_mnist.rs` (that file's model_fn): 3x3 same
//! convolutions without bias, batch normalization and ReLU, max pooling (32 then 64
//! filters), dense 256 ReLU, dropout 0.3, dense 10; Adam on a cosine decay of 0.001 over the
//! run. Batch 128 of `image` f32[28, 28, 1] in [0, 1).

// Both examples include common/console.rs; the suite uses only their model_fn.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../fashion_mnist.rs"]
mod example;

use super::{synthetic, SuiteModel};
use tessel_estimator::Params;

pub const MODEL: SuiteModel = SuiteModel {
    batch: 128,
    model_fn: example::model_fn,
    data: |examples, seed| {
        let images = synthetic::uniform(examples, &[28, 28, 1], 0.0, 1.0, seed);
        synthetic::labelled("image", images, seed)
    },
    params: |train_steps| {
        Params::new()
            .with("learning_rate", 0.001)
            .with("train_steps", train_steps as i64)
    },
};
