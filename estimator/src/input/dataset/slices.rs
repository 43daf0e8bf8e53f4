//! `from_tensor_slices`: element `i` is row `i` (along dimension 0) of each named array.

use super::array_ops::copy_range;
use super::error::DatasetError;
use super::node::{Cardinality, ElementIter, Node};
use crate::input::{Element, ElementSpec, Value, ValueSpec};
use std::sync::Arc;
use tessel_compiler::ir::{Array, ArrayShape};

pub(crate) struct Slices {
    spec: ElementSpec,
    columns: Arc<Vec<Array>>,
    rows: u64,
}

impl Slices {
    pub(super) fn new(columns: Vec<(String, Array)>) -> Result<Self, DatasetError> {
        const OP: &str = "from_tensor_slices";
        if columns.is_empty() {
            return Err(DatasetError::invalid(OP, "no arrays were given"));
        }
        let mut rows = None;
        let mut spec = Vec::new();
        for (name, a) in &columns {
            let Some((&n, rest)) = a.shape.dims.split_first() else {
                return Err(DatasetError::invalid(
                    OP,
                    format!("`{name}` is a scalar; slicing needs a leading dimension"),
                ));
            };
            let well_formed = a.shape.is_static()
                && a.shape.dims.iter().all(|&d| d >= 0)
                && a.data.element_type() == a.shape.element_type
                && a.shape.checked_byte_size().is_some()
                && a.data.len() as i64 == a.shape.element_count();
            if !well_formed {
                return Err(DatasetError::invalid(
                    OP,
                    format!(
                        "`{name}` is not a well-formed array: dims {:?} of {:?} hold {} {:?} values",
                        a.shape.dims,
                        a.shape.element_type,
                        a.data.len(),
                        a.data.element_type()
                    ),
                ));
            }
            if *rows.get_or_insert(n) != n {
                return Err(DatasetError::invalid(
                    OP,
                    format!(
                        "`{name}` has {n} rows but `{}` has {}; all arrays need the same leading dimension",
                        columns[0].0,
                        rows.unwrap_or(0)
                    ),
                ));
            }
            if spec.iter().any(|(n, _)| n == name) {
                return Err(DatasetError::invalid(
                    OP,
                    format!("`{name}` is given twice"),
                ));
            }
            spec.push((
                name.clone(),
                ValueSpec::Dense {
                    element_type: a.shape.element_type,
                    dims: rest.iter().map(|&d| Some(d)).collect(),
                },
            ));
        }
        Ok(Slices {
            spec: ElementSpec { components: spec },
            columns: Arc::new(columns.into_iter().map(|(_, a)| a).collect()),
            rows: rows.unwrap_or(0).max(0) as u64,
        })
    }
}

impl Node for Slices {
    fn spec(&self) -> &ElementSpec {
        &self.spec
    }

    fn cardinality(&self) -> Cardinality {
        Cardinality::Finite(self.rows)
    }

    fn open(&self, _key: u64, start: u64) -> ElementIter {
        let columns = self.columns.clone();
        Box::new((start.min(self.rows)..self.rows).map(move |i| {
            let values = columns
                .iter()
                .map(|a| {
                    let row = ArrayShape::new(a.shape.element_type, &a.shape.dims[1..]);
                    let n = row.element_count() as usize;
                    Array::try_new(row, copy_range(&a.data, i as usize * n, n))
                        .map(Value::Dense)
                        .map_err(|e| DatasetError::invalid("from_tensor_slices", e.to_string()))
                })
                .collect::<Result<_, _>>()?;
            Ok(Element::new(values))
        }))
    }
}
