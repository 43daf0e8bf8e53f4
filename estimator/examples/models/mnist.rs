//! The guide's MNIST CNN, as `examples/mnist.rs` builds it (that file's model_fn): 5x5 same
//! convolutions of 32 and 64 filters with ReLU, each max-pooled, dense 128 ReLU, dropout
//! 0.4, dense 10; SGD on `exponential_decay(0.01, step, 100000, 0.96)`. Batch 128 of
//! `image` f32[784] in [-0.5, 0.5), as the TF peer's synthetic input.

// Both examples include common/console.rs; the suite uses only their model_fn.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../mnist.rs"]
mod example;

use super::{synthetic, SuiteModel};
use tessel_estimator::Params;

pub const MODEL: SuiteModel = SuiteModel {
    batch: 128,
    model_fn: example::model_fn,
    data: |examples, seed| {
        let images = synthetic::uniform(examples, &[784], -0.5, 0.5, seed);
        synthetic::labelled("image", images, seed)
    },
    params: |_| Params::new().with("learning_rate", 0.01),
};
