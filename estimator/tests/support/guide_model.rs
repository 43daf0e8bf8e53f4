//! The guide's MNIST model_fn (TPUEstimator's guide, as in `estimator/examples/mnist.rs`) written with tessel's
//! layers, line for line: reshape, conv2d 32 5x5 same relu, max_pool 2, conv2d 64, max_pool,
//! flatten, dense 128 relu, dropout 0.4 in training, dense 10.

use tessel_compiler::trace::Tensor;
use tessel_estimator::model::layers::{
    conv2d, dense, dropout, max_pooling2d, Activation, Conv2d, Dense, LayerError, Padding,
};
use tessel_estimator::model::{Graph, Mode};

/// The logits `[batch, 10]` of `features` `[batch, 784]`.
pub fn guide_logits(g: &mut Graph, features: &Tensor) -> Result<Tensor, LayerError> {
    let same_relu = || Conv2d {
        padding: Padding::Same,
        activation: Activation::Relu,
        ..Conv2d::default()
    };
    let x = features.reshape(&[-1, 28, 28, 1]);
    let x = conv2d(g, &x, 32, [5, 5], same_relu())?;
    let x = max_pooling2d(g, &x, [2, 2], [2, 2], Padding::Valid)?;
    let x = conv2d(g, &x, 64, [5, 5], same_relu())?;
    let x = max_pooling2d(g, &x, [2, 2], [2, 2], Padding::Valid)?;
    let relu = Dense {
        activation: Activation::Relu,
        ..Dense::default()
    };
    let x = dense(g, &x.reshape(&[-1, 7 * 7 * 64]), 128, relu)?;
    let training = g.mode == Mode::Train;
    let x = dropout(g, &x, 0.4, training)?;
    dense(g, &x, 10, Dense::default())
}

/// The guide's loss: softmax cross-entropy of the one-hot labels, averaged over the batch.
pub fn guide_loss(logits: &Tensor, labels: &Tensor) -> Tensor {
    let onehot = labels.one_hot(10, tessel_compiler::ir::ElementType::F32);
    logits
        .softmax_cross_entropy_with_logits(&onehot)
        .reduce_mean(&[], false)
}
