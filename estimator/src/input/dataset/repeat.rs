//! `repeat(count)`: the input `count` times, or forever. Each epoch is a new pass over the
//! input with its own key (so a shuffle below reshuffles).
//!
//! A positioned iterator jumps straight to its epoch and offset when the input's cardinality is
//! known (a known cardinality is the same for every pass). When it is not (a file, a filter),
//! it reads and drops whole epochs until the cardinality becomes known, then jumps: a file
//! below a `cache()` is known once the first pass has filled the cache, so resuming the guide's
//! pipeline deep into training costs one epoch, not all of them. Without a cache every epoch
//! up to the position is read (epochs may differ in length: a `take` after a shuffle keeps a
//! different subset each epoch, which a filter after it thins differently).

use super::node::{Cardinality, ElementIter, ElementResult, Node};
use super::rng::derive_key;
use super::Dataset;
use crate::input::ElementSpec;

pub(crate) struct Repeat {
    input: Dataset,
    count: Option<u64>,
}

impl Repeat {
    pub(super) fn new(input: Dataset, count: Option<u64>) -> Self {
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
        let (epoch, offset, skip) = match self.input.cardinality() {
            Cardinality::Finite(0) => return Box::new(std::iter::empty()),
            Cardinality::Finite(n) => (start / n, start % n, 0),
            _ => (0, 0, start),
        };
        if self.count.is_some_and(|c| epoch >= c) {
            return Box::new(std::iter::empty());
        }
        Box::new(RepeatIter {
            input: self.input.clone(),
            key,
            count: self.count,
            epoch,
            current: self.input.node.open(derive_key(key, epoch), offset),
            in_epoch: offset,
            skip,
        })
    }
}

struct RepeatIter {
    input: Dataset,
    key: u64,
    count: Option<u64>,
    epoch: u64,
    current: ElementIter,
    /// Elements of the current epoch before the next one (including a starting offset).
    in_epoch: u64,
    /// Elements still to drop before the first one is produced (a positioned iterator over an
    /// input of unknown cardinality); they are counted in `in_epoch` too.
    skip: u64,
}

impl Iterator for RepeatIter {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        loop {
            match self.current.next() {
                Some(Ok(_)) if self.skip > 0 => {
                    self.skip -= 1;
                    self.in_epoch += 1;
                    continue;
                }
                Some(item) => {
                    self.in_epoch += 1;
                    return Some(item);
                }
                None => {}
            }
            // An empty pass would repeat forever without producing anything: stop instead.
            if self.in_epoch == 0 {
                return None;
            }
            // Still skipping: jump the whole epochs if every pass now has a known length.
            let (whole_epochs, offset) = match self.input.cardinality() {
                Cardinality::Finite(n) if n > 0 && self.skip > 0 => {
                    let jump = (self.skip / n, self.skip % n);
                    self.skip = 0;
                    jump
                }
                _ => (0, 0),
            };
            self.epoch = self.epoch.saturating_add(1).saturating_add(whole_epochs);
            if self.count.is_some_and(|c| self.epoch >= c) {
                return None;
            }
            self.current = self
                .input
                .node
                .open(derive_key(self.key, self.epoch), offset);
            self.in_epoch = offset;
        }
    }
}
