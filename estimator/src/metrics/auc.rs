//! `tf.metrics.auc` (TF1): the area under the ROC curve from weighted confusion counts at
//! fixed thresholds, summed with the trapezoidal rule, TF's defaults (200 thresholds).

use super::weights::{broadcast_weights, same_dims};
use super::{Metric, MetricError};
use tessel_compiler::ir::Array;

/// Streaming AUC (ROC, trapezoidal). Predictions are probabilities in `[0, 1]`; labels are
/// cast to bool (nonzero is positive).
#[derive(Clone, Debug, PartialEq)]
pub struct Auc {
    thresholds: Vec<f64>,
    /// Per threshold: true positives, false negatives, true negatives, false positives.
    tp: Vec<f64>,
    fn_: Vec<f64>,
    tn: Vec<f64>,
    fp: Vec<f64>,
}

impl Default for Auc {
    fn default() -> Auc {
        Auc::new(200)
    }
}

impl Auc {
    /// TF's thresholds: `-1e-7`, `i / (n - 1)` for `i` in `1..n-1`, `1 + 1e-7` (n >= 2; a
    /// smaller n is taken as 2).
    pub fn new(num_thresholds: usize) -> Auc {
        const KEPSILON: f64 = 1e-7;
        let n = num_thresholds.max(2);
        let mut thresholds = vec![-KEPSILON];
        // TF computes these in f32; the f32 values are kept so ties fall on the same side.
        thresholds.extend((0..n - 2).map(|i| ((i + 1) as f32 / (n - 1) as f32) as f64));
        thresholds.push(1.0 + KEPSILON);
        let z = vec![0.0; n];
        Auc {
            thresholds,
            tp: z.clone(),
            fn_: z.clone(),
            tn: z.clone(),
            fp: z,
        }
    }

    /// Adds a batch. A prediction outside `[0, 1]` is TF's assertion error.
    pub fn update(
        &mut self,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) -> Result<(), MetricError> {
        same_dims("auc", labels, predictions)?;
        let w = broadcast_weights(labels, weights)?;
        for (i, &w) in w.iter().enumerate() {
            let p = predictions.data.get_f64(i);
            // TF compares in the predictions' f32.
            let p = p as f32 as f64;
            if !(0.0..=1.0).contains(&p) {
                return Err(MetricError::Range {
                    what: "auc",
                    message: format!("predictions must be in [0, 1], found {p}"),
                });
            }
            let label = labels.data.get_f64(i) != 0.0;
            for (t, &threshold) in self.thresholds.iter().enumerate() {
                match (label, p > threshold) {
                    (true, true) => self.tp[t] += w,
                    (true, false) => self.fn_[t] += w,
                    (false, false) => self.tn[t] += w,
                    (false, true) => self.fp[t] += w,
                }
            }
        }
        Ok(())
    }
}

impl Metric for Auc {
    /// `sum((fpr[i] - fpr[i+1]) * (tpr[i] + tpr[i+1]) / 2)` with TF's epsilon.
    fn result(&self) -> f64 {
        const EPSILON: f64 = 1e-7;
        let n = self.thresholds.len();
        let tpr: Vec<f64> = (0..n)
            .map(|t| (self.tp[t] + EPSILON) / (self.tp[t] + self.fn_[t] + EPSILON))
            .collect();
        let fpr: Vec<f64> = (0..n)
            .map(|t| self.fp[t] / (self.fp[t] + self.tn[t] + EPSILON))
            .collect();
        (0..n - 1)
            .map(|i| (fpr[i] - fpr[i + 1]) * (tpr[i] + tpr[i + 1]) / 2.0)
            .sum()
    }
}
