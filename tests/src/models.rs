//! Models written with the tracing API, used by the trace and legality tests.
//!
//! `mnist_cnn` is the MNIST CNN of TPUEstimator's guide, layer for layer as in the JAX corpus
//! (`mnist_cnn_*.hlo`): conv 5x5x32 + relu, max-pool 2x2, conv 5x5x64 + relu, max-pool 2x2,
//! dense 128 + relu, dropout 0.4, dense 10, softmax cross-entropy. Parameters come in the
//! corpus's order (biases and weights sorted by name, then the batch).

use tessel_compiler::ir::ElementType::{self, F32};
use tessel_compiler::ir::Module;
use tessel_compiler::trace::{Dim, Padding, Tensor, TraceError, Tracer};

/// `relu(x @ w + b)` or, when `activate` is false, `x @ w + b`.
fn dense(t: &mut Tracer, name: &str, x: &Tensor, w: &Tensor, b: &Tensor, activate: bool) -> Tensor {
    t.scope(name, |_| {
        let y = x.matmul(w) + b;
        if activate {
            y.relu()
        } else {
            y
        }
    })
}

/// Mean softmax cross-entropy of `logits` against integer `labels`.
fn loss(t: &mut Tracer, logits: &Tensor, labels: &Tensor) -> Tensor {
    t.scope("loss", |_| {
        let targets = labels.one_hot(10, F32);
        logits
            .softmax_cross_entropy_with_logits(&targets)
            .reduce_mean(&[], false)
    })
}

/// A two-layer perceptron on flattened MNIST images: 784 -> 128 (relu) -> 10, returning
/// `(loss, logits)`. `batch` may be unknown and `labels` 64-bit to show what legality rejects.
/// Written without helpers so that its diagnostics follow the lines below in order.
pub fn mlp(batch: Dim, labels: ElementType) -> Result<Module, TraceError> {
    let mut t = Tracer::new("mlp");
    let b1 = t.parameter("b1", &[128], F32);
    let w1 = t.parameter("w1", &[784, 128], F32);
    let b2 = t.parameter("b2", &[10], F32);
    let w2 = t.parameter("w2", &[128, 10], F32);
    let x = t.parameter("images", &[batch, Dim::Fixed(784)], F32);
    let y = t.parameter("labels", &[batch], labels);
    let h = t.scope("dense1", |_| (x.matmul(&w1) + &b1).relu());
    let logits = t.scope("dense2", |_| h.matmul(&w2) + &b2);
    let targets = y.one_hot(10, F32);
    let xent = logits.softmax_cross_entropy_with_logits(&targets);
    let loss = xent.reduce_mean(&[], false);
    t.finish(&[&loss, &logits])
}

/// `relu(conv2d(x, w) + b)` then a 2x2 max-pool, all SAME padded.
fn conv_block(t: &mut Tracer, name: &str, x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    t.scope(name, |_| {
        let y = (x.conv2d(w, [1, 1], Padding::Same) + b).relu();
        y.max_pool([2, 2], [2, 2], Padding::Same)
    })
}

/// The guide's MNIST CNN with dropout driven by a `noise` parameter (uniform in [0, 1)),
/// returning `(loss, logits)`.
pub fn mnist_cnn(batch: Dim, labels: ElementType) -> Result<Module, TraceError> {
    let mut t = Tracer::new("mnist_cnn");
    let c1b = t.parameter("c1b", &[32], F32);
    let c1w = t.parameter("c1w", &[5, 5, 1, 32], F32);
    let c2b = t.parameter("c2b", &[64], F32);
    let c2w = t.parameter("c2w", &[5, 5, 32, 64], F32);
    let d1b = t.parameter("d1b", &[128], F32);
    let d1w = t.parameter("d1w", &[3136, 128], F32);
    let d2b = t.parameter("d2b", &[10], F32);
    let d2w = t.parameter("d2w", &[128, 10], F32);
    let images = t.parameter("images", &[batch, Dim::Fixed(784)], F32);
    let y = t.parameter("labels", &[batch], labels);
    let noise = t.parameter("noise", &[batch, Dim::Fixed(128)], F32);
    let x = images.reshape(&[-1, 28, 28, 1]);
    let x = conv_block(&mut t, "conv1", &x, &c1w, &c1b);
    let x = conv_block(&mut t, "conv2", &x, &c2w, &c2b);
    let x = x.reshape(&[-1, 7 * 7 * 64]);
    let h = dense(&mut t, "dense1", &x, &d1w, &d1b, true);
    let h = t.scope("dropout", |_| h.dropout(&noise, 0.4));
    let logits = dense(&mut t, "dense2", &h, &d2w, &d2b, false);
    let l = loss(&mut t, &logits, &y);
    t.finish(&[&l, &logits])
}

/// The CNN's prediction: class indices (s32) of a batch of images, like
/// `mnist_cnn_predict_b16.hlo`.
pub fn mnist_cnn_predict(batch: i64) -> Result<Module, TraceError> {
    let mut t = Tracer::new("mnist_cnn_predict");
    let c1b = t.parameter("c1b", &[32], F32);
    let c1w = t.parameter("c1w", &[5, 5, 1, 32], F32);
    let c2b = t.parameter("c2b", &[64], F32);
    let c2w = t.parameter("c2w", &[5, 5, 32, 64], F32);
    let d1b = t.parameter("d1b", &[128], F32);
    let d1w = t.parameter("d1w", &[3136, 128], F32);
    let d2b = t.parameter("d2b", &[10], F32);
    let d2w = t.parameter("d2w", &[128, 10], F32);
    let images = t.parameter("images", &[batch, 784], F32);
    let x = images.reshape(&[-1, 28, 28, 1]);
    let x = conv_block(&mut t, "conv1", &x, &c1w, &c1b);
    let x = conv_block(&mut t, "conv2", &x, &c2w, &c2b);
    let x = x.reshape(&[-1, 7 * 7 * 64]);
    let h = dense(&mut t, "dense1", &x, &d1w, &d1b, true);
    let logits = dense(&mut t, "dense2", &h, &d2w, &d2b, false);
    let classes = logits.argmax(-1);
    t.finish(&[&classes])
}
