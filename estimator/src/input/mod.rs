//! The host input pipeline: what an `input_fn` returns (`docs/input.md`).
//!
//! | module | holds |
//! | --- | --- |
//! | `element` | `Value`, `Element`, `ValueSpec`, `ElementSpec`: what flows through a dataset |
//! | `dataset` | `Dataset`: sources, transformations, positioned iterators, infeed |
//! | `error` | `InputError`, `RecordContext`: every error of the pipeline |
//! | `tfrecord_dataset` | `tfrecord_dataset`, `tfrecord_interleave`: TF's `TFRecordDataset` over files |
//! | `tfrecord` | TFRecord files: framing, compression, `RecordReader`/`RecordFiles`, writers |
//! | `example` | `tf.train.Example` protos (prost) and their text rendering |
//! | `parse` | `ParseSpec`, `parse_single_example`, `decode_raw` |
//! | `idx_dataset` | `idx_dataset`, `idx_dataset_normalized`: IDX files as a dataset source (MNIST's original files) |
//! | `idx` | `read_idx`: MNIST's IDX files (plain or .gz) |
//! | `mnist` | `convert_mnist`: IDX to TFRecords as TF's `convert_to_records.py` |

pub mod dataset;
pub mod element;
pub mod error;
pub mod example;
pub mod idx;
pub mod idx_dataset;
pub mod mnist;
pub mod parse;
pub mod tfrecord;
pub mod tfrecord_dataset;

pub use dataset::{Dataset, DatasetError, DatasetIterator};
pub use element::{Element, ElementSpec, Value, ValueSpec};
pub use error::{InputError, RecordContext};
pub use idx_dataset::{idx_dataset, idx_dataset_normalized};
pub use tfrecord_dataset::{tfrecord_dataset, tfrecord_interleave};
