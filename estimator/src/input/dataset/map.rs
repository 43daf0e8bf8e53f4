//! `map(f, num_parallel_calls)`: applies `f` to each element, on the caller's thread or on N
//! worker threads. Output order is input order whatever the number of workers (results are
//! put back in sequence), so runs are reproducible. A panic in `f` becomes an error.
//!
//! The dataset ops on named components (`parse_example`, `decode_raw`, `cast`, ...) are maps
//! too, under their own names. An output keeps its input's origin (the record it came from)
//! unless `f` sets another, and every error about an element names the op, the element's
//! index and that record.

use super::error::{panic_message, DatasetError};
use super::node::{Cardinality, ElementIter, ElementResult, Node};
use super::spec_check::check_element;
use super::Dataset;
use crate::input::{Element, ElementSpec};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A map function: an element in, an element out (or an error).
pub(crate) type MapFn = dyn Fn(Element) -> Result<Element, DatasetError> + Send + Sync;

pub(crate) struct Map {
    input: Dataset,
    f: Arc<MapFn>,
    spec: Arc<ElementSpec>,
    workers: usize,
    /// The name errors give: `map`, or the dataset op's (`decode_raw`, ...).
    op: &'static str,
}

impl Map {
    pub(super) fn new(
        input: Dataset,
        f: Arc<MapFn>,
        spec: ElementSpec,
        workers: usize,
        op: &'static str,
    ) -> Self {
        Map {
            input,
            f,
            spec: Arc::new(spec),
            workers,
            op,
        }
    }
}

/// What a worker needs to apply the map to one element.
struct Apply {
    f: Arc<MapFn>,
    spec: Arc<ElementSpec>,
    op: &'static str,
}

impl Apply {
    /// Runs `f` on element `index` (its position in this pass), catching a panic, and checks
    /// the result against the declared spec. Errors name the element's record.
    fn run(&self, index: u64, e: Element) -> ElementResult {
        let origin = e.origin.clone();
        let op = self.op;
        let out = catch_unwind(AssertUnwindSafe(|| (self.f)(e)))
            .map_err(|p| DatasetError::Panicked {
                op,
                index,
                message: panic_message(p.as_ref()),
            })
            .and_then(|r| r)
            .and_then(|mut out| {
                check_element(&self.spec, &out, op, index)?;
                if out.origin.is_none() {
                    out.origin.clone_from(&origin);
                }
                Ok(out)
            });
        out.map_err(|e| e.placed(op, index, origin.as_ref()))
    }
}

impl Node for Map {
    fn spec(&self) -> &ElementSpec {
        &self.spec
    }

    fn cardinality(&self) -> Cardinality {
        self.input.cardinality()
    }

    // `f` is pure, so element k of the output depends only on element k of the input: the
    // input jumps to `start` and `f` does not run on the skipped elements.
    fn open(&self, key: u64, start: u64) -> ElementIter {
        let input = self.input.node.open(key, start);
        let apply = Apply {
            f: self.f.clone(),
            spec: self.spec.clone(),
            op: self.op,
        };
        if self.workers <= 1 {
            let mut index = start;
            return Box::new(input.map(move |r| {
                let i = index;
                index += 1;
                apply.run(i, r?)
            }));
        }
        Box::new(ParallelMap::start(
            input,
            Arc::new(apply),
            self.workers,
            start,
        ))
    }
}

/// Elements sent to a worker at once: one channel round trip per chunk, not per element
/// (a small map such as the cast of an MNIST image takes about as long as a thread hand-off).
const CHUNK: usize = 16;

/// A chunk's sequence number, the pass index of its first element, and its elements.
type Job = (u64, u64, Vec<Element>);

