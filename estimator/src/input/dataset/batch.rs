//! `batch(n, drop_remainder)` and `padded_batch_with_mask(n, mask)`: stacks `n` consecutive
//! elements on a new leading dimension. Each component's batch buffer is allocated once at its
//! full size and every element's data is copied into it once; the arrays built here are what
//! infeed hands to the device, with no copy after.
//!
//! Without `drop_remainder` the last batch may be short, so the batch dimension is unknown in
//! the spec. `padded_batch_with_mask` instead pads the last batch to `n` with zeros and adds
//! an f32 `[n]` component that is 1 for real examples and 0 for padding, so evaluation can
//! cover every example at a static shape.

use super::array_ops::{append, append_zeros, empty_with_capacity};
use super::error::DatasetError;
use super::node::{Cardinality, ElementIter, ElementResult, Node};
use super::spec_check::show_dims;
use super::Dataset;
use crate::input::{Element, ElementSpec, Value, ValueSpec};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

#[derive(Clone, Debug)]
enum Remainder {
    Keep,
    Drop,
    /// Pad to the full batch and add this mask component.
    PadWithMask(String),
}

pub(super) struct Batch {
    input: Dataset,
    size: u64,
    remainder: Remainder,
    spec: ElementSpec,
}

impl Batch {
    pub(super) fn new(
        input: Dataset,
        size: u64,
        drop_remainder: bool,
    ) -> Result<Self, DatasetError> {
        let remainder = if drop_remainder {
            Remainder::Drop
        } else {
            Remainder::Keep
        };
        Self::build(input, size, remainder)
    }

    pub(crate) fn padded_with_mask(
        input: Dataset,
        size: u64,
        mask: &str,
    ) -> Result<Self, DatasetError> {
        const OP: &str = "padded_batch_with_mask";
        if input.element_spec().index_of(mask).is_some() {
            return Err(DatasetError::invalid(
                OP,
                format!("the mask component `{mask}` already exists"),
            ));
        }
        // Padding needs the shape to pad to.
        for (name, vs) in &input.element_spec().components {
            if let ValueSpec::Dense { dims, .. } | ValueSpec::Bytes { dims } = vs {
                if dims.iter().any(Option::is_none) {
                    return Err(DatasetError::invalid(
                        OP,
                        format!(
                            "component `{name}` has dims {}; padding needs every dimension known",
                            show_dims(dims)
                        ),
                    ));
                }
            }
        }
        Self::build(input, size, Remainder::PadWithMask(mask.to_string()))
    }

    fn build(input: Dataset, size: u64, remainder: Remainder) -> Result<Self, DatasetError> {
        let op = match remainder {
            Remainder::PadWithMask(_) => "padded_batch_with_mask",
            _ => "batch",
        };
        if size == 0 {
            return Err(DatasetError::invalid(
                op,
                "the batch size must be at least 1",
            ));
        }
        let batch_dim = match remainder {
            Remainder::Keep => None,
            _ => Some(size as i64),
        };
        let mut components = Vec::new();
        for (name, vs) in &input.element_spec().components {
            let stacked = |dims: &Vec<Option<i64>>| {
                let mut d = vec![batch_dim];
                d.extend(dims.iter().copied());
                d
            };
            components.push((
                name.clone(),
                match vs {
                    ValueSpec::Dense { element_type, dims } => ValueSpec::Dense {
                        element_type: *element_type,
                        dims: stacked(dims),
                    },
                    ValueSpec::Bytes { dims } => ValueSpec::Bytes {
                        dims: stacked(dims),
                    },
                    ValueSpec::Ragged { .. } => {
                        return Err(DatasetError::Ragged {
                            op,
                            component: name.clone(),
                        })
                    }
                },
            ));
        }
        if let Remainder::PadWithMask(mask) = &remainder {
            components.push((
                mask.clone(),
                ValueSpec::Dense {
                    element_type: ElementType::F32,
                    dims: vec![Some(size as i64)],
                },
            ));
        }
        Ok(Batch {
            input,
            size,
            remainder,
            spec: ElementSpec { components },
        })
    }
}

impl Node for Batch {
    fn spec(&self) -> &ElementSpec {
        &self.spec
    }

    fn cardinality(&self) -> Cardinality {
        match self.input.cardinality() {
            Cardinality::Finite(n) => Cardinality::Finite(match self.remainder {
                Remainder::Drop => n / self.size,
                _ => n.div_ceil(self.size),
            }),
            other => other,
        }
    }

    // Batch k is input elements k*n..(k+1)*n, so the input jumps there.
    fn open(&self, key: u64, start: u64) -> ElementIter {
        let first = start.saturating_mul(self.size);
        Box::new(BatchIter {
            input: self.input.node.open(key, first),
            names: self
                .spec
                .components
                .iter()
                .map(|(n, _)| n.clone())
                .collect(),
            size: self.size as usize,
            remainder: self.remainder.clone(),
            next_index: first,
            done: false,
        })
    }
}

