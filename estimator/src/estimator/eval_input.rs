//! Evaluation's batches: every example exactly once, at the step's static shape.
//!
//! The input_fn may batch without `drop_remainder` (TF's usual eval input): a short last
//! batch is padded with zeros to the per-shard batch here, and every batch gets a per-example
//! mask (1 real, 0 padding) that the step receives as `features.mask()` and the metric_fn as
//! `tensors.mask()`. An input built with `padded_batch_with_mask` names its mask in
//! [`Input::with_mask`](super::Input::with_mask); it is used as is (and padded likewise).
//!
//! Before each loop the host reads ahead the loop's batches, so it knows whether the input ends
//! within the loop: then the loop is shortened to the iterations left, and the shards without a
//! real batch in the last iteration get an all-padding batch (mask 0), so each shard runs the
//! same number of steps.

use super::dealer::Batch;
use super::padding::{pad_batch, padding_batch};
use super::trace_step::{FedComponent, EVAL_MASK};
use crate::error::EstimatorError;
use crate::input::dataset::DatasetIterator;
use crate::input::{Dataset, ElementSpec, Value, ValueSpec};
use std::collections::VecDeque;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

/// The fed components of an evaluation: the dataset's components at the per-shard batch
/// (the input's mask component left out), then the mask `f32[per_shard]`.
pub(crate) fn eval_components(
    spec: &ElementSpec,
    per_shard: usize,
    mask: Option<&str>,
) -> Result<Vec<FedComponent>, EstimatorError> {
    if let Some(name) = mask {
        match spec.index_of(name).map(|i| &spec.components[i].1) {
            Some(ValueSpec::Dense { dims, .. }) if dims.len() == 1 => {}
            Some(_) => {
                return Err(EstimatorError::Input(format!(
                    "the mask component `{name}` must be a vector of per-example weights"
                )))
            }
            None => {
                return Err(EstimatorError::Input(format!(
                    "the input names `{name}` as its mask, but the dataset has no such component"
                )))
            }
        }
    }
    let mut out = Vec::new();
    for (name, vs) in &spec.components {
        if Some(name.as_str()) == mask {
            continue;
        }
        if name == EVAL_MASK {
            return Err(EstimatorError::Input(format!(
                "the component name `{EVAL_MASK}` is reserved for the evaluation mask"
            )));
        }
        let ValueSpec::Dense { element_type, dims } = vs else {
            return Err(EstimatorError::Input(format!(
                "component `{name}` is not a dense tensor: the device takes dense numbers only; decode or densify it in the input_fn"
            )));
        };
        let batch_ok = matches!(dims.first(), Some(None))
            || matches!(dims.first(), Some(Some(b)) if *b == per_shard as i64);
        if !batch_ok {
            return Err(EstimatorError::Input(format!(
                "component `{name}` has dims {}: evaluation needs batches of params['batch_size'] = {per_shard} on the first dimension (batch(batch_size) in the input_fn)",
                show(dims)
            )));
        }
        if dims[1..].iter().any(Option::is_none) {
            return Err(EstimatorError::Input(format!(
                "component `{name}` has dims {}: the device needs every dimension after the batch known",
                show(dims)
            )));
        }
        let mut d = vec![per_shard as i64];
        d.extend(dims[1..].iter().map(|v| v.unwrap_or(0)));
        out.push(FedComponent {
            name: name.clone(),
            element_type: *element_type,
            dims: d,
        });
    }
    out.push(FedComponent {
        name: EVAL_MASK.to_string(),
        element_type: ElementType::F32,
        dims: vec![per_shard as i64],
    });
    Ok(out)
}

fn show(dims: &[Option<i64>]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| d.map_or("?".to_string(), |v| v.to_string()))
        .collect();
    format!("[{}]", parts.join(","))
}

/// At most this many bytes of batches are read ahead: a loop is shortened to fit, so a large
/// `iterations_per_loop` with large batches does not hold the eval set in memory.
pub(crate) const READ_AHEAD_BYTES: usize = 256 << 20;

/// Steps whose batches (`batch_bytes` per shard, `shards` shards) fit in `cap` bytes; at
/// least 1.
pub(crate) fn steps_that_fit(batch_bytes: usize, shards: usize, cap: usize) -> u64 {
    (cap / (batch_bytes * shards).max(1)).max(1) as u64
}

/// The bytes of one per-shard batch of `components`.
pub(crate) fn batch_bytes(components: &[FedComponent]) -> usize {
    components
        .iter()
        .map(|c| c.dims.iter().product::<i64>() as usize * c.element_type.byte_size())
        .sum()
}

