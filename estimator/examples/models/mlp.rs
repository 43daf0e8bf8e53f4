//! An MLP: `image` f32[784], dense 1024 ReLU, dropout 0.2, dense 1024 ReLU, dropout 0.2,
//! dense 10; sparse softmax cross-entropy; Adam at 1e-3 (TF 1's defaults: beta1 0.9, beta2
//! 0.999, epsilon 1e-8). Batch 256.

use super::{classifier_spec, synthetic, SuiteModel};
use tessel_compiler::trace::Tensor;
use tessel_estimator::estimator::Features;
use tessel_estimator::model::layers::{dense, dropout, Activation, Dense};
use tessel_estimator::model::optimizers::Adam;
use tessel_estimator::model::{CrossShardOptimizer, Optimizer};
use tessel_estimator::{EstimatorError, Graph, Mode, Params, TpuEstimatorSpec};

pub const MODEL: SuiteModel = SuiteModel {
    batch: 256,
    model_fn,
    data: |examples, seed| {
        let images = synthetic::uniform(examples, &[784], -0.5, 0.5, seed);
        synthetic::labelled("image", images, seed)
    },
    params: |_| Params::new(),
};

fn model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    _params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let training = mode == Mode::Train;
    let relu = || Dense {
        activation: Activation::Relu,
        ..Dense::default()
    };
    let mut x = features["image"].clone();
    for _ in 0..2 {
        x = dense(g, &x, 1024, relu())?;
        x = dropout(g, &x, 0.2, training)?;
    }
    let logits = dense(g, &x, 10, Dense::default())?;
    classifier_spec(g, &logits, labels, mode, |g, loss| {
        Ok(CrossShardOptimizer::new(Adam::new(1e-3)).minimize(g, loss)?)
    })
}
