//! `prefetch(n)`: runs the input on a background thread, up to `n` elements ahead of the
//! consumer, so preparing the next batch overlaps with the device step. A panic on that thread
//! becomes an error. Dropping the iterator stops the thread (after the element it is making).

use super::error::{panic_message, DatasetError};
use super::node::{Cardinality, ElementIter, ElementResult, Node};
use super::Dataset;
use crate::input::ElementSpec;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

pub(crate) struct Prefetch {
    input: Dataset,
    depth: usize,
}

impl Prefetch {
    pub(super) fn new(input: Dataset, depth: usize) -> Self {
        Prefetch { input, depth }
    }
}

impl Node for Prefetch {
    fn spec(&self) -> &ElementSpec {
        self.input.element_spec()
    }

    fn cardinality(&self) -> Cardinality {
        self.input.cardinality()
    }

    fn open(&self, key: u64, start: u64) -> ElementIter {
        let (tx, rx) = sync_channel(self.depth.max(1));
        let node = self.input.node.clone();
        let thread = std::thread::Builder::new()
            .name("tessel-prefetch".into())
            .spawn(move || {
                let mut produced = start;
                let run = catch_unwind(AssertUnwindSafe(|| {
                    for item in node.open(key, start) {
                        produced += 1;
                        if tx.send(item).is_err() {
                            return; // the consumer is gone
                        }
                    }
                }));
                if let Err(p) = run {
                    let _ = tx.send(Err(DatasetError::Panicked {
                        op: "prefetch",
                        index: produced,
                        message: panic_message(p.as_ref()),
                    }));
                }
            });
        match thread {
            Ok(thread) => Box::new(PrefetchIter {
                rx: Some(rx),
                thread: Some(thread),
            }),
            Err(e) => super::node::failed(DatasetError::source("prefetch: starting its thread", e)),
        }
    }
}

struct PrefetchIter {
    rx: Option<Receiver<ElementResult>>,
    thread: Option<JoinHandle<()>>,
}

impl Iterator for PrefetchIter {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        self.rx.as_ref()?.recv().ok()
    }
}

impl Drop for PrefetchIter {
    fn drop(&mut self) {
        self.rx.take(); // the thread's next send fails and it ends
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
