//! TF's `TFRecordDataset(filenames, compression_type, buffer_size)`: the records of the
//! files, one file after the other, as a dataset whose elements have one scalar string
//! component `record`; and TF's `interleave` over files for reading several at once.
//!
//! Each element's `origin` is its record's file, index and byte offset, so an error about it
//! further down the pipeline (a parse, a map, a batch) names the place.
//!
//! With `ReaderOptions::skip_corrupt` (TF's `ignore_errors`), corrupt records are skipped and
//! counted, never silently: at the end of each pass over the files a warning on stderr gives
//! the count and the first one's file, record and offset.

use super::dataset::{Dataset, DatasetError, ElementIter, ElementResult};
use super::tfrecord::{ReaderOptions, RecordFiles};
use super::{Element, ElementSpec, Value, ValueSpec};
use std::path::{Path, PathBuf};

/// The component name of a record dataset's elements.
pub(crate) const RECORD: &str = "record";

/// The records of `files` (`&[path]`, `&paths`), in order.
pub fn tfrecord_dataset<P: AsRef<Path>>(files: &[P], options: ReaderOptions) -> Dataset {
    let files: Vec<PathBuf> = files.iter().map(|f| f.as_ref().to_path_buf()).collect();
    let spec = ElementSpec {
        components: vec![(RECORD.to_string(), ValueSpec::Bytes { dims: vec![] })],
    };
    Dataset::from_generator(spec, move || {
        Ok(Box::new(Records {
            reader: RecordFiles::new(files.clone(), options.clone()),
            reported: false,
        }) as ElementIter)
    })
}

/// One dataset per file, interleaved: `cycle_length` files open at once, `block_length`
/// records from each in turn (TF's `Dataset.list_files(..).interleave(TFRecordDataset, ..)`).
pub fn tfrecord_interleave<P: AsRef<Path>>(
    files: &[P],
    options: ReaderOptions,
    cycle_length: usize,
    block_length: usize,
) -> Result<Dataset, DatasetError> {
    let per_file = files
        .iter()
        .map(|f| tfrecord_dataset(std::slice::from_ref(f), options.clone()))
        .collect();
    Dataset::interleave(per_file, cycle_length, block_length)
}

/// The records of a [`RecordFiles`] as elements that know their record, with a warning
/// about skipped records at the end.
struct Records {
    reader: RecordFiles,
    reported: bool,
}

impl Iterator for Records {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        let mut buf = Vec::new();
        match self.reader.read_into(&mut buf) {
            Ok(true) => Some(Ok(Element {
                values: vec![Value::Bytes {
                    dims: vec![],
                    items: vec![buf],
                }],
                origin: self.reader.current().and_then(|r| r.last_record()),
            })),
            Ok(false) => {
                let skipped = self.reader.skipped_count();
                if skipped > 0 && !self.reported {
                    self.reported = true;
                    let first = self.reader.skipped().next().map(|e| e.to_string());
                    log::warn!(
                        target: "tessel",
                        "skipped {skipped} corrupt record(s) (ignore_errors); the first: {}",
                        first.unwrap_or_default()
                    );
                }
                None
            }
            // The reader's errors name the file, record and offset themselves.
            Err(e) => Some(Err(DatasetError::source("TFRecordDataset", e))),
        }
    }
}
