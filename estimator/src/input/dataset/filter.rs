//! `filter(predicate)`: keeps the elements for which the predicate is true. A panic in the
//! predicate becomes an error.

use super::error::{panic_message, DatasetError};
use super::node::{fast_forward, Cardinality, ElementIter, Node};
use super::Dataset;
use crate::input::{Element, ElementSpec};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A filter predicate.
pub(crate) type Predicate = dyn Fn(&Element) -> Result<bool, DatasetError> + Send + Sync;

pub(crate) struct Filter {
    input: Dataset,
    predicate: Arc<Predicate>,
}

impl Filter {
    pub(super) fn new(input: Dataset, predicate: Arc<Predicate>) -> Self {
        Filter { input, predicate }
    }
}

impl Node for Filter {
    fn spec(&self) -> &ElementSpec {
        self.input.element_spec()
    }

    fn cardinality(&self) -> Cardinality {
        match self.input.cardinality() {
            Cardinality::Finite(0) => Cardinality::Finite(0),
            _ => Cardinality::Unknown,
        }
    }

    // Which input elements survive is only known by testing them, so a positioned iterator
    // filters from the input's start and drops `start` kept elements.
    fn open(&self, key: u64, start: u64) -> ElementIter {
        let p = self.predicate.clone();
        let mut index = 0u64;
        let iter = self.input.node.open(key, 0).filter_map(move |r| {
            let i = index;
            index += 1;
            let e = match r {
                Ok(e) => e,
                Err(err) => return Some(Err(err)),
            };
            match catch_unwind(AssertUnwindSafe(|| p(&e))) {
                Ok(Ok(true)) => Some(Ok(e)),
                Ok(Ok(false)) => None,
                Ok(Err(err)) => Some(Err(err.placed("filter", i, e.origin.as_ref()))),
                Err(payload) => Some(Err(DatasetError::Panicked {
                    op: "filter",
                    index: i,
                    message: panic_message(payload.as_ref()),
                }
                .placed("filter", i, e.origin.as_ref()))),
            }
        });
        fast_forward(Box::new(iter), start)
    }
}
