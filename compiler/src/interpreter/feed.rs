//! The host side of `infeed` and `outfeed` as the interpreter sees it.
//!
//! A run with a feed gives every replica's evaluator the same [`HostFeed`]: `infeed` asks it
//! for replica r's next value (blocking until the host has one), `outfeed` hands it a value.
//! When a replica fails, the evaluator calls [`HostFeed::abort`] so that replicas blocked on
//! the feed wake up and stop instead of waiting for data that will never be consumed.

use super::collectives::POISON_PREFIX;
use super::{err, EvalResult};
use crate::ir::{Literal, Shape};

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

/// The error a replica reports when it stops because `failed` failed first. Runs report the
/// original failure rather than these.
pub fn stopped_message(failed: usize, message: &str) -> String {
    format!("{POISON_PREFIX}{failed} failed: {message}")
}

pub(crate) fn infeed(
    feed: Option<&dyn HostFeed>,
    replica: usize,
    shape: &Shape,
) -> EvalResult<Literal> {
    let Some(feed) = feed else {
        return err("infeed needs a host feed: run the module with one (evaluate_with_feed)");
    };
    let data_shape = match shape.as_tuple() {
        Some([data, Shape::Token]) => data,
        _ => {
            return err(format!(
                "infeed must give (data, token[]), the instruction says {}",
                shape.to_text(false)
            ))
        }
    };
    let value = feed
        .infeed(replica, data_shape)
        .map_err(super::EvalError::new)?;
    if !super::shapes_match(&value.shape(), data_shape) {
        return err(format!(
            "the host fed {} to an infeed of {}",
            value.shape().to_text(false),
            data_shape.to_text(false)
        ));
    }
    Ok(Literal::Tuple(vec![value, Literal::Token]))
}

pub(crate) fn outfeed(
    feed: Option<&dyn HostFeed>,
    replica: usize,
    value: &Literal,
) -> EvalResult<Literal> {
    let Some(feed) = feed else {
        return err("outfeed needs a host feed: run the module with one (evaluate_with_feed)");
    };
    feed.outfeed(replica, value.clone())
        .map_err(super::EvalError::new)?;
    Ok(Literal::Token)
}

/// Aborts the feed when a replica's thread ends without disarming it (an error or a panic).
pub(crate) struct AbortOnDrop<'f> {
    feed: Option<&'f dyn HostFeed>,
    replica: usize,
    armed: bool,
}

impl<'f> AbortOnDrop<'f> {
    pub(crate) fn new(feed: Option<&'f dyn HostFeed>, replica: usize) -> Self {
        AbortOnDrop {
            feed,
            replica,
            armed: true,
        }
    }

    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    pub(crate) fn abort_with(mut self, e: &super::EvalError) {
        self.armed = false;
        if let Some(feed) = self.feed {
            // The feed names the replica itself.
            let mut e = e.clone();
            e.replica = None;
            feed.abort(self.replica, &e.to_string());
        }
    }
}

impl Drop for AbortOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Some(feed) = self.feed {
                feed.abort(self.replica, "the replica's thread panicked");
            }
        }
    }
}
