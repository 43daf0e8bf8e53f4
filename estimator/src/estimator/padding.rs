//! Predict's batches at the step's static shape: a short last batch padded with zeros.
//!
//! An input_fn for `predict` batches with `batch(n)` (no `drop_remainder`, TF's usual predict
//! input), so its batch dimension is unknown and the last batch may be short. Here every batch
//! is padded with zero rows to the per-shard batch, and the number of real rows is kept on the
//! host, so predict can strip the padded rows' predictions. (Evaluation pads the same way but
//! also feeds a mask to the device, `eval_input.rs`; predict needs no mask on the device.)

use super::dealer::Batch;
use super::trace_step::FedComponent;
use crate::error::EstimatorError;
use crate::input::dataset::array_ops::append_zeros;
use crate::input::{ElementSpec, Value, ValueSpec};
use tessel_compiler::ir::{Array, ArrayShape};

/// The fed components of a batched dataset at `per_shard` rows: the first dimension must be
/// unknown (`batch(n)`) or `per_shard`, every other dimension known.
pub(crate) fn padded_components(
    spec: &ElementSpec,
    per_shard: usize,
) -> Result<Vec<FedComponent>, EstimatorError> {
    spec.components
        .iter()
        .map(|(name, vs)| {
            let ValueSpec::Dense { element_type, dims } = vs else {
                return Err(EstimatorError::Input(format!(
                    "component `{name}` is not a dense tensor: the device takes dense numbers only; decode or densify it in the input_fn"
                )));
            };
            let batch_ok = match dims.first() {
                Some(None) => true,
                Some(Some(b)) => *b == per_shard as i64,
                None => false,
            };
            if !batch_ok || dims[1..].iter().any(Option::is_none) {
                let shown: Vec<String> = dims
                    .iter()
                    .map(|d| d.map_or("?".into(), |v| v.to_string()))
                    .collect();
                return Err(EstimatorError::Input(format!(
                    "component `{name}` has dims [{}]: predict needs batches of params['batch_size'] = {per_shard} on the first dimension (batch(batch_size) in the input_fn) and every other dimension known",
                    shown.join(",")
                )));
            }
            let mut d = vec![per_shard as i64];
            d.extend(dims[1..].iter().map(|v| v.unwrap_or(0)));
            Ok(FedComponent {
                name: name.clone(),
                element_type: *element_type,
                dims: d,
            })
        })
        .collect()
}

/// One element of the batched dataset as a per-shard batch: each component padded with zero
/// rows to `components[i].dims[0]`; returns the batch and its number of real rows.
pub(crate) fn pad_batch(
    values: Vec<Value>,
    spec: &ElementSpec,
    components: &[FedComponent],
) -> Result<(Batch, usize), EstimatorError> {
    let mut values: Vec<Option<Value>> = values.into_iter().map(Some).collect();
    let mut rows: Option<i64> = None;
    let mut batch = Vec::with_capacity(components.len());
    for c in components {
        let value = spec
            .index_of(&c.name)
            .and_then(|i| values.get_mut(i).and_then(Option::take));
        let Some(Value::Dense(a)) = value else {
            return Err(EstimatorError::Input(format!(
                "component `{}` is missing or not dense",
                c.name
            )));
        };
        let dims = a.shape.dims.as_slice();
        let b = dims.first().copied().unwrap_or(-1);
        if dims.is_empty() || b > c.dims[0] || dims[1..] != c.dims[1..] {
            return Err(EstimatorError::Input(format!(
                "component `{}` is {}, but the step takes at most {:?}",
                c.name, a.shape, c.dims
            )));
        }
        if *rows.get_or_insert(b) != b {
            return Err(EstimatorError::Input(format!(
                "component `{}` has {b} examples but the batch's other components have {}",
                c.name,
                rows.unwrap_or(0)
            )));
        }
        let row: i64 = c.dims[1..].iter().product();
        let mut data = a.data;
        append_zeros(&mut data, ((c.dims[0] - b) * row) as usize);
        batch.push(Array::new(ArrayShape::new(c.element_type, &c.dims), data));
    }
    Ok((batch, rows.unwrap_or(0) as usize))
}

/// A batch of zeros only (0 real rows): what a shard without a batch runs in the last loop.
pub(crate) fn padding_batch(components: &[FedComponent]) -> Batch {
    components
        .iter()
        .map(|c| Array::zeros(ArrayShape::new(c.element_type, &c.dims)))
        .collect()
}

/// Row `r` of `a` (its first dimension dropped).
pub(super) fn row(a: &Array, r: usize) -> Array {
    let dims = &a.shape.dims;
    let n: i64 = dims[1..].iter().product();
    let data = crate::input::dataset::array_ops::copy_range(&a.data, r * n as usize, n as usize);
    Array::new(ArrayShape::new(a.element_type(), &dims[1..]), data)
}
