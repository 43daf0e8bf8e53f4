//! Host-side infeed and outfeed: bounded per-replica infeed queues filled ahead of the device
//! by one infeed thread, and an outfeed channel drained by one outfeed thread.
//!
//! [`HostFeed`] is what a replica sees of the host (the interpreter reaches it through its
//! replica link, compiled programs through `jit::host::infeed_outfeed`); [`HostQueues`] implements it.
//! Every way a run can stop is an error, never a hang:
//! - a replica reading a closed, empty queue gets "infeed closed" with the reason;
//! - a replica that fails aborts the queues: replicas blocked on an infeed and the infeed
//!   thread blocked on a full queue wake up and stop.

use crate::stop_message::{is_stop_message, stopped_message};
use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, Literal, Shape};

/// Host-side queues for infeed and outfeed, shared by the replicas of one run.
pub trait HostFeed: Sync {
    /// The next infeed value for `replica`; `shape` is what the infeed instruction reads.
    /// Blocks until the host has a value. An error (a closed queue, an aborted run) fails
    /// the replica with that message.
    fn infeed(&self, replica: usize, shape: &Shape) -> Result<Literal, String>;

    /// Takes one outfeed value from `replica`.
    fn outfeed(&self, replica: usize, value: Literal) -> Result<(), String>;

    /// `replica` failed with `message`: wake every replica (and host thread) waiting on the
    /// feed; later `infeed` calls should fail with [`stopped_message`].
    fn abort(&self, replica: usize, message: &str);
}

/// Aborts the feed for `replica` when dropped armed: a replica thread that ends without a
/// result (a panic) must still wake the replicas and host threads waiting on the feed.
pub(crate) struct AbortFeedOnDrop<'f> {
    feed: Option<&'f dyn HostFeed>,
    replica: usize,
}

impl<'f> AbortFeedOnDrop<'f> {
    pub(crate) fn new(feed: Option<&'f dyn HostFeed>, replica: usize) -> Self {
        AbortFeedOnDrop { feed, replica }
    }

    /// The replica finished: nothing to abort.
    pub(crate) fn disarm(mut self) {
        self.feed = None;
    }

    /// The replica failed with `message` (a replica that only stopped because another one
    /// failed leaves the abort to that one).
    pub(crate) fn fail(mut self, message: &str) {
        if let Some(feed) = self.feed.take() {
            if !is_stop_message(message) {
                feed.abort(self.replica, message);
            }
        }
    }
}

impl Drop for AbortFeedOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(feed) = self.feed {
            feed.abort(self.replica, "the replica's thread panicked");
        }
    }
}

/// One value for one replica's infeed (a tuple of the fed parameters' slices), or why the
/// host has no more.
pub type FeedItem = Result<Literal, FeedError>;

/// Why the host could not feed a value, or why arrays could not be split into or stacked
/// from per-iteration values.
#[derive(Clone, Debug, thiserror::Error)]
pub enum FeedError {
    /// The source's own error (a dataset's read or parse failure), whole: its message reaches
    /// the run's error unchanged. Shared (`Arc`) because every replica fed from one pipeline
    /// learns why it stopped.
    #[error(transparent)]
    Source(Arc<dyn std::error::Error + Send + Sync + 'static>),
    /// The source failed for a reason it gives as text.
    #[error("{0}")]
    Message(String),
    /// Arrays fed together are not stacked equally deep.
    #[error("fed array {index} is {dims:?}, but the others are stacked {depth} deep")]
    Ragged {
        index: usize,
        dims: Vec<i64>,
        depth: i64,
    },
    /// A scalar has no leading axis to split along.
    #[error("a scalar cannot be split along a leading axis")]
    Scalar,
    /// There were no values to stack.
    #[error("nothing to stack")]
    Empty,
    /// Per-iteration values to stack have different shapes.
    #[error("per-iteration values change shape: {first:?} then {other:?}")]
    ShapeChanged { first: Vec<i64>, other: Vec<i64> },
    /// Fed values' data does not fill their shape (stacking per-iteration values, or
    /// splitting a fed array along its leading axis).
    #[error("fed values: their data does not fill their shape {dims:?}")]
    Malformed { dims: Vec<i64> },
    /// A replica failed, so the run was aborted and nobody will read the value.
    #[error("{0}")]
    Aborted(String),
    /// The run is over: nobody will read the value.
    #[error("the run is over")]
    Finished,
}

impl FeedError {
    /// A source's error, kept whole (its message and its `source()` chain).
    pub fn source(error: impl std::error::Error + Send + Sync + 'static) -> FeedError {
        FeedError::Source(Arc::new(error))
    }

