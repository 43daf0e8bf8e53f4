//! What a model_fn returns: TPUEstimator's `TPUEstimatorSpec`, and the features it gets.

use crate::error::EstimatorError;
use crate::model::optimizers::TrainOp;
use crate::model::Mode;
use std::cell::{OnceCell, RefCell};
use std::ops::Index;
use std::panic::Location;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;

/// The features the input_fn's dataset gave, by name, as tensors of the trace (per-shard
/// batch shapes).
#[derive(Clone)]
pub struct Features {
    pub(crate) entries: Vec<(String, Tensor)>,
    /// EVAL's per-example mask, f32 `[batch]`: 1 for a real example, 0 for padding.
    pub(crate) mask: Option<Tensor>,
    /// The component given as `labels`, named when `features["label"]` asks for it.
    pub(crate) labels: Option<String>,
    /// A tensor of the trace, through which a missing name is recorded as a trace error.
    anchor: Tensor,
    /// The failed tensor `features["missing"]` returns.
    missing: OnceCell<Tensor>,
}

impl Features {
    /// Features from named tensors of the trace that `anchor` belongs to.
    pub(crate) fn new(
        entries: Vec<(String, Tensor)>,
        mask: Option<Tensor>,
        labels: Option<String>,
        anchor: &Tensor,
    ) -> Features {
        Features {
            entries,
            mask,
            labels,
            anchor: anchor.clone(),
            missing: OnceCell::new(),
        }
    }

    /// Features from named tensors of a trace (the export's serving input).
    pub(crate) fn from_entries(entries: Vec<(String, Tensor)>, anchor: &Tensor) -> Features {
        Features::new(entries, None, None, anchor)
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// The names, in the dataset's order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// In EVAL, the per-example mask (f32 `[batch]`, 1 real, 0 padding of the last batch),
    /// also [`Graph::padding_mask`](crate::model::Graph::padding_mask); the `losses` functions
    /// and every metric are weighted by it already. `None` in TRAIN and PREDICT.
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

    /// Why `name` is not a feature, listing the features.
    fn missing_message(&self, name: &str) -> String {
        let names: Vec<&str> = self.names().collect();
        let mut message = format!(
            "the input_fn's dataset has no feature `{name}`; its features are {}",
            quoted_list(&names)
        );
        if self.labels.as_deref() == Some(name) {
            message.push_str(&format!(
                " (`{name}` is the labels component: the model_fn gets it as `labels`)"
            ));
        }
        message
    }
}

impl Index<&str> for Features {
    type Output = Tensor;
    /// A name the dataset does not have (TF's `KeyError`) is a trace error at this line,
    /// listing the features, reported with the model_fn's other mistakes before anything is
    /// compiled; the tensor returned is a failed one.
    #[track_caller]
    fn index(&self, name: &str) -> &Tensor {
        match self.get(name) {
            Some(t) => t,
            None => {
                let failed = self.anchor.fail("features", self.missing_message(name));
                self.missing.get_or_init(|| failed)
            }
        }
    }
}

/// `` `a`, `b` `` (or "none").
pub(crate) fn quoted_list(names: &[&str]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    quoted.join(", ")
}

/// The labels a model_fn needs in TRAIN or EVAL, or the error that the input_fn gave none:
/// TF passes `labels=None` to a model_fn whose input_fn returns features only and lets the
/// model_fn decide whether it needs them. `labels.ok_or(..)` with this message, at the
/// caller's line.
#[track_caller]
pub fn require_labels(labels: Option<&Tensor>, mode: Mode) -> Result<&Tensor, EstimatorError> {
    let at = Location::caller();
    labels.ok_or_else(|| {
        EstimatorError::ModelFn(format!(
            "the model_fn needs labels in {} mode (at {at}), but the input_fn gave none: its Input names no labels component (Input::features_only); name it with Input::new(dataset, \"label\")",
            mode_name(mode)
        ))
    })
}

/// `TRAIN`, `EVAL`, `PREDICT`, as TF's `ModeKeys` print.
pub(crate) fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Train => "TRAIN",
        Mode::Eval => "EVAL",
        Mode::Predict => "PREDICT",
    }
}

