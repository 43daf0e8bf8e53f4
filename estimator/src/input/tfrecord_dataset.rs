//! TF's `TFRecordDataset(filenames, compression_type, buffer_size)`: the records of the
//! files, one file after the other, as a dataset whose elements have one scalar string
//! component `record`; and TF's `interleave` over files for reading several at once.
//!
//! With `ReaderOptions::skip_corrupt` (TF's `ignore_errors`), corrupt records are skipped and
//! counted, never silently: at the end of each pass over the files a warning on stderr gives
//! the count and the first one's file, record and offset.

use super::dataset::{Dataset, DatasetError};
use super::error::InputError;
use super::tfrecord::{ReaderOptions, RecordFiles};
use std::path::PathBuf;

/// The component name of a record dataset's elements.
pub const RECORD: &str = "record";

/// The records of `files`, in order.
pub fn tfrecord_dataset(files: &[PathBuf], options: ReaderOptions) -> Dataset {
    let files = files.to_vec();
    // The reader's errors name the file, record and offset themselves.
    let context = "TFRecordDataset".to_string();
    Dataset::from_records(
        RECORD,
        context,
        Box::new(move || {
            let reader = RecordFiles::new(files.clone(), options.clone());
            Ok(Box::new(ReportSkipped {
                reader,
                reported: false,
            })
                as Box<
                    dyn Iterator<Item = Result<Vec<u8>, InputError>> + Send,
                >)
        }),
    )
}

/// One dataset per file, interleaved: `cycle_length` files open at once, `block_length`
/// records from each in turn (TF's `Dataset.list_files(..).interleave(TFRecordDataset, ..)`).
pub fn tfrecord_interleave(
    files: &[PathBuf],
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

/// The records of a [`RecordFiles`], with a warning about skipped records at the end.
struct ReportSkipped {
    reader: RecordFiles,
    reported: bool,
}

impl Iterator for ReportSkipped {
    type Item = Result<Vec<u8>, InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut buf = Vec::new();
        match self.reader.read_into(&mut buf) {
            Ok(true) => Some(Ok(buf)),
            Ok(false) => {
                let skipped = self.reader.skipped_count();
                if skipped > 0 && !self.reported {
                    self.reported = true;
                    let first = self.reader.skipped().next().map(|e| e.to_string());
                    eprintln!(
                        "WARNING:tessel:skipped {skipped} corrupt record(s) (ignore_errors); the first: {}",
                        first.unwrap_or_default()
                    );
                }
                None
            }
            Err(e) => Some(Err(e)),
        }
    }
}