    /// A source's failure given as text.
    pub fn message(message: impl Into<String>) -> FeedError {
        FeedError::Message(message.into())
    }
}

/// Where one replica's infeed values come from, in order. `None` means the data ran out.
pub type FeedSource = Box<dyn Iterator<Item = FeedItem> + Send>;

struct Queue {
    items: VecDeque<Literal>,
    /// Why no more values will come, once the host has closed this queue.
    closed: Option<String>,
    delivered: u64,
}

struct State {
    queues: Vec<Queue>,
    /// The first replica failure: (replica, message).
    aborted: Option<(usize, String)>,
    /// The run is over: nothing more is read.
    finished: bool,
}

/// The per-replica infeed queues and the outfeed channel of one run.
pub struct HostQueues {
    depth: usize,
    state: Mutex<State>,
    changed: Condvar,
    outfeed: Mutex<Option<Sender<(usize, Literal)>>>,
}

impl HostQueues {
    /// Queues for `replicas` replicas holding at most `depth` prefetched values each, and the
    /// receiving end of the outfeed (`(replica, value)` in the order replicas sent them).
    pub fn new(replicas: usize, depth: usize) -> (HostQueues, Receiver<(usize, Literal)>) {
        let (tx, rx) = channel();
        let queues = (0..replicas)
            .map(|_| Queue {
                items: VecDeque::new(),
                closed: None,
                delivered: 0,
            })
            .collect();
        (
            HostQueues {
                depth: depth.max(1),
                state: Mutex::new(State {
                    queues,
                    aborted: None,
                    finished: false,
                }),
                changed: Condvar::new(),
                outfeed: Mutex::new(Some(tx)),
            },
            rx,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `value` to `replica`'s queue, waiting while it is full. Fails when the run was
    /// aborted (nobody will read it).
    pub fn push(&self, replica: usize, value: Literal) -> Result<(), FeedError> {
        let mut s = self.lock();
        loop {
            if let Some((r, m)) = &s.aborted {
                return Err(FeedError::Aborted(stopped_message(*r, m)));
            }
            if s.finished {
                return Err(FeedError::Finished);
            }
            let q = &mut s.queues[replica];
            if q.items.len() < self.depth {
                q.items.push_back(value);
                self.changed.notify_all();
                return Ok(());
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// No more values will come for `replica`; a read past the end fails with `reason`.
    pub fn close(&self, replica: usize, reason: impl Into<String>) {
        let mut s = self.lock();
        let q = &mut s.queues[replica];
        if q.closed.is_none() {
            q.closed = Some(reason.into());
        }
        self.changed.notify_all();
    }

    /// Ends the run: the infeed thread stops pushing and the outfeed channel closes, so the
    /// outfeed thread finishes once it has drained what was sent.
    pub fn finish(&self) {
        self.lock().finished = true;
        self.changed.notify_all();
        self.outfeed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    /// The first failure that aborted the run, if any.
    pub fn aborted(&self) -> Option<(usize, String)> {
        self.lock().aborted.clone()
    }
}

impl HostFeed for HostQueues {
    fn infeed(&self, replica: usize, _shape: &Shape) -> Result<Literal, String> {
        let mut s = self.lock();
        if replica >= s.queues.len() {
            return Err(format!(
                "replica {replica} has no infeed queue ({} replicas are fed)",
                s.queues.len()
            ));
        }
        loop {
            if let Some((r, m)) = &s.aborted {
                return Err(stopped_message(*r, m));
            }
            let q = &mut s.queues[replica];
            if let Some(v) = q.items.pop_front() {
                q.delivered += 1;
                self.changed.notify_all();
                return Ok(v);
            }
            if let Some(reason) = &q.closed {
                return Err(format!(
                    "infeed closed after {} values: {reason}",
                    q.delivered
                ));
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn outfeed(&self, replica: usize, value: Literal) -> Result<(), String> {
        let tx = self.outfeed.lock().unwrap_or_else(|p| p.into_inner());
        tx.as_ref()
            .ok_or_else(|| "the run is over; the outfeed is closed".to_string())?
            .send((replica, value))
            .map_err(|_| "the outfeed is no longer drained".to_string())
    }

    fn abort(&self, replica: usize, message: &str) {
        let mut s = self.lock();
        if s.aborted.is_none() {
            s.aborted = Some((replica, message.to_string()));
        }
        self.changed.notify_all();
    }
}

/// The infeed thread's work: feeds every replica one value per iteration, round-robin, for
/// `iterations` iterations (running ahead of the device by the queue depth). A source that
/// ends early or fails closes that replica's queue with the reason. Returns early when the
/// run is aborted.
pub fn fill_infeed(queues: &HostQueues, mut sources: Vec<FeedSource>, iterations: u64) {
    let mut open: Vec<bool> = vec![true; sources.len()];
    for k in 0..iterations {
        for (r, source) in sources.iter_mut().enumerate() {
            if !open[r] {
                continue;
            }
            let reason = match source.next() {
                Some(Ok(v)) => match queues.push(r, v) {
                    Ok(()) => continue,
                    Err(_) => return, // aborted: nobody reads any more
                },
                Some(Err(e)) => format!("the host's data for replica {r} failed at value {k}: {e}"),
                None => format!("the host's data for replica {r} ran out after {k} values"),
            };
            queues.close(r, reason);
            open[r] = false;
        }
    }
    for r in 0..sources.len() {
        queues.close(r, format!("all {iterations} values were fed"));
    }
}

/// The outfeed thread's work: receives every value until all senders are gone, grouped by
/// replica in arrival order.
pub(crate) fn drain_outfeed(rx: Receiver<(usize, Literal)>, replicas: usize) -> Vec<Vec<Literal>> {
    let mut out: Vec<Vec<Literal>> = vec![Vec::new(); replicas];
    for (r, v) in rx {
        if let Some(slot) = out.get_mut(r) {
            slot.push(v);
        }
    }
    out
}

/// A source that yields slice 0, 1, ..., K-1 (along the leading axis) of each array, as one
/// tuple per iteration. The slices are cut once, up front, and moved out one by one (the
/// infeed thread copies nothing more: on a small machine it shares the cores with the step).
pub fn stacked_source(stacked: Vec<Array>) -> Result<FeedSource, FeedError> {
    let k = stacked
        .first()
        .map(|a| a.shape.dims.first().copied().unwrap_or(0))
        .unwrap_or(0);
    let mut columns = Vec::with_capacity(stacked.len());
    for (i, a) in stacked.iter().enumerate() {
        if a.shape.dims.first() != Some(&k) {
            return Err(FeedError::Ragged {
                index: i,
                dims: a.shape.dims.to_vec(),
                depth: k,
            });
        }
        columns.push(unstack(a)?.into_iter());
    }
    let iter = (0..k as usize).map(move |_| {
        columns
            .iter_mut()
            .map(|c| c.next().map(Literal::Array))
            .collect::<Option<Vec<_>>>()
            .map(Literal::Tuple)
            .ok_or_else(|| FeedError::message("a fed array ran out of slices"))
    });
    Ok(Box::new(iter))
}

/// Splits an array along its leading axis. An array whose data does not fill its shape (its
/// fields are public, so a caller can build one) is an error, not a panic.
pub fn unstack(a: &Array) -> Result<Vec<Array>, FeedError> {
    let Some((&k, rest)) = a.shape.dims.split_first() else {
        return Err(FeedError::Scalar);
    };
    let malformed = || FeedError::Malformed {
        dims: a.shape.dims.to_vec(),
    };
    let k = usize::try_from(k).map_err(|_| malformed())?;
    if k > 0 && !a.data.len().is_multiple_of(k) {
        return Err(malformed());
    }
    let shape = ArrayShape::new(a.shape.element_type, rest);
    let step = a.data.len().checked_div(k).unwrap_or(0);
    (0..k)
        .map(|j| {
            Array::try_new(shape.clone(), slice_data(&a.data, j * step, step))
                .map_err(|_| malformed())
        })
        .collect()
}

/// Elements `start..start + len` of `data`, as data of the same type.
fn slice_data(data: &ArrayData, start: usize, len: usize) -> ArrayData {
    use ArrayData::*;
    let r = start..start + len;
    match data {
        Pred(v) => Pred(v[r].to_vec()),
        S8(v) => S8(v[r].to_vec()),
        U8(v) => U8(v[r].to_vec()),
        S16(v) => S16(v[r].to_vec()),
        U16(v) => U16(v[r].to_vec()),
        S32(v) => S32(v[r].to_vec()),
        U32(v) => U32(v[r].to_vec()),
        S64(v) => S64(v[r].to_vec()),
        U64(v) => U64(v[r].to_vec()),
        F16(v) => F16(v[r].to_vec()),
        BF16(v) => BF16(v[r].to_vec()),
        F32(v) => F32(v[r].to_vec()),
        F64(v) => F64(v[r].to_vec()),
    }
}

/// Stacks equal-shaped arrays on a new leading axis.
pub fn stack(parts: &[Array]) -> Result<Array, FeedError> {
    let first = parts.first().ok_or(FeedError::Empty)?;
    let mut bytes = Vec::new();
    for p in parts {
        if p.shape != first.shape {
            return Err(FeedError::ShapeChanged {
                first: first.shape.dims.to_vec(),
                other: p.shape.dims.to_vec(),
            });
        }
        bytes.extend(p.data.to_le_bytes());
    }
    let mut dims = vec![parts.len() as i64];
    dims.extend(first.shape.dims.iter().copied());
    let ty = first.shape.element_type;
    ArrayData::from_le_bytes(ty, &bytes)
        .and_then(|d| Array::try_new(ArrayShape::new(ty, &dims), d).ok())
        .ok_or_else(|| FeedError::Malformed {
            dims: first.shape.dims.to_vec(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::ir::ElementType;

    fn f32s(dims: &[i64], v: Vec<f32>) -> Array {
        Array::new(ArrayShape::new(ElementType::F32, dims), ArrayData::F32(v))
    }

    #[test]
    fn stack_and_unstack_round_trip() {
        let a = f32s(&[3, 2], vec![1., 2., 3., 4., 5., 6.]);
        let parts = unstack(&a).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[1], f32s(&[2], vec![3., 4.]));
        assert_eq!(stack(&parts).unwrap(), a);
    }

    #[test]
    fn bad_stacks_are_typed_errors_with_their_messages() {
        let e = stack(&[]).unwrap_err();
        assert!(matches!(e, FeedError::Empty));
        assert_eq!(e.to_string(), "nothing to stack");

        let e = stack(&[f32s(&[2], vec![1., 2.]), f32s(&[1], vec![3.])]).unwrap_err();
        assert!(matches!(e, FeedError::ShapeChanged { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "per-iteration values change shape: [2] then [1]"
        );

        let e = unstack(&f32s(&[], vec![1.])).unwrap_err();
        assert!(matches!(e, FeedError::Scalar));

        // Hand-built arrays whose data does not fill their shape are errors, not panics.
        let short = Array {
            shape: ArrayShape::new(ElementType::F32, &[3, 2]),
            data: ArrayData::F32(vec![1., 2., 3., 4., 5.]),
        };
        let e = unstack(&short).unwrap_err();
        assert_eq!(
            e.to_string(),
            "fed values: their data does not fill their shape [3, 2]"
        );
        let long = Array {
            data: ArrayData::F32(vec![0.; 9]),
            ..short.clone()
        };
        assert!(matches!(unstack(&long), Err(FeedError::Malformed { .. })));
        let negative = Array {
            shape: ArrayShape::new(ElementType::F32, &[-1, 0]),
            data: ArrayData::F32(vec![]),
        };
        assert!(matches!(
            unstack(&negative),
            Err(FeedError::Malformed { .. })
        ));
        let mistyped = Array {
            data: ArrayData::S32(vec![0; 6]),
            ..short.clone()
        };
        assert!(matches!(
            unstack(&mistyped),
            Err(FeedError::Malformed { .. })
        ));
        let e = stack(&[short.clone(), short]).unwrap_err();
        assert!(matches!(e, FeedError::Malformed { .. }), "{e:?}");

        let e = stacked_source(vec![f32s(&[2], vec![1., 2.]), f32s(&[3], vec![1., 2., 3.])])
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "fed array 1 is [3], but the others are stacked 2 deep"
        );
    }

    #[test]
    fn a_source_error_keeps_its_message_and_its_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("file a.tfrecord, record 3 at offset 120: corrupt length")]
        struct Corrupt(#[source] std::io::Error);
        let e = FeedError::source(Corrupt(std::io::Error::other("crc mismatch")));
        assert_eq!(
            e.to_string(),
            "file a.tfrecord, record 3 at offset 120: corrupt length"
        );
        let Some(inner) = std::error::Error::source(&e) else {
            panic!("the source's chain is lost")
        };
        assert_eq!(inner.to_string(), "crc mismatch");
    }

    #[test]
    fn pushing_after_the_run_is_over_or_aborted_fails() {
        let (q, _rx) = HostQueues::new(1, 1);
        q.finish();
        assert!(matches!(
            q.push(0, Literal::Tuple(vec![])),
            Err(FeedError::Finished)
        ));
        let (q, _rx) = HostQueues::new(2, 1);
        q.abort(1, "boom");
        let e = q.push(0, Literal::Tuple(vec![])).unwrap_err();
        assert!(matches!(e, FeedError::Aborted(_)), "{e:?}");
        assert!(e.to_string().contains("boom"), "{e}");
    }
}
