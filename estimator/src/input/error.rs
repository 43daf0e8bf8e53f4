//! `InputError`: every error of the host input pipeline (files, records, protos, parsing).
//! One enum for the whole pipeline so an `input_fn` has one error type; it lives in its own
//! file so that each part of the pipeline adds its variants without touching the others.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// Where a record came from, for error messages: any part may be unknown (a record parsed
/// from memory has no file). Every element read from a file carries one, so it is cheap to
/// clone: the file name is shared.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordContext {
    pub file: Option<Arc<Path>>,
    /// The record's index in its file (0-based).
    pub index: Option<u64>,
    /// The byte offset of the record's header in the file (or in the decompressed stream of a
    /// compressed file).
    pub offset: Option<u64>,
}

impl RecordContext {
    pub fn new(file: impl Into<PathBuf>, index: u64, offset: u64) -> Self {
        RecordContext {
            file: Some(Arc::from(file.into())),
            index: Some(index),
            offset: Some(offset),
        }
    }

    /// Only a record number (records parsed from memory).
    pub fn index(index: u64) -> Self {
        RecordContext {
            index: Some(index),
            ..Default::default()
        }
    }
}

impl fmt::Display for RecordContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        match self.index {
            Some(i) => write!(f, "record {i}")?,
            None => write!(f, "record")?,
        }
        if let Some(o) = self.offset {
            write!(f, " (byte {o})")?;
        }
        Ok(())
    }
}

/// What is wrong with one TFRecord.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RecordProblem {
    #[error("truncated header: {available} of 12 bytes")]
    TruncatedHeader { available: usize },
    #[error(
        "corrupt length: the length's CRC does not match (the rest of the file cannot be framed)"
    )]
    LengthCrc,
    #[error("truncated record: length {length} needs {needed} bytes after the header, only {available} remain")]
    TruncatedData {
        length: u64,
        needed: u64,
        available: u64,
    },
    #[error("corrupt data: the CRC of {length} bytes does not match")]
    DataCrc { length: u64 },
    #[error("cannot decompress: {0}")]
    Decompress(String),
}

impl RecordProblem {
    /// True when the records after this one can still be framed (only a bad data CRC leaves the
    /// framing intact; after a bad length or a truncation the file cannot be read further).
    pub(crate) fn framing_intact(&self) -> bool {
        matches!(self, RecordProblem::DataCrc { .. })
    }
}

/// What is wrong with one feature of a `tf.train.Example`.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum FeatureProblem {
    #[error("missing, and the spec gives no default")]
    Missing,
    #[error("is of type {found}, the spec wants {wanted}")]
    WrongType {
        found: &'static str,
        wanted: &'static str,
    },
    #[error("has {found} values, the spec's shape {shape:?} needs {wanted}")]
    WrongLength {
        found: usize,
        wanted: usize,
        shape: Vec<i64>,
    },
    #[error(
        "value {value} (at position {position}) does not fit in s32; tessel has no 64-bit values"
    )]
    OutOfRange { value: i64, position: usize },
}

/// An error of the host input pipeline.
#[derive(Debug, Error)]
pub enum InputError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: record {index} at byte {offset}{}: {problem}", file.display(), if *decompressed { " of the decompressed stream" } else { "" })]
    CorruptRecord {
        file: PathBuf,
        index: u64,
        offset: u64,
        /// The offset counts bytes of the decompressed stream (a GZIP or ZLIB file).
        decompressed: bool,
        problem: RecordProblem,
    },
    #[error("unknown compression type {0:?}: expected \"\", \"GZIP\" or \"ZLIB\"")]
    UnknownCompression(String),
    #[error("{record}: not a tf.train.Example: {reason}")]
    NotAnExample {
        record: RecordContext,
        reason: String,
    },
    #[error("{record}: feature {feature:?} {problem}")]
    Feature {
        record: RecordContext,
        feature: String,
        problem: FeatureProblem,
    },
    #[error("parse spec: feature {feature:?}: {reason}")]
    BadSpec { feature: String, reason: String },
    #[error("decode_raw: {len} bytes is not a whole number of {element_type} values ({width} bytes each)")]
    DecodeRaw {
        len: usize,
        element_type: &'static str,
        width: usize,
    },
    #[error("{}: not an IDX file: {reason}", path.display())]
    Idx { path: PathBuf, reason: String },
}

impl InputError {
    /// The message without the record's place, for a caller that names the place itself
    /// (the dataset op `parse_example`, whose errors carry the element's origin).
    pub(crate) fn without_record(&self) -> String {
        match self {
            InputError::Feature {
                feature, problem, ..
            } => format!("feature {feature:?} {problem}"),
            InputError::NotAnExample { reason, .. } => {
                format!("not a tf.train.Example: {reason}")
            }
            other => other.to_string(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        InputError::Io {
            path: path.into(),
            source,
        }
    }
}
