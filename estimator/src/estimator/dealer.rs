//! Dealing one host's batches to the shards, in a fixed order.
//!
//! With `per_host_input_for_training`, one input pipeline feeds every shard: batch `j` of the
//! host goes to shard `j % N`. The runtime's infeed thread asks the shards' sources for their
//! next value round-robin (shard 0, 1, ..., N-1 for iteration 0, then again), so a source that
//! pulls from one shared iterator under a lock receives exactly that batch, whatever the
//! threads' timing: runs are reproducible. The dealer also counts the batches handed out, which
//! is the input pipeline's position saved in checkpoints.

use std::sync::{Arc, Mutex};
use tessel_compiler::ir::{Array, Literal};
use tessel_runtime::feed::{FeedError, FeedItem, FeedSource};

/// One per-shard batch: the fed parameters' values, in parameter order.
pub(super) type Batch = Vec<Array>;
/// The batches of one input pipeline, as the estimator's feeding sees them.
pub(crate) type BatchIter = Box<dyn Iterator<Item = Result<Batch, FeedError>> + Send>;

struct Shared {
    batches: BatchIter,
    /// Batches handed out so far (over every loop of this dealer).
    dealt: u64,
    /// Set once the iterator ended, so later sources report the end at once.
    exhausted: bool,
    /// The input's own failure (the batch it failed at, counted like `dealt`, and why), kept
    /// so the caller can report it as the input_fn's error rather than as the infeed's.
    failure: Option<(u64, String)>,
}

/// Shares one batch iterator among the shards' infeed sources.
#[derive(Clone)]
pub(crate) struct Dealer {
    shared: Arc<Mutex<Shared>>,
}

impl Dealer {
    pub(super) fn new(batches: BatchIter) -> Dealer {
        Dealer {
            shared: Arc::new(Mutex::new(Shared {
                batches,
                dealt: 0,
                exhausted: false,
                failure: None,
            })),
        }
    }

    /// Batches handed out so far.
    pub(super) fn dealt(&self) -> u64 {
        self.lock().dealt
    }

    /// The input's failure, if it failed: the number of batches dealt before it, and why.
    pub(super) fn failure(&self) -> Option<(u64, String)> {
        self.lock().failure.clone()
    }

    /// One infeed source per shard for a loop of `iterations`: together they take the next
    /// `iterations * shards` batches. Each yields a tuple of its batch's arrays.
    pub(super) fn sources(&self, shards: usize, iterations: u64) -> Vec<FeedSource> {
        (0..shards)
            .map(|_| {
                let dealer = self.clone();
                let source = (0..iterations).map(move |_| dealer.next_batch());
                Box::new(source) as FeedSource
            })
            .collect()
    }

    fn next_batch(&self) -> FeedItem {
        let mut shared = self.lock();
        if shared.exhausted {
            return Err(input_ended(shared.dealt));
        }
        match shared.batches.next() {
            Some(Ok(batch)) => {
                shared.dealt += 1;
                Ok(Literal::Tuple(
                    batch.into_iter().map(Literal::Array).collect(),
                ))
            }
            Some(Err(e)) => {
                shared.exhausted = true;
                shared.failure = Some((shared.dealt, e.to_string()));
                Err(e)
            }
            None => {
                shared.exhausted = true;
                let e = input_ended(shared.dealt);
                shared.failure = Some((shared.dealt, e.to_string()));
                Err(e)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves counts that are still right: recover them.
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn input_ended(dealt: u64) -> FeedError {
    FeedError::message(format!("the input_fn's dataset ended after {dealt} batches (use repeat() to train for more steps than one pass gives)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::ir::{ArrayData, ArrayShape, ElementType};

    fn batch(i: i32) -> Batch {
        vec![Array::new(
            ArrayShape::new(ElementType::S32, &[]),
            ArrayData::S32(vec![i]),
        )]
    }

    fn value(l: Literal) -> i32 {
        match l {
            Literal::Tuple(mut v) => match v.remove(0) {
                Literal::Array(a) => a.data.get_f64(0) as i32,
                _ => unreachable!(),
            },
            _ => unreachable!(),
        }
    }

    #[test]
    fn deals_round_robin_and_counts() {
        let dealer = Dealer::new(Box::new((0..100).map(|i| Ok(batch(i)))));
        let mut sources = dealer.sources(2, 3);
        let mut got = vec![vec![]; 2];
        for _ in 0..3 {
            for (r, s) in sources.iter_mut().enumerate() {
                got[r].push(value(s.next().unwrap().unwrap()));
            }
        }
        assert_eq!(got, vec![vec![0, 2, 4], vec![1, 3, 5]]);
        assert_eq!(dealer.dealt(), 6);
        assert!(sources[0].next().is_none());
        let mut next = dealer.sources(1, 1);
        assert_eq!(value(next[0].next().unwrap().unwrap()), 6);
    }

    #[test]
    fn a_failing_input_is_remembered_with_its_batch() {
        let dealer = Dealer::new(Box::new((0..5).map(|i| {
            if i == 3 {
                Err(FeedError::message("bad record"))
            } else {
                Ok(batch(i))
            }
        })));
        let mut s = dealer.sources(1, 5).remove(0);
        for _ in 0..3 {
            assert!(s.next().unwrap().is_ok());
        }
        assert_eq!(s.next().unwrap().unwrap_err().to_string(), "bad record");
        assert_eq!(dealer.failure(), Some((3, "bad record".to_string())));
    }

    #[test]
    fn end_of_input_is_an_error_naming_repeat() {
        let dealer = Dealer::new(Box::new((0..1).map(|i| Ok(batch(i)))));
        let mut s = dealer.sources(1, 3).remove(0);
        assert!(s.next().unwrap().is_ok());
        let e = s.next().unwrap().unwrap_err().to_string();
        assert!(
            e.contains("ended after 1 batches") && e.contains("repeat()"),
            "{e}"
        );
        assert_eq!(dealer.failure(), Some((1, e)));
    }
}
