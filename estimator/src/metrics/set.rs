//! `MetricSet`: the named streaming metrics a `metric_fn` updates, one evaluation batch at a
//! time (TF's dict of `(value_op, update_op)` pairs, run on the host).
//!
//! A metric is created by its first update under a name; later updates of that name add
//! batches. A shape error is kept (the first one) and reported by `evaluate` after the
//! batch, naming the metric and the metric_fn's line.
//!
//! In `evaluate` the set holds the batch's padding mask (1 real, 0 padding): every update
//! multiplies it into its weights, or uses it alone when the weights are `None`, so a
//! metric_fn written as in TF counts exactly the real examples.

use super::weights::padded_weights;
use super::{Accuracy, Auc, Mean, MeanSquaredError, Metric, Precision, Recall, TopKAccuracy};
use std::panic::Location;
use tessel_compiler::ir::Array;

enum Streaming {
    Accuracy(Accuracy),
    Mean(Mean),
    Precision(Precision),
    Recall(Recall),
    MeanSquaredError(MeanSquaredError),
    Auc(Auc),
    TopK(TopKAccuracy),
}

impl Streaming {
    fn result(&self) -> f64 {
        match self {
            Streaming::Accuracy(m) => m.result(),
            Streaming::Mean(m) => m.result(),
            Streaming::Precision(m) => m.result(),
            Streaming::Recall(m) => m.result(),
            Streaming::MeanSquaredError(m) => m.result(),
            Streaming::Auc(m) => m.result(),
            Streaming::TopK(m) => m.result(),
        }
    }
}

/// Named streaming metrics, in the order they were first updated.
#[derive(Default)]
pub struct MetricSet {
    metrics: Vec<(String, Streaming)>,
    error: Option<String>,
    /// The batch's padding mask, multiplied into every update's weights.
    padding: Option<Array>,
}

impl MetricSet {
    pub fn new() -> MetricSet {
        MetricSet::default()
    }

    /// The padding mask of the batch the next updates see (f32 `[batch]`, 1 real, 0 padding):
    /// each update's weights are multiplied by it, or are it when `None`.
    pub(crate) fn set_padding_mask(&mut self, mask: Option<Array>) {
        self.padding = mask;
    }

    /// `tf.metrics.accuracy(labels, predictions, weights)` under `name`.
    #[track_caller]
    pub fn accuracy(
        &mut self,
        name: &str,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) {
        let at = Location::caller();
        let r = self.weights(labels, weights).and_then(|w| {
            match self.entry(name, || Streaming::Accuracy(Accuracy::new())) {
                Streaming::Accuracy(m) => m
                    .update(labels, predictions, w.as_ref())
                    .map_err(|e| e.to_string()),
                _ => Err(kind_changed(name)),
            }
        });
        self.keep(name, at, r);
    }

    /// `tf.metrics.mean(values, weights)` under `name`.
    #[track_caller]
    pub fn mean(&mut self, name: &str, values: &Array, weights: Option<&Array>) {
        let at = Location::caller();
        let r = self.weights(values, weights).and_then(|w| {
            match self.entry(name, || Streaming::Mean(Mean::new())) {
                Streaming::Mean(m) => m.update(values, w.as_ref()).map_err(|e| e.to_string()),
                _ => Err(kind_changed(name)),
            }
        });
        self.keep(name, at, r);
    }

    /// `tf.metrics.precision(labels, predictions, weights)` under `name`.
    #[track_caller]
    pub fn precision(
        &mut self,
        name: &str,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) {
        let at = Location::caller();
        let r = self.weights(labels, weights).and_then(|w| {
            match self.entry(name, || Streaming::Precision(Precision::new())) {
                Streaming::Precision(m) => m
                    .update(labels, predictions, w.as_ref())
                    .map_err(|e| e.to_string()),
                _ => Err(kind_changed(name)),
            }
        });
        self.keep(name, at, r);
    }

    /// `tf.metrics.recall(labels, predictions, weights)` under `name`.
    #[track_caller]
    pub fn recall(
        &mut self,
        name: &str,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) {
        let at = Location::caller();
        let r = self.weights(labels, weights).and_then(|w| {
            match self.entry(name, || Streaming::Recall(Recall::new())) {
                Streaming::Recall(m) => m
                    .update(labels, predictions, w.as_ref())
                    .map_err(|e| e.to_string()),
                _ => Err(kind_changed(name)),
            }
        });
        self.keep(name, at, r);
    }