/// One per-shard batch ready for the device, with its mask kept on the host.
pub(crate) struct MaskedBatch {
    pub batch: Batch,
    pub mask: Vec<f32>,
}

impl MaskedBatch {
    /// Real examples (the mask's sum).
    pub(super) fn weight(&self) -> f64 {
        self.mask.iter().map(|&m| m as f64).sum()
    }
}

/// The dataset's batches padded and masked, read ahead a loop at a time.
pub(crate) struct EvalBatches {
    iter: DatasetIterator,
    spec: ElementSpec,
    components: Vec<FedComponent>,
    mask_index: Option<usize>,
    per_shard: usize,
    ended: bool,
    ahead: VecDeque<MaskedBatch>,
}

impl EvalBatches {
    pub(super) fn new(
        dataset: &Dataset,
        components: &[FedComponent],
        mask: Option<&str>,
        per_shard: usize,
    ) -> EvalBatches {
        let spec = dataset.element_spec();
        let fed = &components[..components.len() - 1];
        EvalBatches {
            iter: dataset.iter(),
            spec: spec.clone(),
            components: fed.to_vec(),
            mask_index: mask.and_then(|m| spec.index_of(m)),
            per_shard,
            ended: false,
            ahead: VecDeque::new(),
        }
    }

    /// Reads up to `n` batches ahead; returns how many are ready (fewer once the input ended).
    pub(super) fn fill(&mut self, n: usize) -> Result<usize, EstimatorError> {
        while self.ahead.len() < n && !self.ended {
            match self.iter.next() {
                None => self.ended = true,
                Some(Err(e)) => return Err(EstimatorError::Input(e.to_string())),
                Some(Ok(element)) => {
                    let b = self.pad(element.values)?;
                    self.ahead.push_back(b);
                }
            }
        }
        Ok(self.ahead.len())
    }

    /// Takes `real` read-ahead batches, then `padding` all-padding batches.
    pub(super) fn take(&mut self, real: usize, padding: usize) -> Vec<MaskedBatch> {
        let mut out: Vec<MaskedBatch> = self.ahead.drain(..real.min(self.ahead.len())).collect();
        out.extend((0..padding).map(|_| self.padding_batch()));
        out
    }

    fn padding_batch(&self) -> MaskedBatch {
        let mut batch = padding_batch(&self.components);
        batch.push(mask_array(&vec![0.0; self.per_shard]));
        MaskedBatch {
            batch,
            mask: vec![0.0; self.per_shard],
        }
    }

    fn pad(&self, values: Vec<Value>) -> Result<MaskedBatch, EstimatorError> {
        // The input's own mask (if any) is read before the values move into the batch.
        let input_mask = self.mask_index.map(|i| match values.get(i) {
            Some(Value::Dense(m)) if m.len() <= self.per_shard => Ok((0..m.len())
                .map(|k| m.data.get_f64(k) as f32)
                .collect::<Vec<_>>()),
            _ => Err(EstimatorError::Input(
                "the mask component is missing or longer than the batch".into(),
            )),
        });
        let (mut batch, rows) = pad_batch(values, &self.spec, &self.components)?;
        let mut mask: Vec<f32> = (0..self.per_shard)
            .map(|i| if i < rows { 1.0 } else { 0.0 })
            .collect();
        if let Some(input_mask) = input_mask {
            for (w, m) in mask.iter_mut().zip(input_mask?) {
                *w *= m;
            }
        }
        batch.push(mask_array(&mask));
        Ok(MaskedBatch { batch, mask })
    }
}

fn mask_array(mask: &[f32]) -> Array {
    Array::new(
        ArrayShape::new(ElementType::F32, &[mask.len() as i64]),
        ArrayData::F32(mask.to_vec()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_ahead_is_bounded() {
        let c = |dims: Vec<i64>| FedComponent {
            name: "x".into(),
            element_type: ElementType::F32,
            dims,
        };
        // MNIST: 128 x 784 f32 + 128 labels + the mask = 402,432 bytes.
        let mnist = [c(vec![128, 784]), c(vec![128]), c(vec![128])];
        assert_eq!(batch_bytes(&mnist), 402_432);
        assert_eq!(steps_that_fit(402_432, 1, READ_AHEAD_BYTES), 667);
        assert_eq!(steps_that_fit(402_432, 8, READ_AHEAD_BYTES), 83);
        // A batch larger than the cap still runs, one step at a time.
        assert_eq!(steps_that_fit(1 << 30, 2, READ_AHEAD_BYTES), 1);
    }
}
