//! How one replica's failure stops the others: the "stopped because replica R failed" message
//! every other replica reports, and the guard that poisons the run's rendezvous when a replica
//! thread ends without a result.

use super::rendezvous::Hub;
use crate::stop_message::{is_stop_message, stopped_message, POISON_PREFIX};
use std::cell::Cell;

/// Poisons the hub when a replica's thread ends without disarming it (an error or a panic).
pub(crate) struct PoisonOnDrop<'h> {
    hub: &'h Hub,
    replica: usize,
    armed: Cell<bool>,
}

impl<'h> PoisonOnDrop<'h> {
    pub(crate) fn new(hub: &'h Hub, replica: usize) -> Self {
        PoisonOnDrop {
            hub,
            replica,
            armed: Cell::new(true),
        }
    }

    /// The replica finished: nothing to stop.
    pub(crate) fn disarm(self) {
        self.armed.set(false);
    }

    /// The replica failed with `message`: stop the others, unless it only stopped because
    /// another replica failed first.
    pub(crate) fn fail(self, message: &str) {
        if !is_stop_message(message) {
            self.hub.poison(stopped_message(self.replica, message));
        }
        self.armed.set(false);
    }
}

impl Drop for PoisonOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed.get() {
            self.hub
                .poison(format!("{POISON_PREFIX}{} panicked", self.replica));
        }
    }
}
