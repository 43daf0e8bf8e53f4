//! The inside of a dataset: a [`Node`] per source or transformation, each opening boxed
//! iterators over its elements.
//!
//! Why a trait of nodes with boxed iterators (rather than an enum of node kinds): each
//! transformation is one self-contained file holding its node and its iterator, user closures
//! (map, filter, generators) fit naturally as trait objects, and the lead's TFRecord source
//! plugs in as a generator without this module knowing about it. The price, one virtual call
//! per element per stage, is nothing next to the copies an element needs.

use super::error::DatasetError;
use crate::input::{Element, ElementSpec};

/// One element, or why there is none.
pub type ElementResult = Result<Element, DatasetError>;

/// An iterator over a node's elements. `Send` so prefetch and map workers can run it.
pub type ElementIter = Box<dyn Iterator<Item = ElementResult> + Send>;

/// How many elements a dataset has, when known without reading data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cardinality {
    Finite(u64),
    Infinite,
    /// Depends on the data (a filter, a generator, a file).
    Unknown,
}

/// A source or a transformation.
pub trait Node: Send + Sync {
    /// What every element looks like; known without reading data.
    fn spec(&self) -> &ElementSpec;

    fn cardinality(&self) -> Cardinality;

    /// Iterates from element `start` on, giving exactly what an iterator opened at 0 gives
    /// after its first `start` elements. `key` identifies the iteration: `repeat` opens each
    /// epoch with its own key so a shuffle below it reshuffles, deterministically. A node
    /// that cannot jump (a filter, a shuffle) reads and drops its first `start` elements.
    fn open(&self, key: u64, start: u64) -> ElementIter;
}

/// An iterator that yields `error` and ends.
pub fn failed(error: DatasetError) -> ElementIter {
    Box::new(std::iter::once(Err(error)))
}

/// Reads and drops the first `n` elements of `iter` (now, so positioned iterators are ready
/// when returned). An error met while doing so is what the result yields.
pub(crate) fn fast_forward(mut iter: ElementIter, n: u64) -> ElementIter {
    for _ in 0..n {
        match iter.next() {
            Some(Ok(_)) => {}
            Some(Err(e)) => return failed(e),
            None => return Box::new(std::iter::empty()),
        }
    }
    iter
}
