//! `tf.metrics.precision` and `tf.metrics.recall` on binary labels and predictions (both
//! cast to bool: nonzero is true, as TF's `cast(x, bool)`), from weighted counts of true
//! positives, false positives and false negatives.

use super::weights::{broadcast_weights, same_dims};
use super::{div_no_nan, Metric, MetricError};
use tessel_compiler::ir::Array;

/// Weighted confusion counts of a binary classifier.
#[derive(Clone, Debug, Default, PartialEq)]
struct Counts {
    true_positives: f64,
    false_positives: f64,
    false_negatives: f64,
}

impl Counts {
    fn update(
        &mut self,
        what: &'static str,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) -> Result<(), MetricError> {
        same_dims(what, labels, predictions)?;
        let w = broadcast_weights(labels, weights)?;
        for (i, &w) in w.iter().enumerate() {
            let label = labels.data.get_f64(i) != 0.0;
            let predicted = predictions.data.get_f64(i) != 0.0;
            match (label, predicted) {
                (true, true) => self.true_positives += w,
                (false, true) => self.false_positives += w,
                (true, false) => self.false_negatives += w,
                (false, false) => {}
            }
        }
        Ok(())
    }
}

/// Streaming precision: `tp / (tp + fp)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Precision {
    counts: Counts,
}

impl Precision {
    pub fn new() -> Precision {
        Precision::default()
    }

    pub fn update(
        &mut self,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) -> Result<(), MetricError> {
        self.counts
            .update("precision", labels, predictions, weights)
    }
}

impl Metric for Precision {
    fn result(&self) -> f64 {
        let c = &self.counts;
        div_no_nan(c.true_positives, c.true_positives + c.false_positives)
    }
}

/// Streaming recall: `tp / (tp + fn)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recall {
    counts: Counts,
}

impl Recall {
    pub fn new() -> Recall {
        Recall::default()
    }

    pub fn update(
        &mut self,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) -> Result<(), MetricError> {
        self.counts.update("recall", labels, predictions, weights)
    }
}

impl Metric for Recall {
    fn result(&self) -> f64 {
        let c = &self.counts;
        div_no_nan(c.true_positives, c.true_positives + c.false_negatives)
    }
}
