//! `cache()`: the first complete pass over the input is kept in memory and every later pass
//! (each epoch under `repeat`) is served from it, without reading the input again. A pass that
//! fails or is dropped before the end caches nothing, so a later pass reads the input again.
//!
//! Every pass gives the elements of the cached pass: the input is always opened with the same
//! key (the top-level pass's, 0), so a shuffle below a cache is shuffled once, as in tf.data.
//! Which pass fills the cache (a prefetch thread reading ahead, a `take` stopping early) then
//! changes only the speed, never the elements.

use super::node::{Cardinality, ElementIter, ElementResult, Node};
use super::Dataset;
use crate::input::{Element, ElementSpec};
use std::sync::{Arc, Mutex};

/// The key every pass opens the input with (see the module doc).
const CACHED_PASS_KEY: u64 = 0;

type Cached = Arc<Mutex<Option<Arc<Vec<Element>>>>>;

pub(crate) struct Cache {
    input: Dataset,
    cached: Cached,
}

impl Cache {
    pub(super) fn new(input: Dataset) -> Self {
        Cache {
            input,
            cached: Arc::new(Mutex::new(None)),
        }
    }
}

impl Node for Cache {
    fn spec(&self) -> &ElementSpec {
        self.input.element_spec()
    }

    fn cardinality(&self) -> Cardinality {
        match self
            .cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            Some(v) => Cardinality::Finite(v.len() as u64),
            None => self.input.cardinality(),
        }
    }

    fn open(&self, _key: u64, start: u64) -> ElementIter {
        let key = CACHED_PASS_KEY;
        let cached = self
            .cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(elements) = cached {
            let n = elements.len();
            let mut i = (start as usize).min(n);
            return Box::new(std::iter::from_fn(move || {
                let e = elements.get(i)?.clone();
                i += 1;
                Some(Ok(e))
            }));
        }
        if start > 0 {
            // A resumed pass starting mid-way cannot fill the cache; the input is pure, so
            // this pass reads it from `start` and the next full pass fills the cache.
            return self.input.node.open(key, start);
        }
        Box::new(Filling {
            input: self.input.node.open(key, 0),
            kept: Some(Vec::new()),
            cached: self.cached.clone(),
        })
    }
}

struct Filling {
    input: ElementIter,
    /// The elements of this pass so far; `None` once an error spoiled it.
    kept: Option<Vec<Element>>,
    cached: Cached,
}

impl Iterator for Filling {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        match self.input.next() {
            Some(Ok(e)) => {
                if let Some(kept) = &mut self.kept {
                    kept.push(e.clone());
                }
                Some(Ok(e))
            }
            Some(Err(e)) => {
                self.kept = None;
                Some(Err(e))
            }
            None => {
                if let Some(kept) = self.kept.take() {
                    let mut slot = self.cached.lock().unwrap_or_else(|p| p.into_inner());
                    slot.get_or_insert_with(|| Arc::new(kept));
                }
                None
            }
        }
    }
}
