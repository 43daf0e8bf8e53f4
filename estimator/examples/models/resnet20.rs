//! ResNet-20 on `image` f32[32, 32, 3]: a 3x3 convolution of 16 filters (no bias), batch
//! normalization and ReLU; three stages of three basic blocks of 16, 32 and 64 filters; a
//! global average pool and dense 10. A block is conv 3x3 (stride s) - BN - ReLU - conv 3x3 -
//! BN, plus the shortcut (the identity, or where s = 2 and the filters double, a 1x1
//! convolution of stride 2 and BN), added, then ReLU. Convolutions are `same`, without bias,
//! glorot-uniform; BN has momentum 0.9 and epsilon 1e-5 (its moving averages updated each
//! step, as TF's `UPDATE_OPS`). Momentum SGD, lr 0.1, momentum 0.9, no weight decay. Batch 128.

use super::{classifier_spec, synthetic, SuiteModel};
use tessel_compiler::trace::Tensor;
use tessel_estimator::estimator::Features;
use tessel_estimator::model::layers::{
    batch_normalization, conv2d, dense, global_average_pooling, BatchNorm, Conv2d, Dense, Padding,
};
use tessel_estimator::model::optimizers::Momentum;
use tessel_estimator::model::{CrossShardOptimizer, Optimizer};
use tessel_estimator::{EstimatorError, Graph, Mode, Params, TpuEstimatorSpec};

pub const MODEL: SuiteModel = SuiteModel {
    batch: 128,
    model_fn,
    data: |examples, seed| {
        let images = synthetic::uniform(examples, &[32, 32, 3], -0.5, 0.5, seed);
        synthetic::labelled("image", images, seed)
    },
    params: |_| Params::new(),
};

/// A bias-free `same` convolution.
fn conv(
    g: &mut Graph,
    x: &Tensor,
    filters: i64,
    k: i64,
    stride: i64,
) -> Result<Tensor, EstimatorError> {
    let options = Conv2d {
        strides: [stride, stride],
        padding: Padding::Same,
        use_bias: false,
        ..Conv2d::default()
    };
    Ok(conv2d(g, x, filters, [k, k], options)?)
}

fn bn(g: &mut Graph, x: &Tensor, training: bool) -> Result<Tensor, EstimatorError> {
    let options = BatchNorm {
        momentum: 0.9,
        epsilon: 1e-5,
        ..BatchNorm::default()
    };
    Ok(batch_normalization(g, x, options, training)?)
}

fn block(
    g: &mut Graph,
    x: &Tensor,
    filters: i64,
    stride: i64,
    training: bool,
) -> Result<Tensor, EstimatorError> {
    let y = conv(g, x, filters, 3, stride)?;
    let y = bn(g, &y, training)?.relu();
    let y = conv(g, &y, filters, 3, 1)?;
    let y = bn(g, &y, training)?;
    let shortcut = if stride == 1 {
        x.clone()
    } else {
        let s = conv(g, x, filters, 1, stride)?;
        bn(g, &s, training)?
    };
    Ok((y + shortcut).relu())
}

fn model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    _params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let training = mode == Mode::Train;
    let x = conv(g, &features["image"], 16, 3, 1)?;
    let mut x = bn(g, &x, training)?.relu();
    for (stage, filters) in [16, 32, 64].into_iter().enumerate() {
        for b in 0..3 {
            let stride = if stage > 0 && b == 0 { 2 } else { 1 };
            x = block(g, &x, filters, stride, training)?;
        }
    }
    let x = global_average_pooling(g, &x)?;
    let logits = dense(g, &x, 10, Dense::default())?;
    classifier_spec(g, &logits, labels, mode, |g, loss| {
        Ok(CrossShardOptimizer::new(Momentum::new(0.1, 0.9)).minimize(g, loss)?)
    })
}
