//! Host-side infeed and outfeed: bounded per-replica infeed queues filled ahead of the device
//! by one infeed thread, and an outfeed channel drained by one outfeed thread.
//!
//! [`HostFeed`] is what a replica sees of the host (the interpreter reaches it through its
//! replica link, compiled programs through `jit::host::infeed_outfeed`); [`HostQueues`] implements it.
//! Every way a run can stop is an error, never a hang:
//! - a replica reading a closed, empty queue gets "infeed closed" with the reason;
//! - a replica that fails aborts the queues: replicas blocked on an infeed and the infeed
//!   thread blocked on a full queue wake up and stop.

use crate::replicas::{is_stop_message, stopped_message};
use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Condvar, Mutex};
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
pub struct AbortFeedOnDrop<'f> {
    feed: Option<&'f dyn HostFeed>,
    replica: usize,
}

impl<'f> AbortFeedOnDrop<'f> {
    pub fn new(feed: Option<&'f dyn HostFeed>, replica: usize) -> Self {
        AbortFeedOnDrop { feed, replica }
    }

    /// The replica finished: nothing to abort.
    pub fn disarm(mut self) {
        self.feed = None;
    }

    /// The replica failed with `message` (a replica that only stopped because another one
    /// failed leaves the abort to that one).
    pub fn fail(mut self, message: &str) {
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
pub type FeedItem = Result<Literal, String>;

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
    pub fn push(&self, replica: usize, value: Literal) -> Result<(), String> {
        let mut s = self.lock();
        loop {
            if let Some((r, m)) = &s.aborted {
                return Err(stopped_message(*r, m));
            }
            if s.finished {
                return Err("the run is over".into());
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
pub fn drain_outfeed(rx: Receiver<(usize, Literal)>, replicas: usize) -> Vec<Vec<Literal>> {
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
pub fn stacked_source(stacked: Vec<Array>) -> Result<FeedSource, String> {
    let k = stacked
        .first()
        .map(|a| a.shape.dims.first().copied().unwrap_or(0))
        .unwrap_or(0);
    let mut columns = Vec::with_capacity(stacked.len());
    for (i, a) in stacked.iter().enumerate() {
        if a.shape.dims.first() != Some(&k) {
            return Err(format!(
                "fed array {i} is {:?}, but the others are stacked {k} deep",
                a.shape.dims
            ));
        }
        columns.push(unstack(a)?.into_iter());
    }
    let iter = (0..k as usize).map(move |_| {
        columns
            .iter_mut()
            .map(|c| c.next().map(Literal::Array))
            .collect::<Option<Vec<_>>>()
            .map(Literal::Tuple)
            .ok_or_else(|| "a fed array ran out of slices".to_string())
    });
    Ok(Box::new(iter))
}

/// Splits an array along its leading axis.
pub fn unstack(a: &Array) -> Result<Vec<Array>, String> {
    let Some((&k, rest)) = a.shape.dims.split_first() else {
        return Err("a scalar cannot be split along a leading axis".into());
    };
    let shape = ArrayShape::new(a.shape.element_type, rest);
    let step = if k == 0 { 0 } else { a.data.len() / k as usize };
    Ok((0..k as usize)
        .map(|j| Array::new(shape.clone(), slice_data(&a.data, j * step, step)))
        .collect())
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
pub fn stack(parts: &[Array]) -> Result<Array, String> {
    let first = parts.first().ok_or("nothing to stack")?;
    let mut bytes = Vec::new();
    for p in parts {
        if p.shape != first.shape {
            return Err(format!(
                "per-iteration values change shape: {:?} then {:?}",
                first.shape.dims, p.shape.dims
            ));
        }
        bytes.extend(p.data.to_le_bytes());
    }
    let mut dims = vec![parts.len() as i64];
    dims.extend(first.shape.dims.iter().copied());
    let ty = first.shape.element_type;
    ArrayData::from_le_bytes(ty, &bytes)
        .map(|d| Array::new(ArrayShape::new(ty, &dims), d))
        .ok_or_else(|| "stacking per-iteration values".to_string())
}
