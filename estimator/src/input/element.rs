//! What flows through a dataset: an element is a fixed, ordered list of named components
//! (tf.data's nested structure, flattened: `image`, `label`, ...), each a [`Value`]. Its
//! [`ElementSpec`] is known without reading data, so a dataset can say what it will produce
//! (and the estimator can trace the model_fn at static shapes) before the first record is read.

use super::RecordContext;
use tessel_compiler::ir::{Array, ElementType};

/// One component of an element.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A dense numeric array (tf's numeric tensors), shape and type in the array.
    Dense(Array),
    /// A `tf.string` tensor: one byte string per element of `dims`, row-major; `dims` is empty
    /// for a scalar string (a `FixedLenFeature([], tf.string)`, such as `image_raw`).
    Bytes { dims: Vec<i64>, items: Vec<Vec<u8>> },
    /// A `VarLenFeature`: a ragged value, `values` flat (1-D) with row `i` being
    /// `values[row_splits[i]..row_splits[i + 1]]`. The device needs static shapes, so feeding
    /// one to infeed is an error; it must be densified or padded by the input_fn first.
    Ragged {
        values: Array,
        row_splits: Vec<usize>,
    },
}

/// The static description of one component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueSpec {
    /// A dense array; `None` is a dimension not known statically (the batch dimension of
    /// `batch(n)` without `drop_remainder`).
    Dense {
        element_type: ElementType,
        dims: Vec<Option<i64>>,
    },
    /// A string tensor of these dimensions.
    Bytes { dims: Vec<Option<i64>> },
    /// A ragged value of this element type (one ragged dimension, the last).
    Ragged {
        element_type: ElementType,
        dims: Vec<Option<i64>>,
    },
}

/// The names and specs of an element's components, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementSpec {
    pub components: Vec<(String, ValueSpec)>,
}

/// One element: values in the order of its dataset's [`ElementSpec`].
#[derive(Clone, Debug, PartialEq)]
pub struct Element {
    pub values: Vec<Value>,
    /// The record the element was read from (file, record index, byte offset), so an error
    /// about it can name the place. Set by the TFRecord source, kept by every op that maps or
    /// moves elements (a map whose function returns `None` here keeps its input's), `None` for
    /// a batch and for elements made in memory.
    pub origin: Option<RecordContext>,
}

impl Element {
    /// An element of these values, from no record.
    pub fn new(values: Vec<Value>) -> Element {
        Element {
            values,
            origin: None,
        }
    }
}

impl ElementSpec {
    /// The index of the component called `name`.
    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.components.iter().position(|(n, _)| n == name)
    }
}

impl ValueSpec {
    /// True when every dimension is known (what the device needs).
    pub fn is_static(&self) -> bool {
        match self {
            ValueSpec::Dense { dims, .. } => dims.iter().all(Option::is_some),
            ValueSpec::Bytes { .. } | ValueSpec::Ragged { .. } => false,
        }
    }
}
