//! Reading TFRecord files: [`RecordReader`] over one file and [`RecordFiles`] over a list, both
//! iterators of `Result<Vec<u8>, InputError>` (what a TFRecordDataset source wraps).
//!
//! Errors: a bad record is an [`InputError::CorruptRecord`] naming the file, the record index and
//! the byte offset of its header, and the iterator ends after it. With
//! [`ReaderOptions::skip_corrupt`] (TF's `ignore_errors`) a bad record is counted in
//! [`RecordReader::skipped`] instead, never dropped silently. What a skip can do depends on
//! what broke: after a bad data CRC the next record is still framed and reading goes on; after a
//! bad length CRC, a truncation or a broken compressed stream nothing after it can be framed, so
//! the rest of that file is given up (as TF does) and the next file is read.

use super::compression::Compression;
use super::framing::{read_record, ReadFailure};
use crate::input::error::RecordProblem;
use crate::input::{InputError, RecordContext};
use flate2::bufread::{MultiGzDecoder, ZlibDecoder};
use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to read TFRecord files.
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    pub compression: Compression,
    /// Bytes read from the file at a time (TF's `buffer_size`, 256 KiB by default as in TF).
    pub buffer_size: usize,
    /// Check both CRCs of every record (true by default).
    pub check_crc: bool,
    /// Skip and count corrupt records instead of failing (TF's `ignore_errors`).
    pub skip_corrupt: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            compression: Compression::None,
            buffer_size: 256 * 1024,
            check_crc: true,
            skip_corrupt: false,
        }
    }
}

/// The records of one file, in order.
pub struct RecordReader {
    /// Shared with the `RecordContext` of every record read, so naming a record costs no copy.
    path: Arc<Path>,
    input: Box<dyn Read + Send>,
    compressed: bool,
    check_crc: bool,
    skip_corrupt: bool,
    index: u64,
    offset: u64,
    done: bool,
    skipped: Vec<InputError>,
    /// Where the last record returned starts: (index, offset).
    last: Option<(u64, u64)>,
}

impl RecordReader {
    /// Opens `path` (the file is read lazily, `buffer_size` bytes at a time).
    pub fn open(path: impl AsRef<Path>, options: &ReaderOptions) -> Result<Self, InputError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| InputError::io(path, e))?;
        Ok(Self::from_reader(path, file, options))
    }

    /// Reads records from any byte source; `name` is what errors call it.
    pub fn from_reader(
        name: impl Into<PathBuf>,
        source: impl Read + Send + 'static,
        options: &ReaderOptions,
    ) -> Self {
        let buffered = BufReader::with_capacity(options.buffer_size.max(1), source);
        // The decoder's output is read in small pieces (headers): buffer it too.
        let input: Box<dyn Read + Send> = match options.compression {
            Compression::None => Box::new(buffered),
            Compression::Gzip => Box::new(BufReader::with_capacity(
                64 * 1024,
                MultiGzDecoder::new(buffered),
            )),
            Compression::Zlib => Box::new(BufReader::with_capacity(
                64 * 1024,
                ZlibDecoder::new(buffered),
            )),
        };
        RecordReader {
            path: Arc::from(name.into()),
            input,
            compressed: options.compression != Compression::None,
            check_crc: options.check_crc,
            skip_corrupt: options.skip_corrupt,
            index: 0,
            offset: 0,
            done: false,
            skipped: Vec::new(),
            last: None,
        }
    }

    /// The file's name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The index the next record will have (records read or skipped so far).
    pub fn next_index(&self) -> u64 {
        self.index
    }

    /// The byte offset of the next record's header (in the decompressed stream if compressed).
    pub fn next_offset(&self) -> u64 {
        self.offset
    }

    /// The file, index and offset of the last record read (for messages about its contents).
    pub fn last_record(&self) -> Option<RecordContext> {
        let (index, offset) = self.last?;
        Some(RecordContext {
            file: Some(self.path.clone()),
            index: Some(index),
            offset: Some(offset),
        })
    }

    /// The corrupt records skipped so far (only with `skip_corrupt`), each with its error.
    pub fn skipped(&self) -> &[InputError] {
        &self.skipped
    }

    /// Reads the next record into `buf`, reusing its allocation: `Ok(false)` at the end.
    pub fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, InputError> {
        loop {
            if self.done {
                return Ok(false);
            }
            let start = self.offset;
            let (problem, consumed) = match read_record(&mut self.input, buf, self.check_crc) {
                Ok(None) => {
                    self.done = true;
                    return Ok(false);
                }
                Ok(Some(n)) => {
                    self.last = Some((self.index, start));
                    self.offset += n;
                    self.index += 1;
                    return Ok(true);
                }
                Err(ReadFailure::Io(e))
                    if self.compressed
                        && matches!(
                            e.kind(),
                            ErrorKind::InvalidData
                                | ErrorKind::InvalidInput
                                | ErrorKind::UnexpectedEof
                        ) =>
                {
                    // A broken GZIP/ZLIB stream: the decoder reports it as an I/O error.
                    (RecordProblem::Decompress(e.to_string()), 0)
                }
                Err(ReadFailure::Io(e)) => {
                    self.done = true;
                    return Err(InputError::io(self.path.as_ref(), e));
                }
                Err(ReadFailure::Record { problem, consumed }) => (problem, consumed),
            };
            let error = InputError::CorruptRecord {
                file: self.path.to_path_buf(),
                index: self.index,
                offset: start,
                decompressed: self.compressed,
                problem: problem.clone(),
            };
            self.index += 1;
            self.offset += consumed;
            self.done = !problem.framing_intact();
            if !self.skip_corrupt {
                self.done = true;
                return Err(error);
            }
            self.skipped.push(error);
        }
    }
}