/// The parallel map's iterator. The consumer pulls the input itself, in chunks, and keeps at
/// most `2 x workers` chunks in flight (bounded memory), sends them to the workers over one
/// shared channel, and puts what comes back in sequence order.
struct ParallelMap {
    input: ElementIter,
    input_done: bool,
    jobs: Option<Sender<Job>>,
    results: Receiver<(u64, Vec<ElementResult>)>,
    pending: BTreeMap<u64, Vec<ElementResult>>,
    /// The chunk being handed out, in order.
    ready: std::vec::IntoIter<ElementResult>,
    next_send: u64,
    next_out: u64,
    /// The pass index of the next input element.
    next_index: u64,
    max_in_flight: u64,
    workers: Vec<JoinHandle<()>>,
}

impl ParallelMap {
    fn start(input: ElementIter, apply: Arc<Apply>, workers: usize, start: u64) -> Self {
        let (jobs_tx, jobs_rx) = channel::<Job>();
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        let (results_tx, results) = channel();
        // A worker that cannot be started is left out; with none, the consumer reports that
        // the workers stopped (an error, not a panic).
        let handles = (0..workers)
            .filter_map(|_| {
                let (jobs, results, apply) = (jobs_rx.clone(), results_tx.clone(), apply.clone());
                let worker = std::thread::Builder::new().name("tessel-map".into());
                worker
                    .spawn(move || loop {
                        let job = jobs.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok((seq, first, elements)) = job else {
                            return;
                        };
                        let out = (first..)
                            .zip(elements)
                            .map(|(i, e)| apply.run(i, e))
                            .collect();
                        if results.send((seq, out)).is_err() {
                            return;
                        }
                    })
                    .ok()
            })
            .collect();
        ParallelMap {
            input,
            input_done: false,
            jobs: Some(jobs_tx),
            results,
            pending: BTreeMap::new(),
            ready: Vec::new().into_iter(),
            next_send: 0,
            next_out: 0,
            next_index: start,
            max_in_flight: 2 * workers as u64,
            workers: handles,
        }
    }

    /// Sends input chunks to the workers until enough are in flight.
    fn fill(&mut self) {
        while !self.input_done && self.next_send - self.next_out < self.max_in_flight {
            let first = self.next_index;
            let mut chunk = Vec::with_capacity(CHUNK);
            let mut error = None;
            while chunk.len() < CHUNK {
                match self.input.next() {
                    None => {
                        self.input_done = true;
                        break;
                    }
                    Some(Err(e)) => {
                        self.input_done = true;
                        error = Some(e);
                        break;
                    }
                    Some(Ok(e)) => chunk.push(e),
                }
            }
            self.next_index += chunk.len() as u64;
            if !chunk.is_empty() {
                let seq = self.next_send;
                self.next_send += 1;
                let sent = self
                    .jobs
                    .as_ref()
                    .is_some_and(|j| j.send((seq, first, chunk)).is_ok());
                if !sent {
                    self.pending.insert(seq, vec![Err(workers_gone(first))]);
                }
            }
            if let Some(e) = error {
                // An input error takes its place in the order; nothing after it is read.
                self.pending.insert(self.next_send, vec![Err(e)]);
                self.next_send += 1;
            }
        }
    }
}

fn workers_gone(index: u64) -> DatasetError {
    DatasetError::Panicked {
        op: "map",
        index,
        message: "the map's worker threads stopped".into(),
    }
}

impl Iterator for ParallelMap {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        loop {
            if let Some(r) = self.ready.next() {
                return Some(r);
            }
            self.fill();
            if self.next_out == self.next_send {
                return None;
            }
            let chunk = loop {
                if let Some(c) = self.pending.remove(&self.next_out) {
                    break c;
                }
                match self.results.recv() {
                    Ok((seq, c)) => {
                        self.pending.insert(seq, c);
                    }
                    // Workers catch panics, so this is only reached if every worker is gone.
                    Err(_) => break vec![Err(workers_gone(self.next_index))],
                }
            };
            self.next_out += 1;
            self.ready = chunk.into_iter();
            self.fill();
        }
    }
}

impl Drop for ParallelMap {
    fn drop(&mut self) {
        // Closing the job channel ends the workers once they finish the chunk at hand.
        self.jobs.take();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
