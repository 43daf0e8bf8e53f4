//! Checks that an element matches its dataset's spec, so a user function or source that
//! returns something else fails where it happens, not later in a batch or on the device.

use super::error::DatasetError;
use crate::input::{Element, ElementSpec, Value, ValueSpec};

/// Whether `dims` fits `spec` (an unknown dimension fits any size).
pub(crate) fn dims_fit(spec: &[Option<i64>], dims: &[i64]) -> bool {
    spec.len() == dims.len()
        && spec
            .iter()
            .zip(dims)
            .all(|(s, &d)| s.is_none_or(|s| s == d))
}

/// Renders spec dims as `[?, 28, 28]`.
pub(crate) fn show_dims(dims: &[Option<i64>]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| d.map_or("?".to_string(), |d| d.to_string()))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Checks `element` against `spec`.
pub(crate) fn check_element(
    spec: &ElementSpec,
    element: &Element,
    op: &'static str,
    index: u64,
) -> Result<(), DatasetError> {
    let mismatch = |message: String| DatasetError::SpecMismatch { op, index, message };
    if element.values.len() != spec.components.len() {
        return Err(mismatch(format!(
            "it has {} components, the spec {}",
            element.values.len(),
            spec.components.len()
        )));
    }
    for ((name, vs), v) in spec.components.iter().zip(&element.values) {
        let ok = match (vs, v) {
            (ValueSpec::Dense { element_type, dims }, Value::Dense(a)) => {
                a.shape.element_type == *element_type && dims_fit(dims, &a.shape.dims)
            }
            (ValueSpec::Bytes { dims }, Value::Bytes { dims: d, items }) => {
                dims_fit(dims, d) && items.len() as i64 == d.iter().product::<i64>()
            }
            (ValueSpec::Ragged { element_type, .. }, Value::Ragged { values, row_splits }) => {
                values.shape.element_type == *element_type
                    && row_splits.last().is_none_or(|&e| e == values.len())
            }
            _ => false,
        };
        if !ok {
            return Err(mismatch(format!(
                "component `{name}` is {}, the spec says {vs:?}",
                describe(v)
            )));
        }
    }
    Ok(())
}

fn describe(v: &Value) -> String {
    match v {
        Value::Dense(a) => format!("a dense {:?} {:?}", a.shape.element_type, a.shape.dims),
        Value::Bytes { dims, .. } => format!("strings {dims:?}"),
        Value::Ragged { values, .. } => format!("a ragged {:?}", values.shape.element_type),
    }
}

/// The index of component `name`, or an error listing the components there are.
pub(crate) fn find_component(spec: &ElementSpec, name: &str) -> Result<usize, DatasetError> {
    spec.index_of(name)
        .ok_or_else(|| DatasetError::NoSuchComponent {
            name: name.to_string(),
            available: spec
                .components
                .iter()
                .map(|(n, _)| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
        })
}
