//! `tf.metrics.accuracy`: the weighted fraction of predictions equal to the labels.

use super::mean::Mean;
use super::weights::{broadcast_weights, same_dims};
use super::{Metric, MetricError};
use tessel_compiler::ir::Array;

/// Streaming accuracy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Accuracy {
    mean: Mean,
}

impl Accuracy {
    pub fn new() -> Accuracy {
        Accuracy::default()
    }

    /// Adds a batch. Predictions of another type are cast to the labels' type first, as TF
    /// does (float predictions of integer labels are truncated toward zero).
    pub fn update(
        &mut self,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) -> Result<(), MetricError> {
        same_dims("accuracy", labels, predictions)?;
        let w = broadcast_weights(labels, weights)?;
        let integer_labels = !labels.element_type().is_float();
        let correct = (0..labels.len()).map(|i| {
            let p = predictions.data.get_f64(i);
            let p = if integer_labels { p.trunc() } else { p };
            (labels.data.get_f64(i) == p) as u8 as f64
        });
        self.mean.add(correct, &w);
        Ok(())
    }
}

impl Metric for Accuracy {
    fn result(&self) -> f64 {
        self.mean.result()
    }
}
