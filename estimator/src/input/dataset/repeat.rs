//! `repeat(count)`: the input `count` times, or forever. Each epoch is a new pass over the
//! input with its own key (so a shuffle below reshuffles). A positioned iterator jumps straight
//! to its epoch and offset when the input's cardinality is known.

use super::node::{fast_forward, Cardinality, ElementIter, ElementResult, Node};
use super::rng::derive_key;
use super::Dataset;
use crate::input::ElementSpec;

pub struct Repeat {
    input: Dataset,
    count: Option<u64>,
}

impl Repeat {
    pub fn new(input: Dataset, count: Option<u64>) -> Self {
        Repeat { input, count }
    }
}

impl Node for Repeat {
    fn spec(&self) -> &ElementSpec {
        self.input.element_spec()
    }

    fn cardinality(&self) -> Cardinality {
        match (self.input.cardinality(), self.count) {
            (_, Some(0)) | (Cardinality::Finite(0), _) => Cardinality::Finite(0),
            (Cardinality::Finite(n), Some(c)) => Cardinality::Finite(n.saturating_mul(c)),
            (Cardinality::Unknown, _) => Cardinality::Unknown,
            _ => Cardinality::Infinite,
        }
    }

    fn open(&self, key: u64, start: u64) -> ElementIter {
        let (epoch, offset) = match self.input.cardinality() {
            Cardinality::Finite(0) => return Box::new(std::iter::empty()),
            Cardinality::Finite(n) => (start / n, start % n),
            _ => (0, 0),
        };
        if self.count.is_some_and(|c| epoch >= c) {
            return Box::new(std::iter::empty());
        }
        let iter = RepeatIter {
            input: self.input.clone(),
            key,
            count: self.count,
            epoch,
            current: self.input.node.open(derive_key(key, epoch), offset),
            produced_this_epoch: offset > 0,
        };
        match self.input.cardinality() {
            Cardinality::Finite(_) => Box::new(iter),
            _ => fast_forward(Box::new(iter), start),
        }
    }
}

struct RepeatIter {
    input: Dataset,
    key: u64,
    count: Option<u64>,
    epoch: u64,
    current: ElementIter,
    produced_this_epoch: bool,
}

impl Iterator for RepeatIter {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        loop {
            if let Some(item) = self.current.next() {
                self.produced_this_epoch = true;
                return Some(item);
            }
            // An empty pass would repeat forever without producing anything: stop instead.
            if !self.produced_this_epoch {
                return None;
            }
            self.epoch += 1;
            if self.count.is_some_and(|c| self.epoch >= c) {
                return None;
            }
            self.current = self.input.node.open(derive_key(self.key, self.epoch), 0);
            self.produced_this_epoch = false;
        }
    }
}
