//! `take(n)`, `skip(n)` and `shard(num_shards, index)`: selections by position, each opening
//! its input straight at the right element.

use super::error::DatasetError;
use super::node::{Cardinality, ElementIter, Node};
use super::Dataset;
use crate::input::ElementSpec;

/// Which elements of the input a [`Select`] keeps.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Selection {
    /// The first `n`.
    Take(u64),
    /// All but the first `n`.
    Skip(u64),
    /// Elements `index`, `index + num`, `index + 2 num`, ... (one host's share).
    Shard { num: u64, index: u64 },
}

pub(super) struct Select {
    input: Dataset,
    selection: Selection,
}

impl Select {
    pub(super) fn new(input: Dataset, selection: Selection) -> Self {
        Select { input, selection }
    }

    pub(super) fn shard(input: Dataset, num: u64, index: u64) -> Result<Self, DatasetError> {
        if num == 0 || index >= num {
            return Err(DatasetError::invalid(
                "shard",
                format!("index {index} is not in 0..{num} (num_shards)"),
            ));
        }
        Ok(Select::new(input, Selection::Shard { num, index }))
    }
}

impl Node for Select {
    fn spec(&self) -> &ElementSpec {
        self.input.element_spec()
    }

    fn cardinality(&self) -> Cardinality {
        use Cardinality::*;
        match (self.selection, self.input.cardinality()) {
            (Selection::Take(n), Finite(m)) => Finite(n.min(m)),
            (Selection::Take(0), _) => Finite(0),
            (Selection::Take(n), Infinite) => Finite(n),
            (Selection::Take(_), _) => Unknown,
            (Selection::Skip(n), Finite(m)) => Finite(m.saturating_sub(n)),
            (Selection::Shard { num, index }, Finite(m)) => {
                Finite(m.saturating_sub(index).div_ceil(num))
            }
            (_, other) => other,
        }
    }

    fn open(&self, key: u64, start: u64) -> ElementIter {
        match self.selection {
            Selection::Take(n) => Box::new(
                self.input
                    .node
                    .open(key, start.min(n))
                    .take(n.saturating_sub(start) as usize),
            ),
            Selection::Skip(n) => self.input.node.open(key, start.saturating_add(n)),
            Selection::Shard { num, index } => {
                let first = start.saturating_mul(num).saturating_add(index);
                Box::new(ShardIter {
                    input: self.input.node.open(key, first),
                    gap: num - 1,
                    started: false,
                })
            }
        }
    }
}

/// Keeps one element, then reads and drops `gap`; an error among the dropped ones still
/// reaches the consumer (nothing is skipped silently).
struct ShardIter {
    input: ElementIter,
    gap: u64,
    started: bool,
}

impl Iterator for ShardIter {
    type Item = super::node::ElementResult;

    fn next(&mut self) -> Option<Self::Item> {
        if self.started {
            for _ in 0..self.gap {
                match self.input.next()? {
                    Ok(_) => {}
                    Err(e) => return Some(Err(e)),
                }
            }
        }
        self.started = true;
        self.input.next()
    }
}
