//! What an input_fn returns, and its batches as the device takes them.

use super::dealer::{Batch, BatchIter};
use super::params::Params;
use super::trace_step::FedComponent;
use crate::error::EstimatorError;
use crate::input::dataset::Dataset;
use crate::input::Value;

/// TPUEstimator's `input_fn(params)`: `params["batch_size"]` is the per-shard batch.
pub type InputFn = dyn Fn(&Params) -> Result<Input, EstimatorError> + Send + Sync;

/// An input_fn's result: a dataset of batched elements, and which component is the labels
/// (TF's `(features, labels)` pair; `None` when the dataset has features only, as for
/// PREDICT).
pub struct Input {
    pub dataset: Dataset,
    pub labels: Option<String>,
    /// Evaluation: the component holding the per-example mask, when the input_fn made one
    /// (`padded_batch_with_mask`). Without it the estimator pads and masks the short last batch.
    pub mask: Option<String>,
}

impl Input {
    pub fn new(dataset: Dataset, labels: &str) -> Input {
        Input {
            dataset,
            labels: Some(labels.to_string()),
            mask: None,
        }
    }

    pub fn features_only(dataset: Dataset) -> Input {
        Input {
            dataset,
            labels: None,
            mask: None,
        }
    }

    /// Names the component that is the per-example mask of `padded_batch_with_mask(n, mask)`:
    /// evaluation takes it as the weights instead of feeding it as a feature.
    pub fn with_mask(mut self, mask: &str) -> Input {
        self.mask = Some(mask.to_string());
        self
    }
}

/// The dataset's elements from `position` on, as batches of the fed components. The arrays
/// are moved out of the elements: the batch the dataset built is the buffer the infeed gets.
pub fn batches(dataset: &Dataset, components: &[FedComponent], position: u64) -> BatchIter {
    let components = components.to_vec();
    let spec = dataset.element_spec().clone();
    let order: Vec<Option<usize>> = components.iter().map(|c| spec.index_of(&c.name)).collect();
    let iter = dataset.iter_from(position).map(move |element| {
        let element = element.map_err(|e| e.to_string())?;
        let mut values: Vec<Option<Value>> = element.values.into_iter().map(Some).collect();
        let mut batch: Batch = Vec::with_capacity(order.len());
        for (c, i) in components.iter().zip(&order) {
            let value = i.and_then(|i| values.get_mut(i).and_then(Option::take));
            match value {
                Some(Value::Dense(a)) if a.shape.dims.as_slice() == c.dims.as_slice() => {
                    batch.push(a)
                }
                Some(Value::Dense(a)) => {
                    return Err(format!(
                        "component `{}` is {}, but the step was traced for {:?}",
                        c.name, a.shape, c.dims
                    ))
                }
                _ => return Err(format!("component `{}` is missing or not dense", c.name)),
            }
        }
        Ok(batch)
    });
    Box::new(iter)
}
