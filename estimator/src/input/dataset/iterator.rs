//! The iterator a user holds: elements in order plus the position (how many elements have
//! been produced since the dataset's first), which is what a checkpoint records so a resumed
//! run continues exactly where the interrupted one was.

use super::node::{ElementIter, ElementResult};

/// Iterates a [`super::Dataset`]. Ends after the first error (as tf.data's iterators do).
pub struct DatasetIterator {
    inner: ElementIter,
    position: u64,
    done: bool,
}

impl DatasetIterator {
    pub(crate) fn new(inner: ElementIter, position: u64) -> Self {
        DatasetIterator {
            inner,
            position,
            done: false,
        }
    }

    /// Elements produced so far, counting from the dataset's first element (so an iterator
    /// opened with `iter_from(k)` starts at `k`). `dataset.iter_from(it.position())` continues
    /// exactly where `it` is.
    pub fn position(&self) -> u64 {
        self.position
    }
}

impl Iterator for DatasetIterator {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        if self.done {
            return None;
        }
        let item = self.inner.next();
        match &item {
            Some(Ok(_)) => self.position += 1,
            Some(Err(_)) | None => self.done = true,
        }
        item
    }
}
