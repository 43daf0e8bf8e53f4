//! TFRecord files: TensorFlow's record framing, read and written, plain or GZIP/ZLIB compressed.
//!
//! | module | holds |
//! | --- | --- |
//! | `framing` | one record's bytes on disk: length, masked CRC32C, data, masked CRC32C |
//! | `compression` | TF's `compression_type` ("", "GZIP", "ZLIB") |
//! | `reader` | `RecordReader` (one file) and `RecordFiles` (a file list), iterators of records |
//! | `writer` | `RecordWriter` (any `Write`) and `RecordFileWriter` (a whole file, atomically) |

pub mod compression;
pub mod framing;
pub mod reader;
pub mod writer;

pub use compression::Compression;
pub use reader::{ReaderOptions, RecordFiles, RecordReader};
pub use writer::{RecordFileWriter, RecordWriter};
