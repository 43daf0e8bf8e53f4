//! `tf.metrics.mean`: the weighted mean of every value seen.

use super::weights::broadcast_weights;
use super::{div_no_nan, Metric, MetricError};
use tessel_compiler::ir::Array;

/// Streaming weighted mean: `sum(values * weights) / sum(weights)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mean {
    total: f64,
    count: f64,
}

impl Mean {
    pub fn new() -> Mean {
        Mean::default()
    }

    /// Adds a batch of values (any shape) with optional weights.
    pub fn update(&mut self, values: &Array, weights: Option<&Array>) -> Result<(), MetricError> {
        let w = broadcast_weights(values, weights)?;
        self.add((0..values.len()).map(|i| values.data.get_f64(i)), &w);
        Ok(())
    }

    /// Adds `values` with one weight each.
    pub(crate) fn add(&mut self, values: impl Iterator<Item = f64>, weights: &[f64]) {
        for (v, &w) in values.zip(weights) {
            self.total += v * w;
            self.count += w;
        }
    }

    /// The sum of weights so far (TF's `count`).
    pub fn count(&self) -> f64 {
        self.count
    }
}

impl Metric for Mean {
    fn result(&self) -> f64 {
        div_no_nan(self.total, self.count)
    }
}
