//! What a model_fn returns: TPUEstimator's `TPUEstimatorSpec`, and the features it gets.

use crate::model::optimizers::TrainOp;
use crate::model::Mode;
use std::ops::Index;
use tessel_compiler::ir::Array;
use tessel_compiler::trace::Tensor;

/// The features the input_fn's dataset gave, by name, as tensors of the trace (per-shard
/// batch shapes).
#[derive(Clone)]
pub struct Features {
    pub(crate) entries: Vec<(String, Tensor)>,
    /// EVAL's per-example mask, f32 `[batch]`: 1 for a real example, 0 for padding.
    pub(crate) mask: Option<Tensor>,
}

impl Features {
    /// Features from named tensors of a trace (the export's serving input).
    pub(crate) fn from_entries(entries: Vec<(String, Tensor)>) -> Features {
        Features {
            entries,
            mask: None,
        }
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// The names, in the dataset's order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// In EVAL, the per-example mask (f32 `[batch]`, 1 real, 0 padding of the last batch):
    /// the loss must be the mean over the real examples, e.g. `sum(loss_i * mask) /
    /// max(sum(mask), 1)` (docs/estimator.md). `None` in TRAIN and PREDICT.
    pub fn mask(&self) -> Option<&Tensor> {
        self.mask.as_ref()
    }

    /// The only feature, when the dataset has one (TF's `features` as a bare tensor).
    pub fn single(&self) -> Option<&Tensor> {
        match self.entries.as_slice() {
            [(_, t)] => Some(t),
            _ => None,
        }
    }
}

impl Index<&str> for Features {
    type Output = Tensor;
    /// Panics when the dataset has no such feature, as `features["x"]` raises `KeyError`.
    fn index(&self, name: &str) -> &Tensor {
        self.get(name).unwrap_or_else(|| {
            let names: Vec<&str> = self.names().collect();
            panic!("features has no key {name:?} (it has {names:?})")
        })
    }
}

/// The host half of `eval_metrics = (metric_fn, tensors)`: called once per evaluation batch
/// with the named tensors' values (concatenated over the shards in replica order) and the
/// batch's per-example mask (`HostTensors::mask`, 0 for padding: pass it as the weights), it
/// updates streaming metrics in the given set.
pub type MetricFn = Box<dyn Fn(&mut crate::metrics::MetricSet, &HostTensors) + Send>;

/// Named arrays on the host (one evaluation batch, all shards).
pub struct HostTensors {
    pub(crate) entries: Vec<(String, Array)>,
    /// The batch's per-example mask over every shard (f32 `[global batch]`).
    pub(crate) mask: Option<Array>,
}

impl HostTensors {
    /// The per-example mask (1 real, 0 padding), concatenated over the shards as the
    /// tensors are: pass it as every metric's `weights`. Always `Some` in `evaluate`.
    pub fn mask(&self) -> Option<&Array> {
        self.mask.as_ref()
    }

    pub fn get(&self, name: &str) -> Option<&Array> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }
}

impl Index<&str> for HostTensors {
    type Output = Array;
    fn index(&self, name: &str) -> &Array {
        self.get(name)
            .unwrap_or_else(|| panic!("eval_metrics tensors have no {name:?}"))
    }
}

/// `eval_metrics = (metric_fn, tensors)`.
pub struct EvalMetrics {
    pub metric_fn: MetricFn,
    pub tensors: Vec<(String, Tensor)>,
}

impl EvalMetrics {
    pub fn new(
        metric_fn: impl Fn(&mut crate::metrics::MetricSet, &HostTensors) + Send + 'static,
        tensors: Vec<(&str, Tensor)>,
    ) -> EvalMetrics {
        EvalMetrics {
            metric_fn: Box::new(metric_fn),
            tensors: tensors
                .into_iter()
                .map(|(n, t)| (n.to_string(), t))
                .collect(),
        }
    }
}

/// TPUEstimator's `TPUEstimatorSpec`.
pub struct TpuEstimatorSpec {
    pub mode: Mode,
    /// The scalar loss (TRAIN and EVAL).
    pub loss: Option<Tensor>,
    /// The optimizer's `minimize(loss)` (TRAIN).
    pub train_op: Option<TrainOp>,
    /// Named outputs of PREDICT.
    pub predictions: Vec<(String, Tensor)>,
    /// EVAL's metrics.
    pub eval_metrics: Option<EvalMetrics>,
    /// TPUEstimator's `host_call`: named scalars outfed every step and written as summaries.
    pub host_call: Vec<(String, Tensor)>,
}

impl TpuEstimatorSpec {
    /// A spec of `mode` with nothing set.
    pub fn new(mode: Mode) -> TpuEstimatorSpec {
        TpuEstimatorSpec {
            mode,
            loss: None,
            train_op: None,
            predictions: Vec::new(),
            eval_metrics: None,
            host_call: Vec::new(),
        }
    }
}
