//! [`EventWriter`]: appends TFRecord-framed `Event`s to
//! `DIR/events.out.tfevents.<secs>.<hostname>`, first `file_version: "brain.Event:2"`.
//!
//! An event file is an append log that TensorBoard reads while training runs, so it cannot be
//! written atomically (temp + rename) like a whole TFRecord file. Instead every write is
//! flushed to the file at once, so what TensorBoard sees is always whole records, and a crash
//! loses at most the record being written (which a reader reports as truncated).

use super::proto::{Event, EventKind, Summary, SummaryValue};
use crate::input::tfrecord::framing::write_record;
use crate::input::tfrecord::{ReaderOptions, RecordReader};
use crate::input::InputError;
use prost::Message;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// An error writing or reading an event file.
#[derive(Debug, Error)]
pub enum SummaryError {
    #[error("event file {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("event file {}: {reason}", path.display())]
    BadEvent { path: PathBuf, reason: String },
    #[error(transparent)]
    Record(#[from] InputError),
}

/// Writes one event file.
pub struct EventWriter {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
}

impl EventWriter {
    /// Creates `dir` if needed and a new event file in it, named as TF names them
    /// (`events.out.tfevents.<secs>.<hostname>`, with `.1`, `.2`, ... appended if a file of
    /// that name already exists), and writes the `file_version` event.
    pub fn create(dir: impl AsRef<Path>) -> Result<EventWriter, SummaryError> {
        let dir = dir.as_ref();
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SummaryError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let now = now();
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        let base = format!("events.out.tfevents.{:010}.{host}", now as u64);
        let mut n = 0;
        let (path, file) = loop {
            let name = if n == 0 {
                base.clone()
            } else {
                format!("{base}.{n}")
            };
            let path = dir.join(name);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(f) => break (path, f),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(io_err(&path)(e)),
            }
        };
        let mut w = EventWriter {
            path,
            file,
            buf: Vec::new(),
        };
        w.write_event(&Event {
            wall_time: now,
            step: 0,
            what: Some(EventKind::FileVersion("brain.Event:2".into())),
        })?;
        // The new name in the directory is durable too, not only the file's data.
        w.flush()?;
        tessel_runtime::durable::sync_dir(dir).map_err(io_err(dir))?;
        Ok(w)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event and flushes it to the file.
    pub(crate) fn write_event(&mut self, event: &Event) -> Result<(), SummaryError> {
        self.buf.clear();
        write_record(&mut self.buf, &event.encode_to_vec()).expect("writing to a Vec");
        // One write of the whole framed record, so a reader never sees half a header.
        self.file
            .write_all(&self.buf)
            .and_then(|_| self.file.flush())
            .map_err(|source| SummaryError::Io {
                path: self.path.clone(),
                source,
            })
    }

    /// Appends a scalar summary `tag = value` at `step`.
    pub fn scalar(&mut self, tag: &str, step: i64, value: f32) -> Result<(), SummaryError> {
        self.scalars(step, &[(tag, value)])
    }

    /// Appends several scalars at `step` as one event (one `Summary` with a value per tag).
    pub fn scalars(&mut self, step: i64, values: &[(&str, f32)]) -> Result<(), SummaryError> {
        let summary = Summary {
            value: values
                .iter()
                .map(|&(tag, v)| SummaryValue {
                    tag: tag.to_string(),
                    simple_value: Some(v),
                })
                .collect(),
        };
        self.write_event(&Event {
            wall_time: now(),
            step,
            what: Some(EventKind::Summary(summary)),
        })
    }

    /// Forces the file's data to disk (each write already reached the OS).
    pub fn flush(&mut self) -> Result<(), SummaryError> {
        self.file.sync_data().map_err(|source| SummaryError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// Every event of an event file, in order.
pub fn read_events(path: impl AsRef<Path>) -> Result<Vec<Event>, SummaryError> {
    let path = path.as_ref();
    let mut out = Vec::new();
    for record in RecordReader::open(path, &ReaderOptions::default())? {
        let event = Event::decode(&record?[..]).map_err(|e| SummaryError::BadEvent {
            path: path.to_path_buf(),
            reason: format!("event {}: {e}", out.len()),
        })?;
        out.push(event);
    }
    Ok(out)
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_version_then_scalars_that_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = EventWriter::create(dir.path()).unwrap();
        w.scalar("loss", 10, 0.25).unwrap();
        w.scalars(20, &[("loss", 0.125), ("learning_rate", 0.05)])
            .unwrap();
        let name = w.path().file_name().unwrap().to_str().unwrap().to_string();
        assert!(name.starts_with("events.out.tfevents."), "{name}");
        let events = read_events(w.path()).unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(
            events[0].what,
            Some(EventKind::FileVersion("brain.Event:2".into()))
        );
        let Some(EventKind::Summary(s)) = &events[2].what else {
            panic!("{:?}", events[2])
        };
        assert_eq!(events[2].step, 20);
        assert_eq!(s.value[1].tag, "learning_rate");
        assert_eq!(s.value[1].simple_value, Some(0.05));
        // A second writer in the same second gets its own file.
        let w2 = EventWriter::create(dir.path()).unwrap();
        assert_ne!(w2.path(), w.path());
    }
}
