//! `tf.metrics.mean_squared_error`: the weighted mean of `(labels - predictions)^2`.

use super::mean::Mean;
use super::weights::{broadcast_weights, same_dims};
use super::{Metric, MetricError};
use tessel_compiler::ir::Array;

/// Streaming mean squared error.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeanSquaredError {
    mean: Mean,
}

impl MeanSquaredError {
    pub fn new() -> MeanSquaredError {
        MeanSquaredError::default()
    }

    pub fn update(
        &mut self,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) -> Result<(), MetricError> {
        same_dims("mean_squared_error", labels, predictions)?;
        let w = broadcast_weights(labels, weights)?;
        let squares = (0..labels.len()).map(|i| {
            let d = labels.data.get_f64(i) - predictions.data.get_f64(i);
            d * d
        });
        self.mean.add(squares, &w);
        Ok(())
    }
}

impl Metric for MeanSquaredError {
    fn result(&self) -> f64 {
        self.mean.result()
    }
}