/// The host half of `eval_metrics = (metric_fn, tensors)`: called once per evaluation batch
/// with the named tensors' values (concatenated over the shards in replica order), it
/// updates streaming metrics in the given set, which weights each by the batch's padding
/// mask. It is also called once when the model_fn is traced, on an all-padding batch of
/// zeros (as TF calls it once to build the graph), so its names and shapes are checked
/// before anything is compiled.
pub type MetricFn = Box<dyn Fn(&mut crate::metrics::MetricSet, &HostTensors) + Send>;

/// Named arrays on the host (one evaluation batch, all shards).
pub struct HostTensors {
    pub(crate) entries: Vec<(String, Array)>,
    /// The batch's per-example mask over every shard (f32 `[global batch]`).
    pub(crate) mask: Option<Array>,
    /// Names the metric_fn asked for that are not there, with the line that asked.
    missing: RefCell<Vec<(String, &'static Location<'static>)>>,
    /// What `tensors["missing"]` returns.
    empty: Array,
}

impl HostTensors {
    pub(crate) fn new(entries: Vec<(String, Array)>, mask: Option<Array>) -> HostTensors {
        HostTensors {
            entries,
            mask,
            missing: RefCell::new(Vec::new()),
            empty: Array::new(
                ArrayShape::new(ElementType::F32, &[0]),
                ArrayData::F32(Vec::new()),
            ),
        }
    }

    /// The per-example mask (1 real, 0 padding), concatenated over the shards as the
    /// tensors are. Every metric of a [`MetricSet`](crate::metrics::MetricSet) is weighted by
    /// it already; pass it only to code of your own. Always `Some` in `evaluate`.
    pub fn mask(&self) -> Option<&Array> {
        self.mask.as_ref()
    }

    pub fn get(&self, name: &str) -> Option<&Array> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    /// The names, in the order of `EvalMetrics::tensors`.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// The names asked for that do not exist, with where, and the names that do.
    pub(crate) fn missing_error(&self) -> Option<String> {
        let missing = self.missing.borrow();
        if missing.is_empty() {
            return None;
        }
        let asked: Vec<String> = missing
            .iter()
            .map(|(name, at)| format!("`{name}` (at {at})"))
            .collect();
        let names: Vec<&str> = self.names().collect();
        Some(format!(
            "the metric_fn asks for {}, but the eval_metrics tensors are {}",
            asked.join(", "),
            quoted_list(&names)
        ))
    }
}

impl Index<&str> for HostTensors {
    type Output = Array;
    /// A name that is not among the eval_metrics tensors is recorded with this line (an empty
    /// array is returned), and `evaluate` reports it before compiling: the metric_fn is run
    /// once on an all-padding batch when the model_fn is traced.
    #[track_caller]
    fn index(&self, name: &str) -> &Array {
        match self.get(name) {
            Some(a) => a,
            None => {
                self.missing
                    .borrow_mut()
                    .push((name.to_string(), Location::caller()));
                &self.empty
            }
        }
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
    /// Hooks `train` runs after the caller's (TF's `training_hooks`).
    pub training_hooks: Vec<Box<dyn crate::hooks::Hook>>,
    /// Hooks `evaluate` runs after the caller's (TF's `evaluation_hooks`).
    pub evaluation_hooks: Vec<Box<dyn crate::hooks::Hook>>,
    /// Hooks `predict` runs after the caller's (TF's `prediction_hooks`).
    pub prediction_hooks: Vec<Box<dyn crate::hooks::Hook>>,
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
            training_hooks: Vec::new(),
            evaluation_hooks: Vec::new(),
            prediction_hooks: Vec::new(),
        }
    }
}