impl Iterator for RecordReader {
    type Item = Result<Vec<u8>, InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut buf = Vec::new();
        match self.read_into(&mut buf) {
            Ok(true) => Some(Ok(buf)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// The records of several files, one file after the other.
pub struct RecordFiles {
    paths: Vec<PathBuf>,
    next_file: usize,
    current: Option<RecordReader>,
    options: ReaderOptions,
    skipped: Vec<InputError>,
    failed: bool,
}

impl RecordFiles {
    /// Reads `paths` in order; each file is opened when reading reaches it.
    pub fn new(
        paths: impl IntoIterator<Item = impl Into<PathBuf>>,
        options: ReaderOptions,
    ) -> Self {
        RecordFiles {
            paths: paths.into_iter().map(Into::into).collect(),
            next_file: 0,
            current: None,
            options,
            skipped: Vec::new(),
            failed: false,
        }
    }

    /// The corrupt records skipped so far over all files (only with `skip_corrupt`).
    pub fn skipped(&self) -> impl Iterator<Item = &InputError> {
        self.skipped
            .iter()
            .chain(self.current.iter().flat_map(|r| r.skipped()))
    }

    /// How many corrupt records were skipped so far.
    pub fn skipped_count(&self) -> usize {
        self.skipped().count()
    }

    /// The reader of the file being read, if any; after a record was read, the file it came
    /// from (see [`RecordReader::last_record`]).
    pub fn current(&self) -> Option<&RecordReader> {
        self.current.as_ref()
    }

    /// Reads the next record into `buf`: `Ok(false)` after the last file.
    pub fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, InputError> {
        loop {
            if self.failed {
                return Ok(false);
            }
            if self.current.is_none() {
                let Some(path) = self.paths.get(self.next_file) else {
                    return Ok(false);
                };
                self.next_file += 1;
                match RecordReader::open(path, &self.options) {
                    Ok(r) => self.current = Some(r),
                    Err(e) => {
                        // A file that cannot be opened is not a corrupt record: never skipped.
                        self.failed = true;
                        return Err(e);
                    }
                }
            }
            let reader = self.current.as_mut().expect("opened above");
            match reader.read_into(buf) {
                Ok(true) => return Ok(true),
                Ok(false) => {
                    let done = self.current.take().expect("reading it");
                    self.skipped.extend(done.skipped);
                }
                Err(e) => {
                    self.failed = true;
                    return Err(e);
                }
            }
        }
    }
}

impl Iterator for RecordFiles {
    type Item = Result<Vec<u8>, InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut buf = Vec::new();
        match self.read_into(&mut buf) {
            Ok(true) => Some(Ok(buf)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
