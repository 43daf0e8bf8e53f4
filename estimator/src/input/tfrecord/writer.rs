//! Writing TFRecord files: [`RecordWriter`] frames records into any `Write` (optionally GZIP or
//! ZLIB compressed); [`RecordFileWriter`] writes a whole file atomically, to a temporary file
//! in the same directory renamed into place by [`RecordFileWriter::commit`], so that a reader
//! never sees half a file and a failed run leaves none behind.

use super::compression::Compression;
use super::framing::write_record;
use crate::input::InputError;
use flate2::write::{GzEncoder, ZlibEncoder};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

enum Sink<W: Write> {
    Plain(W),
    Gzip(GzEncoder<W>),
    Zlib(ZlibEncoder<W>),
}

/// Frames records into a writer.
pub struct RecordWriter<W: Write> {
    sink: Sink<W>,
}

impl<W: Write> RecordWriter<W> {
    pub fn new(inner: W, compression: Compression) -> Self {
        // TF writes with zlib's default level (6).
        let level = flate2::Compression::default();
        let sink = match compression {
            Compression::None => Sink::Plain(inner),
            Compression::Gzip => Sink::Gzip(GzEncoder::new(inner, level)),
            Compression::Zlib => Sink::Zlib(ZlibEncoder::new(inner, level)),
        };
        RecordWriter { sink }
    }

    /// Appends one record.
    pub fn write_record(&mut self, data: &[u8]) -> io::Result<()> {
        match &mut self.sink {
            Sink::Plain(w) => write_record(w, data),
            Sink::Gzip(w) => write_record(w, data),
            Sink::Zlib(w) => write_record(w, data),
        }
    }

    /// Flushes what was written so far to the inner writer (a compressed stream stays open).
    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
            Sink::Zlib(w) => w.flush(),
        }
    }

    /// Ends the compressed stream, if any, and returns the inner writer (flushed).
    pub fn finish(self) -> io::Result<W> {
        let mut w = match self.sink {
            Sink::Plain(w) => w,
            Sink::Gzip(w) => w.finish()?,
            Sink::Zlib(w) => w.finish()?,
        };
        w.flush()?;
        Ok(w)
    }
}

/// A whole TFRecord file written atomically: nothing appears at `path` until [`commit`].
///
/// [`commit`]: RecordFileWriter::commit
pub struct RecordFileWriter {
    path: PathBuf,
    temp: PathBuf,
    writer: Option<RecordWriter<BufWriter<File>>>,
    records: u64,
}

impl RecordFileWriter {
    pub fn create(path: impl AsRef<Path>, compression: Compression) -> Result<Self, InputError> {
        let path = path.as_ref().to_path_buf();
        let name = path
            .file_name()
            .ok_or_else(|| {
                InputError::io(
                    &path,
                    io::Error::new(io::ErrorKind::InvalidInput, "not a file name"),
                )
            })?
            .to_string_lossy();
        let temp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        let file = File::create(&temp).map_err(|e| InputError::io(&temp, e))?;
        Ok(RecordFileWriter {
            writer: Some(RecordWriter::new(
                BufWriter::with_capacity(256 * 1024, file),
                compression,
            )),
            path,
            temp,
            records: 0,
        })
    }

    /// Appends one record.
    pub fn write(&mut self, data: &[u8]) -> Result<(), InputError> {
        let w = self.writer.as_mut().expect("present until commit");
        w.write_record(data)
            .map_err(|e| InputError::io(&self.temp, e))?;
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Finishes the file, syncs it and renames it to its path; returns the record count.
    pub fn commit(mut self) -> Result<u64, InputError> {
        let w = self.writer.take().expect("present until commit");
        let temp = self.temp.clone();
        let file = w
            .finish()
            .and_then(|b| b.into_inner().map_err(|e| e.into_error()))
            .map_err(|e| {
                let _ = std::fs::remove_file(&temp);
                InputError::io(&temp, e)
            })?;
        let done = file
            .sync_all()
            .map_err(|e| InputError::io(&temp, e))
            .and_then(|_| {
                std::fs::rename(&temp, &self.path).map_err(|e| InputError::io(&self.path, e))
            });
        if done.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        done.map(|_| self.records)
    }
}

impl Drop for RecordFileWriter {
    fn drop(&mut self) {
        if self.writer.is_some() {
            // Not committed (an error or an early return): leave nothing behind.
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}
