//! The model suite: five models as a TF user writes them with TPUEstimator, each with the
//! synthetic data its timing trains on. `tests/benches/tf/models.py` holds their TF 2.15
//! twins (the same layers, initializers, optimizers and batch sizes), and
//! `tests/benches/models_vs_tf.sh` runs both sides.
//!
//! | file | model | batch |
//! | --- | --- | --- |
//! | `mnist.rs` | the guide's MNIST CNN (`examples/mnist.rs`), SGD | 128 |
//! | `fashion.rs` | the Fashion-MNIST CNN (`examples/fashion_mnist.rs`), Adam, cosine decay | 128 |
//! | `resnet20.rs` | ResNet-20 on 32x32x3, momentum SGD | 128 |
//! | `mlp.rs` | 784-1024-1024-10 with dropout, Adam | 256 |
//! | `textcnn.rs` | embedding 20k x 128, conv1d, global max pool, Adam | 64 |
//! | `synthetic.rs` | fixed-seed random examples, cycled |  |
//! | `real_data.rs` | the real data of the accuracy runs |  |

mod fashion;
mod mlp;
mod mnist;
pub mod real_data;
mod resnet20;
pub mod synthetic;
mod textcnn;

use tessel_compiler::trace::Tensor;
use tessel_estimator::estimator::{require_labels, EvalMetrics, Features};
use tessel_estimator::input::Dataset;
use tessel_estimator::losses::{self, Reduction};
use tessel_estimator::model::TrainOp;
use tessel_estimator::{EstimatorError, Graph, Mode, Params, TpuEstimatorSpec};

/// A TPUEstimator model_fn.
pub type ModelFn = fn(
    &mut Graph,
    &Features,
    Option<&Tensor>,
    Mode,
    &Params,
) -> Result<TpuEstimatorSpec, EstimatorError>;

/// One model of the suite.
pub struct SuiteModel {
    /// The batch the suite times it at.
    pub batch: usize,
    pub model_fn: ModelFn,
    /// `examples` synthetic examples (features and an s32 `label` in 0..10), from `seed`.
    pub data: fn(examples: usize, seed: u32) -> Result<Dataset, EstimatorError>,
    /// The model_fn's params for a run of `train_steps` steps (a schedule's length).
    pub params: fn(train_steps: u64) -> Params,
}

/// The suite's models, in the order the driver runs them.
pub const NAMES: [&str; 5] = ["mnist", "fashion", "resnet20", "mlp", "textcnn"];

/// The model called `name`, or `None`.
pub fn model(name: &str) -> Option<SuiteModel> {
    Some(match name {
        "mnist" => mnist::MODEL,
        "fashion" => fashion::MODEL,
        "resnet20" => resnet20::MODEL,
        "mlp" => mlp::MODEL,
        "textcnn" => textcnn::MODEL,
        _ => return None,
    })
}

/// The classifier's spec around `logits` `[B, 10]`: predictions (classes, probabilities),
/// sparse softmax cross-entropy on the s32 labels, accuracy in evaluation, and in training
/// the train op `minimize` makes from the loss.
pub fn classifier_spec(
    g: &mut Graph,
    logits: &Tensor,
    labels: Option<&Tensor>,
    mode: Mode,
    minimize: impl FnOnce(&mut Graph, &Tensor) -> Result<TrainOp, EstimatorError>,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let mut spec = TpuEstimatorSpec::new(mode);
    if mode == Mode::Predict {
        spec.predictions = vec![
            ("classes".into(), logits.argmax(1)),
            ("probabilities".into(), logits.softmax(1)),
        ];
        return Ok(spec);
    }
    let labels = require_labels(labels, mode)?;
    let loss = losses::sparse_softmax_cross_entropy(g, labels, logits, None, Reduction::default());
    match mode {
        Mode::Train => spec.train_op = Some(minimize(g, &loss)?),
        _ => {
            let metric_fn =
                |m: &mut tessel_estimator::metrics::MetricSet,
                 t: &tessel_estimator::estimator::HostTensors| {
                    m.accuracy("accuracy", &t["labels"], &t["classes"], None)
                };
            spec.eval_metrics = Some(EvalMetrics::new(
                metric_fn,
                vec![("labels", labels.clone()), ("classes", logits.argmax(1))],
            ));
        }
    }
    spec.loss = Some(loss);
    Ok(spec)
}
