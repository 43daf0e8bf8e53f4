//! What can go wrong in a dataset: bad arguments when it is built, and failures while it is
//! iterated (a source's error with its context, elements that cannot be batched, a map function
//! that panicked). The lead folds this into the input pipeline's error enum.

use crate::input::RecordContext;
use thiserror::Error;

/// Advice for a value the device cannot take because a dimension is unknown (the guide's own).
pub const STATIC_SHAPE_ADVICE: &str = "the device needs static shapes: use batch(n, drop_remainder=true), or padded_batch_with_mask for evaluation over every example";

/// An error building or iterating a [`super::Dataset`].
#[derive(Debug, Error)]
pub enum DatasetError {
    /// An argument of a source or transformation is invalid (a zero batch size, a shard index
    /// out of range, slices of different lengths, ...).
    #[error("{op}: {message}")]
    InvalidArgument { op: &'static str, message: String },

    /// A source failed; `context` says which (the file, the generator), `source` why.
    #[error("{context}: {source}")]
    Source {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// What a map function (or a dataset op such as `decode_raw`) reports about the element it
    /// was given ([`DatasetError::msg`]); the map adds its name, the element's index and the
    /// record it came from.
    #[error("{0}")]
    Message(String),

    /// An error about an element read from a record: `origin` names the file, the record
    /// index and the byte offset.
    #[error("{origin}: {source}")]
    At {
        origin: RecordContext,
        #[source]
        source: Box<DatasetError>,
    },

    /// A user function (map, filter, a generator) returned an error for element `index`.
    #[error("{op} failed on element {index}: {message}")]
    Function {
        op: &'static str,
        index: u64,
        message: String,
    },

    /// A user function (map, filter) or a pipeline thread panicked; the panic is caught and
    /// reported instead of aborting the program.
    #[error("{op} panicked on element {index}: {message}")]
    Panicked {
        op: &'static str,
        index: u64,
        message: String,
    },

    /// An element does not match the spec its dataset declared.
    #[error("{op}: element {index} does not match the dataset's element spec: {message}")]
    SpecMismatch {
        op: &'static str,
        index: u64,
        message: String,
    },

    /// Two elements of one batch have different shapes for a component.
    #[error("batch: component `{component}` of element {index} has dims {found:?}, but the batch's first element has {expected:?}; batch needs elements of one shape")]
    ShapeMismatch {
        component: String,
        index: u64,
        expected: Vec<i64>,
        found: Vec<i64>,
    },

    /// A ragged (`VarLenFeature`) component was batched or fed to the device.
    #[error("component `{component}` is ragged (a VarLenFeature): {op} needs dense values, and the device needs static shapes; densify or pad it in a map first")]
    Ragged { op: &'static str, component: String },

    /// A component the device would read has an unknown dimension.
    #[error("component `{component}` has dims {dims}: {STATIC_SHAPE_ADVICE}")]
    NotStatic { component: String, dims: String },

    /// A component the device would read is a string tensor.
    #[error("component `{component}` holds strings: the device takes only numeric arrays; decode it in a map first (decode_raw)")]
    NotNumeric { component: String },

    /// A component named by the caller does not exist.
    #[error("the dataset has no component `{name}` (it has {available})")]
    NoSuchComponent { name: String, available: String },
}

impl DatasetError {
    pub(crate) fn invalid(op: &'static str, message: impl Into<String>) -> Self {
        DatasetError::InvalidArgument {
            op,
            message: message.into(),
        }
    }

    /// An error about the element a map function was given; the map names the op, the element
    /// and its record, so a function needs no index at hand:
    /// `Err(DatasetError::msg(format!("label {l} is not in 0..10")))`.
    pub fn msg(message: impl Into<String>) -> Self {
        DatasetError::Message(message.into())
    }

    /// This error about element `index` of `op`, naming the record the element came from.
    pub(crate) fn placed(
        self,
        op: &'static str,
        index: u64,
        origin: Option<&RecordContext>,
    ) -> Self {
        let e = match self {
            DatasetError::Message(message) => DatasetError::Function { op, index, message },
            other => other,
        };
        match (origin, e) {
            (_, e @ DatasetError::At { .. }) | (None, e) => e,
            (Some(origin), e) => DatasetError::At {
                origin: origin.clone(),
                source: Box::new(e),
            },
        }
    }

    /// Wraps a source's error with what it was reading.
    pub fn source(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        DatasetError::Source {
            context: context.into(),
            source: source.into(),
        }
    }
}

/// The message of a caught panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}
