//! How a batch reaches the device: a dataset of batched dense elements becomes the runtime's
//! infeed source, one tuple of the selected components per iteration. The arrays the batch
//! built are moved into the tuple, not copied. Everything the device cannot take (an unknown
//! batch dimension, strings, ragged values) is rejected before the first element is read.

use super::error::DatasetError;
use super::spec_check::{dims_fit, show_dims};
use super::Dataset;
use crate::input::{Value, ValueSpec};
use tessel_compiler::ir::Literal;
use tessel_runtime::feed::FeedSource;

/// Checks that the device can take `components` of `dataset` and returns their indices.
pub fn device_components(
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
    let indices = device_components(dataset, components)?;
    let spec = dataset.element_spec().clone();
    let iter = dataset.iter_from(start).map(move |r| {
        let element = r.map_err(|e| e.to_string())?;
        let mut values: Vec<Option<Value>> = element.values.into_iter().map(Some).collect();
        let mut tuple = Vec::with_capacity(indices.len());
        for &i in &indices {
            let (name, vs) = &spec.components[i];
            match (values[i].take(), vs) {
                (Some(Value::Dense(a)), ValueSpec::Dense { element_type, dims })
                    if dims_fit(dims, &a.shape.dims)
                        && a.data.element_type() == *element_type
                        && a.data.len() as i64 == a.shape.element_count() =>
                {
                    tuple.push(Literal::Array(a))
                }
                _ => return Err(format!("component `{name}` does not match its spec {vs:?}")),
            }
        }
        Ok(Literal::Tuple(tuple))
    });
    Ok(Box::new(iter))
}
