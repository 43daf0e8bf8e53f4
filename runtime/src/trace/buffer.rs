//! [`EventBuffer`]: a bounded, preallocated list of timed events that any thread appends to
//! without a lock or an allocation. A full buffer drops the event and counts it.
//!
//! Each slot is three atomics. A writer claims a slot with one `fetch_add`, stores the times,
//! then publishes the slot by storing its tag last (release); a reader takes only published
//! slots (acquire), so a slot still being written is never read half-done.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// One recorded event as the buffer holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawEvent {
    /// What ran: a number the buffer's owner gives meaning to (never 0).
    pub id: u32,
    /// A detail of the event (e.g. the replica a host batch was for).
    pub arg: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
}

struct Slot {
    start_ns: AtomicU64,
    duration_ns: AtomicU64,
    /// `id << 32 | arg`; 0 while the slot is unwritten.
    tag: AtomicU64,
}

pub(crate) struct EventBuffer {
    slots: Box<[Slot]>,
    claimed: AtomicUsize,
    dropped: AtomicU64,
}

impl EventBuffer {
    /// A buffer of `capacity` events, allocated now.
    pub(crate) fn new(capacity: usize) -> EventBuffer {
        let slots = (0..capacity)
            .map(|_| Slot {
                start_ns: AtomicU64::new(0),
                duration_ns: AtomicU64::new(0),
                tag: AtomicU64::new(0),
            })
            .collect();
        EventBuffer {
            slots,
            claimed: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Appends an event (`id` must not be 0); counts it as dropped when the buffer is full.
    #[inline]
    pub(crate) fn push(&self, id: u32, arg: u32, start_ns: u64, duration_ns: u64) {
        let i = self.claimed.fetch_add(1, Ordering::Relaxed);
        match self.slots.get(i) {
            Some(slot) => {
                slot.start_ns.store(start_ns, Ordering::Relaxed);
                slot.duration_ns.store(duration_ns, Ordering::Relaxed);
                slot.tag
                    .store(u64::from(id) << 32 | u64::from(arg), Ordering::Release);
            }
            None => {
                // Keep the claim count from wrapping on a very long recording.
                self.claimed.fetch_sub(1, Ordering::Relaxed);
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts an event that had no buffer to go to.
    pub(crate) fn push_dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// The published events in the order they were claimed, and the number dropped; the
    /// buffer is empty afterwards.
    pub(crate) fn take(&self) -> (Vec<RawEvent>, u64) {
        let n = self.claimed.load(Ordering::Acquire).min(self.slots.len());
        let mut events = Vec::with_capacity(n);
        for slot in &self.slots[..n] {
            let tag = slot.tag.swap(0, Ordering::Acquire);
            if tag == 0 {
                continue;
            }
            events.push(RawEvent {
                id: (tag >> 32) as u32,
                arg: tag as u32,
                start_ns: slot.start_ns.load(Ordering::Relaxed),
                duration_ns: slot.duration_ns.load(Ordering::Relaxed),
            });
        }
        self.claimed.store(0, Ordering::Release);
        (events, self.dropped.swap(0, Ordering::Relaxed))
    }

    /// Forgets every event and the dropped count.
    pub(crate) fn clear(&self) {
        let _ = self.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_buffer_drops_and_counts() {
        let b = EventBuffer::new(2);
        b.push(1, 0, 10, 5);
        b.push(2, 7, 20, 5);
        b.push(3, 0, 30, 5);
        b.push(4, 0, 40, 5);
        let (events, dropped) = b.take();
        assert_eq!(dropped, 2);
        assert_eq!(
            events,
            vec![
                RawEvent {
                    id: 1,
                    arg: 0,
                    start_ns: 10,
                    duration_ns: 5
                },
                RawEvent {
                    id: 2,
                    arg: 7,
                    start_ns: 20,
                    duration_ns: 5
                },
            ]
        );
        // Taken: empty, and room again.
        assert_eq!(b.take(), (vec![], 0));
        b.push(9, 0, 1, 1);
        assert_eq!(b.take().0.len(), 1);
    }

    #[test]
    fn concurrent_writers_lose_nothing_that_fits() {
        let b = EventBuffer::new(4000);
        std::thread::scope(|s| {
            for t in 0..4u32 {
                let b = &b;
                s.spawn(move || {
                    for i in 0..1000u64 {
                        b.push(t + 1, 0, i, 1);
                    }
                });
            }
        });
        let (events, dropped) = b.take();
        assert_eq!((events.len(), dropped), (4000, 0));
        for t in 1..=4 {
            assert_eq!(events.iter().filter(|e| e.id == t).count(), 1000);
        }
    }
}
