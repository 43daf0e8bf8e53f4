//! Top-k accuracy: the weighted fraction of examples whose label is among the k highest
//! scores, `tf.metrics.mean(tf.nn.in_top_k(predictions, labels, k))` (TF1's
//! `recall_at_k` for one label per example).

use super::mean::Mean;
use super::weights::{broadcast_weights, dims_text};
use super::{Metric, MetricError};
use tessel_compiler::ir::Array;

/// Streaming top-k accuracy of scores `[batch, classes]` against integer labels `[batch]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TopKAccuracy {
    k: usize,
    mean: Mean,
}

impl TopKAccuracy {
    pub fn new(k: usize) -> TopKAccuracy {
        TopKAccuracy {
            k,
            mean: Mean::new(),
        }
    }

    /// Adds a batch. As `in_top_k`: classes tied with the label's score at the boundary all
    /// count as in the top k (the label is in when fewer than k classes score strictly
    /// higher); a label out of range or a non-finite score is not in the top k.
    pub fn update(
        &mut self,
        labels: &Array,
        predictions: &Array,
        weights: Option<&Array>,
    ) -> Result<(), MetricError> {
        let pd = predictions.shape.dims.as_slice();
        let ld = labels.shape.dims.as_slice();
        if pd.len() != 2 || ld != &pd[..1] {
            return Err(MetricError::Shapes {
                what: "top_k_accuracy (labels [batch], predictions [batch, classes])",
                left: dims_text(labels),
                right: dims_text(predictions),
            });
        }
        let w = broadcast_weights(labels, weights)?;
        let classes = pd[1] as usize;
        let hits = (0..labels.len()).map(|i| {
            let label = labels.data.get_f64(i);
            let row = |c: usize| predictions.data.get_f64(i * classes + c);
            if label < 0.0 || label >= classes as f64 || label.fract() != 0.0 {
                return 0.0;
            }
            let target = row(label as usize);
            if !target.is_finite() {
                return 0.0;
            }
            let higher = (0..classes).filter(|&c| row(c) > target).count();
            (higher < self.k) as u8 as f64
        });
        self.mean.add(hits, &w);
        Ok(())
    }
}

impl Metric for TopKAccuracy {
    fn result(&self) -> f64 {
        self.mean.result()
    }
}
