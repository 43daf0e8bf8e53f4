//! What an input_fn returns, and its batches as the device takes them.

use super::dealer::{Batch, BatchIter};
use super::params::Params;
use super::trace_step::FedComponent;
use crate::error::EstimatorError;
use crate::input::dataset::Dataset;
use crate::input::Value;
use tessel_runtime::feed::FeedError;

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
pub(super) fn batches(dataset: &Dataset, components: &[FedComponent], position: u64) -> BatchIter {
    let components = components.to_vec();
    let spec = dataset.element_spec().clone();
    let order: Vec<Option<usize>> = components.iter().map(|c| spec.index_of(&c.name)).collect();
    let iter = dataset.iter_from(position).map(move |element| {
        let element = element.map_err(FeedError::source)?;
        let mut values: Vec<Option<Value>> = element.values.into_iter().map(Some).collect();
        let mut batch: Batch = Vec::with_capacity(order.len());
        for (c, i) in components.iter().zip(&order) {
            let value = i.and_then(|i| values.get_mut(i).and_then(Option::take));
            match value {
                Some(Value::Dense(a)) if a.shape.dims.as_slice() == c.dims.as_slice() => {
                    batch.push(a)
                }
                Some(Value::Dense(a)) => {
                    return Err(FeedError::message(format!(
                        "component `{}` is {}, but the step was traced for {:?}",
                        c.name, a.shape, c.dims
                    )))
                }
                _ => {
                    return Err(FeedError::message(format!(
                        "component `{}` is missing or not dense",
                        c.name
                    )))
                }
            }
        }
        Ok(batch)
    });
    Box::new(iter)
}

#[cfg(test)]
mod tests {
    use super::super::dealer::Dealer;
    use super::*;
    use crate::input::DatasetError;
    use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
    use tessel_runtime::feed::FeedError;

    /// A dataset's error (with its context) reaches the shards' infeed sources whole and typed,
    /// so the loop's error can quote it.
    #[test]
    fn a_dataset_error_reaches_the_infeed_typed_and_whole() {
        let x = Array::new(
            ArrayShape::new(ElementType::F32, &[4, 2]),
            ArrayData::F32(vec![0.0; 8]),
        );
        let dataset = Dataset::from_tensor_slices(vec![("x".into(), x)])
            .unwrap()
            .map(
                |s| Ok(s.clone()),
                1,
                |_| {
                    Err(DatasetError::source(
                        "file a.tfrecord, record 3 at offset 120",
                        "corrupt record",
                    ))
                },
            )
            .unwrap();
        let fed = [FedComponent {
            name: "x".into(),
            element_type: ElementType::F32,
            dims: vec![2],
        }];
        let dealer = Dealer::new(batches(&dataset, &fed, 0));
        let e = dealer.sources(1, 1).remove(0).next().unwrap().unwrap_err();
        let FeedError::Source(source) = &e else {
            panic!("{e:?} is not the dataset's error");
        };
        assert!(
            source.downcast_ref::<DatasetError>().is_some(),
            "{source:?}"
        );
        assert_eq!(
            e.to_string(),
            DatasetError::source("file a.tfrecord, record 3 at offset 120", "corrupt record")
                .to_string()
        );
        assert!(e.to_string().contains("offset 120"), "{e}");
    }
}
