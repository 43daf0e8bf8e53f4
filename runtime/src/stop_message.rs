//! The message a replica reports when it stops only because another one failed first. The
//! replicas write it and the host feed reads it, so it sits below both: the feed needs
//! nothing of the replicas (which drive the feed).

/// What every message of a replica that only stopped because another one failed starts with.
pub(crate) const POISON_PREFIX: &str = "stopped because replica ";

/// The error a replica reports when it stops because `failed` failed first with `message`.
/// Runs report the original failure rather than these.
pub(crate) fn stopped_message(failed: usize, message: &str) -> String {
    format!("{POISON_PREFIX}{failed} failed: {message}")
}

/// Whether a message only says that another replica failed first (see [`stopped_message`]);
/// the message may carry a prefix naming where it surfaced.
pub(crate) fn is_stop_message(message: &str) -> bool {
    message.starts_with(POISON_PREFIX) || message.contains(&format!(": {POISON_PREFIX}"))
}
