//! `shuffle(buffer_size, seed)`: tf.data's buffer algorithm with a SplitMix64 generator.
//!
//! The algorithm, exactly: fill a buffer with the first `buffer_size` input elements (fewer if
//! the input is shorter); then, for each output, draw `j` uniformly in `0..len` (Lemire's
//! bounded integer from SplitMix64), output `buffer[j]`, move the buffer's last element into
//! slot `j`, and push the next input element (if any) at the end. The generator is seeded with
//! `derive_key(seed, key)` where `key` identifies the pass (each epoch under `repeat` has its
//! own), so every epoch is shuffled differently and every run with the same seed the same.
//! A buffer at least as large as the dataset gives a uniform permutation.

use super::error::DatasetError;
use super::node::{fast_forward, Cardinality, ElementIter, ElementResult, Node};
use super::rng::{derive_key, SplitMix64};
use super::Dataset;
use crate::input::{Element, ElementSpec};

pub(crate) struct Shuffle {
    input: Dataset,
    buffer_size: usize,
    seed: u64,
}

impl Shuffle {
    pub(super) fn new(input: Dataset, buffer_size: usize, seed: u64) -> Result<Self, DatasetError> {
        if buffer_size == 0 {
            return Err(DatasetError::invalid(
                "shuffle",
                "buffer_size must be at least 1",
            ));
        }
        Ok(Shuffle {
            input,
            buffer_size,
            seed,
        })
    }
}

impl Node for Shuffle {
    fn spec(&self) -> &ElementSpec {
        self.input.element_spec()
    }

    fn cardinality(&self) -> Cardinality {
        self.input.cardinality()
    }

    // The buffer's contents at position `start` depend on every draw before it, so a
    // positioned iterator replays the draws (elements are moved, not copied, while dropping).
    fn open(&self, key: u64, start: u64) -> ElementIter {
        let iter = ShuffleIter {
            input: self.input.node.open(key, 0),
            input_done: false,
            buffer: Vec::with_capacity(self.buffer_size.min(1 << 20)),
            buffer_size: self.buffer_size,
            rng: SplitMix64::new(derive_key(self.seed, key)),
        };
        fast_forward(Box::new(iter), start)
    }
}

struct ShuffleIter {
    input: ElementIter,
    input_done: bool,
    buffer: Vec<Element>,
    buffer_size: usize,
    rng: SplitMix64,
}

impl Iterator for ShuffleIter {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        while !self.input_done && self.buffer.len() < self.buffer_size {
            match self.input.next() {
                Some(Ok(e)) => self.buffer.push(e),
                Some(Err(e)) => return Some(Err(e)),
                None => self.input_done = true,
            }
        }
        if self.buffer.is_empty() {
            return None;
        }
        let j = self.rng.below(self.buffer.len() as u64) as usize;
        Some(Ok(self.buffer.swap_remove(j)))
    }
}