struct BatchIter {
    input: ElementIter,
    names: Vec<String>,
    size: usize,
    remainder: Remainder,
    /// The input position of the next element read (for error messages).
    next_index: u64,
    done: bool,
}

impl Iterator for BatchIter {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        if self.done {
            return None;
        }
        let mut elements = Vec::with_capacity(self.size);
        while elements.len() < self.size {
            match self.input.next() {
                Some(Ok(e)) => elements.push(e),
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        let first_index = self.next_index;
        self.next_index += elements.len() as u64;
        let real = elements.len();
        if real == 0 || (real < self.size && matches!(self.remainder, Remainder::Drop)) {
            return None;
        }
        let padded_to = match self.remainder {
            Remainder::PadWithMask(_) => self.size,
            _ => real,
        };
        let stacked = stack(&mut elements, &self.names, padded_to, first_index).map_err(|e| {
            // A shape mismatch names the record the odd element came from.
            let at = match &e {
                DatasetError::ShapeMismatch { index, .. } => Some(*index),
                _ => None,
            };
            let origin = at.and_then(|i| elements.get((i - first_index) as usize)?.origin.clone());
            e.placed("batch", at.unwrap_or(first_index), origin.as_ref())
        });
        Some(stacked.map(|mut batch| {
            if let Remainder::PadWithMask(_) = self.remainder {
                let mask = (0..padded_to).map(|i| (i < real) as u8 as f32).collect();
                batch
                    .values
                    .push(Value::Dense(Array::f32(&[padded_to as i64], mask)));
            }
            batch
        }))
    }
}

/// Stacks `elements` component by component, padding with zeros (empty strings) up to
/// `rows` rows. `first_index` is the input position of `elements[0]`, for errors.
fn stack(
    elements: &mut [Element],
    names: &[String],
    rows: usize,
    first_index: u64,
) -> ElementResult {
    let first = elements[0].clone_shapes();
    let mut values = Vec::with_capacity(first.len());
    for (c, v0) in first.iter().enumerate() {
        let name = &names[c];
        let mismatch = |i: usize, expected: &[i64], found: &[i64]| DatasetError::ShapeMismatch {
            component: name.clone(),
            index: first_index + i as u64,
            expected: expected.to_vec(),
            found: found.to_vec(),
        };
        match v0 {
            Shape0::Dense(ty, d0) => {
                let (ty, per) = (*ty, d0.iter().product::<i64>().max(0) as usize);
                let mut data: ArrayData = empty_with_capacity(ty, per * rows);
                for (i, e) in elements.iter().enumerate() {
                    let Some(Value::Dense(a)) = e.values.get(c) else {
                        return Err(mismatch(i, d0, &[]));
                    };
                    // A hand-built array may not hold what its shape says: check before copying.
                    if a.shape.dims[..] != d0[..]
                        || a.data.len() != per
                        || !append(&mut data, &a.data, 0, per)
                    {
                        return Err(mismatch(i, d0, &a.shape.dims));
                    }
                }
                append_zeros(&mut data, per * (rows - elements.len()));
                let mut dims = vec![rows as i64];
                dims.extend(d0.iter().copied());
                let array = Array::try_new(ArrayShape::new(ty, &dims), data).map_err(|e| {
                    DatasetError::invalid("batch", format!("component `{name}`: {e}"))
                })?;
                values.push(Value::Dense(array));
            }
            Shape0::Bytes(d0) => {
                let per: usize = d0.iter().product::<i64>().max(0) as usize;
                let mut items = Vec::with_capacity(per * rows);
                for (i, e) in elements.iter_mut().enumerate() {
                    let Some(Value::Bytes { dims, items: it }) = e.values.get_mut(c) else {
                        return Err(mismatch(i, d0, &[]));
                    };
                    if dims != d0 || it.len() != per {
                        return Err(mismatch(i, d0, dims));
                    }
                    items.append(it); // moved, not copied
                }
                items.resize(per * rows, Vec::new());
                let mut dims = vec![rows as i64];
                dims.extend(d0.iter().copied());
                values.push(Value::Bytes { dims, items });
            }
            Shape0::Ragged => {
                return Err(DatasetError::Ragged {
                    op: "batch",
                    component: name.clone(),
                })
            }
        }
    }
    Ok(Element::new(values))
}

/// The shape of one component of a batch's first element, which the others must match.
enum Shape0 {
    Dense(ElementType, Vec<i64>),
    Bytes(Vec<i64>),
    Ragged,
}

impl Element {
    fn clone_shapes(&self) -> Vec<Shape0> {
        self.values
            .iter()
            .map(|v| match v {
                Value::Dense(a) => Shape0::Dense(a.shape.element_type, a.shape.dims.to_vec()),
                Value::Bytes { dims, .. } => Shape0::Bytes(dims.clone()),
                Value::Ragged { .. } => Shape0::Ragged,
            })
            .collect()
    }
}