    /// `tf.metrics.mean_squared_error(labels, predictions, weights)` under `name`.
    #[track_caller]
    pub fn mean_squared_error(
        &mut self,
        name: &str,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) {
        let at = Location::caller();
        let r = self.weights(labels, weights).and_then(|w| {
            match self.entry(
                name,
                || Streaming::MeanSquaredError(MeanSquaredError::new()),
            ) {
                Streaming::MeanSquaredError(m) => m
                    .update(labels, predictions, w.as_ref())
                    .map_err(|e| e.to_string()),
                _ => Err(kind_changed(name)),
            }
        });
        self.keep(name, at, r);
    }

    /// `tf.metrics.auc(labels, predictions, weights, num_thresholds)` under `name` (ROC,
    /// trapezoidal; TF's default is 200 thresholds). Predictions are probabilities.
    #[track_caller]
    pub fn auc(
        &mut self,
        name: &str,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
        num_thresholds: usize,
    ) {
        let at = Location::caller();
        let r = self.weights(labels, weights).and_then(|w| {
            match self.entry(name, || Streaming::Auc(Auc::new(num_thresholds))) {
                Streaming::Auc(m) => m
                    .update(labels, predictions, w.as_ref())
                    .map_err(|e| e.to_string()),
                _ => Err(kind_changed(name)),
            }
        });
        self.keep(name, at, r);
    }

    /// Top-k accuracy (`in_top_k`) of scores `[batch, classes]` for integer labels `[batch]`
    /// under `name`.
    #[track_caller]
    pub fn top_k_accuracy(
        &mut self,
        name: &str,
        labels: &Array,
        predictions: &Array,
        k: usize,
        weights: Option<&Array>,
    ) {
        let at = Location::caller();
        let r = self.weights(labels, weights).and_then(|w| {
            match self.entry(name, || Streaming::TopK(TopKAccuracy::new(k))) {
                Streaming::TopK(m) => m
                    .update(labels, predictions, w.as_ref())
                    .map_err(|e| e.to_string()),
                _ => Err(kind_changed(name)),
            }
        });
        self.keep(name, at, r);
    }

    /// The weights an update uses: the user's times the padding mask (see the module doc).
    fn weights(&self, values: &Array, weights: Option<&Array>) -> Result<Option<Array>, String> {
        match &self.padding {
            None => Ok(weights.cloned()),
            Some(mask) => padded_weights(values, weights, mask).map(Some),
        }
    }

    /// Every metric's value so far, by name, in first-update order.
    pub fn results(&self) -> Vec<(String, f64)> {
        self.metrics
            .iter()
            .map(|(n, m)| (n.clone(), m.result()))
            .collect()
    }

    /// The first update that failed: the metric's name and why.
    pub fn error(&self) -> Option<String> {
        self.error.clone()
    }

    fn entry(&mut self, name: &str, make: impl FnOnce() -> Streaming) -> &mut Streaming {
        let i = match self.metrics.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.metrics.push((name.to_string(), make()));
                self.metrics.len() - 1
            }
        };
        &mut self.metrics[i].1
    }

    fn keep(&mut self, name: &str, at: &Location<'_>, r: Result<(), String>) {
        if let (Err(e), None) = (r, &self.error) {
            self.error = Some(format!("metric `{name}` (at {at}): {e}"));
        }
    }
}

fn kind_changed(name: &str) -> String {
    format!("`{name}` was first updated as another kind of metric; give each metric its own name")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::ir::{ArrayData, ArrayShape, ElementType};

    fn s32(v: Vec<i32>) -> Array {
        Array::new(
            ArrayShape::new(ElementType::S32, &[v.len() as i64]),
            ArrayData::S32(v),
        )
    }

    #[test]
    fn streams_by_name_and_reports_the_first_error() {
        let mut m = MetricSet::new();
        let labels = s32(vec![1, 2, 3, 4]);
        m.accuracy("accuracy", &labels, &s32(vec![1, 2, 0, 0]), None);
        m.accuracy("accuracy", &labels, &s32(vec![1, 2, 3, 4]), None);
        assert_eq!(m.results(), vec![("accuracy".to_string(), 0.75)]);
        assert_eq!(m.error(), None);
        m.mean("accuracy", &labels, None);
        assert!(m.error().unwrap().contains("another kind"));
        m.accuracy("acc2", &labels, &s32(vec![1, 2, 3]), None);
        assert!(
            m.error().unwrap().contains("another kind"),
            "the first error is kept"
        );
    }
}
