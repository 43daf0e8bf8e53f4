//! How one replica's failure stops the others: the "stopped because replica R failed" message
//! every other replica reports, and the guard that poisons the run's rendezvous when a replica
//! thread ends without a result.

use super::rendezvous::Hub;
use std::cell::Cell;

/// What every message of a replica that only stopped because another one failed starts with.
const POISON_PREFIX: &str = "stopped because replica ";

/// The error a replica reports when it stops because `failed` failed first with `message`.
/// Runs report the original failure rather than these.
pub fn stopped_message(failed: usize, message: &str) -> String {
    format!("{POISON_PREFIX}{failed} failed: {message}")
}

/// Whether a message only says that another replica failed first (see [`stopped_message`]);
/// the message may carry a prefix naming where it surfaced.
pub fn is_stop_message(message: &str) -> bool {
    message.starts_with(POISON_PREFIX) || message.contains(&format!(": {POISON_PREFIX}"))
}

/// Poisons the hub when a replica's thread ends without disarming it (an error or a panic).
pub struct PoisonOnDrop<'h> {
    hub: &'h Hub,
    replica: usize,
    armed: Cell<bool>,
}

impl<'h> PoisonOnDrop<'h> {
    pub fn new(hub: &'h Hub, replica: usize) -> Self {
        PoisonOnDrop {
            hub,
            replica,
            armed: Cell::new(true),
        }
    }

    /// The replica finished: nothing to stop.
    pub fn disarm(self) {
        self.armed.set(false);
    }

    /// The replica failed with `message`: stop the others, unless it only stopped because
    /// another replica failed first.
    pub fn fail(self, message: &str) {
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
