//! How a batch reaches the device: a dataset of batched dense elements becomes the runtime's
//! infeed source (on the estimator's side: the input pipeline knows no device feed), one tuple of the selected components per iteration. The arrays the batch
//! built are moved into the tuple, not copied. Everything the device cannot take (an unknown
//! batch dimension, strings, ragged values) is rejected before the first element is read.

use crate::input::dataset::spec_check::{dims_fit, show_dims};
use crate::input::dataset::{DatasetError, DatasetIterator};
use crate::input::{Dataset, Element, Value, ValueSpec};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tessel_compiler::ir::Literal;
use tessel_runtime::feed::{FeedError, FeedItem, FeedSource};

/// Checks that the device can take `components` of `dataset` and returns their indices.
pub(crate) fn device_components(
    dataset: &Dataset,
    components: &[&str],
) -> Result<Vec<usize>, DatasetError> {
    let spec = dataset.element_spec();
    let mut indices = Vec::with_capacity(components.len());
    for &name in components {
        let i = spec
            .index_of(name)
            .ok_or_else(|| DatasetError::NoSuchComponent {
                name: name.to_string(),
                available: spec
                    .components
                    .iter()
                    .map(|(n, _)| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        if indices.contains(&i) {
            return Err(DatasetError::invalid(
                "infeed",
                format!("component `{name}` is selected twice"),
            ));
        }
        match &spec.components[i].1 {
            ValueSpec::Dense { dims, .. } if dims.iter().all(Option::is_some) => {}
            ValueSpec::Dense { dims, .. } => {
                return Err(DatasetError::NotStatic {
                    component: name.to_string(),
                    dims: show_dims(dims),
                })
            }
            ValueSpec::Bytes { .. } => {
                return Err(DatasetError::NotNumeric {
                    component: name.to_string(),
                })
            }
            ValueSpec::Ragged { .. } => {
                return Err(DatasetError::Ragged {
                    op: "infeed",
                    component: name.to_string(),
                })
            }
        }
        indices.push(i);
    }
    Ok(indices)
}

/// The infeed source for one replica: from element `start` of `dataset` on, one
/// `Literal::Tuple` of `components` (in that order) per iteration.
///
/// `start` is the position to resume from. The infeed thread runs ahead of the device, so a
/// checkpoint must record the position the device has consumed (steps done), not how far
/// this source has been read.
pub fn infeed_source(
    dataset: &Dataset,
    components: &[&str],
    start: u64,
) -> Result<FeedSource, DatasetError> {
    let to_tuple = TupleOf::new(dataset, components)?;
    let iter = dataset
        .iter_from(start)
        .map(move |r| to_tuple.build(r.map_err(FeedError::source)?));
    Ok(Box::new(iter))
}

/// The infeed sources of `replicas` replicas fed from one dataset (one input pipeline per
/// host, TPUEstimator's per-host input): at step `s` replica `r` gets element `s x replicas +
/// r`, as TPUEstimator dequeues one batch per core, in core order, each step. The sources
/// share one iterator, so the pipeline (and its cache) exists once; whichever replica's source
/// is asked first reads ahead for the others. `start_step` resumes: the pipeline starts at
/// element `start_step x replicas`.
pub fn replica_infeed_sources(
    dataset: &Dataset,
    components: &[&str],
    replicas: usize,
    start_step: u64,
) -> Result<Vec<FeedSource>, DatasetError> {
    if replicas == 0 {
        return Err(DatasetError::invalid(
            "infeed",
            "there are no replicas to feed",
        ));
    }
    let to_tuple = Arc::new(TupleOf::new(dataset, components)?);
    let shared = Arc::new(Mutex::new(Splitter {
        iter: dataset.iter_from(start_step.saturating_mul(replicas as u64)),
        queues: (0..replicas).map(|_| VecDeque::new()).collect(),
        next_replica: 0,
        ended: None,
    }));
    Ok((0..replicas)
        .map(|r| {
            let (shared, to_tuple) = (shared.clone(), to_tuple.clone());
            let source: FeedSource = Box::new(std::iter::from_fn(move || {
                let element = shared
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .next_for(r)?;
                Some(element.and_then(|e| to_tuple.build(e)))
            }));
            source
        })
        .collect())
}

/// Deals one iterator's elements to replicas in turn.
struct Splitter {
    iter: DatasetIterator,
    queues: Vec<VecDeque<Element>>,
    /// The replica the iterator's next element is for.
    next_replica: usize,
    /// How the iterator ended: `Some(None)` ran out, `Some(Some(e))` failed with `e`.
    ended: Option<Option<FeedError>>,
}

impl Splitter {
    fn next_for(&mut self, replica: usize) -> Option<Result<Element, FeedError>> {
        loop {
            if let Some(e) = self.queues[replica].pop_front() {
                return Some(Ok(e));
            }
            match &self.ended {
                // Every replica learns why the data stopped.
                Some(Some(error)) => return Some(Err(error.clone())),
                Some(None) => return None,
                None => {}
            }
            match self.iter.next() {
                Some(Ok(e)) => {
                    let r = self.next_replica;
                    self.queues[r].push_back(e);
                    self.next_replica = (r + 1) % self.queues.len();
                }
                Some(Err(e)) => self.ended = Some(Some(FeedError::source(e))),
                None => self.ended = Some(None),
            }
        }
    }
}

/// Builds the infeed tuple of the selected components, moving their arrays.
struct TupleOf {
    indices: Vec<usize>,
    spec: crate::input::ElementSpec,
}

impl TupleOf {
    fn new(dataset: &Dataset, components: &[&str]) -> Result<Self, DatasetError> {
        Ok(TupleOf {
            indices: device_components(dataset, components)?,
            spec: dataset.element_spec().clone(),
        })
    }

    fn build(&self, element: Element) -> FeedItem {
        let mut values: Vec<Option<Value>> = element.values.into_iter().map(Some).collect();
        let mut tuple = Vec::with_capacity(self.indices.len());
        for &i in &self.indices {
            let (name, vs) = &self.spec.components[i];
            match (values.get_mut(i).and_then(Option::take), vs) {
                (Some(Value::Dense(a)), ValueSpec::Dense { element_type, dims })
                    if dims_fit(dims, &a.shape.dims)
                        && a.data.element_type() == *element_type
                        && a.data.len() as i64 == a.shape.element_count() =>
                {
                    tuple.push(Literal::Array(a))
                }
                _ => {
                    return Err(FeedError::message(format!(
                        "component `{name}` does not match its spec {vs:?}"
                    )))
                }
            }
        }
        Ok(Literal::Tuple(tuple))
    }
}
