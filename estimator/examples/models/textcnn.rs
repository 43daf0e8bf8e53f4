//! A text CNN: `ids` s32[200] token ids in 0..20000, an embedding 20000 x 128 (uniform in
//! [-0.05, 0.05]), conv1d of 128 filters of width 5 (valid, ReLU, with bias), a global max
//! pool over time, dense 10; sparse softmax cross-entropy; Adam at 1e-3. Batch 64. The
//! embedding is a gather, so its gradient is a scatter-add into the rows the batch read.

use super::{classifier_spec, synthetic, SuiteModel};
use tessel_compiler::trace::Tensor;
use tessel_estimator::estimator::Features;
use tessel_estimator::model::layers::{
    conv1d, dense, embedding, global_max_pooling, Activation, Conv1d, Dense, Embedding,
};
use tessel_estimator::model::optimizers::Adam;
use tessel_estimator::model::{CrossShardOptimizer, Optimizer};
use tessel_estimator::{EstimatorError, Graph, Mode, Params, TpuEstimatorSpec};

const VOCABULARY: i64 = 20000;
const LENGTH: i64 = 200;

pub const MODEL: SuiteModel = SuiteModel {
    batch: 64,
    model_fn,
    data: |examples, seed| {
        let ids = synthetic::integers(examples, &[LENGTH], VOCABULARY as i32, seed);
        synthetic::labelled("ids", ids, seed)
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
    let x = embedding(g, &features["ids"], VOCABULARY, 128, Embedding::default())?;
    let relu = Conv1d {
        activation: Activation::Relu,
        ..Conv1d::default()
    };
    let x = conv1d(g, &x, 128, 5, relu)?;
    let x = global_max_pooling(g, &x)?;
    let logits = dense(g, &x, 10, Dense::default())?;
    classifier_spec(g, &logits, labels, mode, |g, loss| {
        Ok(CrossShardOptimizer::new(Adam::new(1e-3)).minimize(g, loss)?)
    })
}
