//! `interleave` over a list of datasets (one per file): `cycle_length` of them are open at a
//! time, `block_length` elements are taken from each in turn. The order is tf.data's
//! deterministic `interleave` order: an exhausted input's slot is refilled with the next
//! unopened input when the cycle comes back to it, and the cycle moves on.

use super::error::DatasetError;
use super::node::{fast_forward, Cardinality, ElementIter, ElementResult, Node};
use super::Dataset;
use crate::input::ElementSpec;

pub(crate) struct Interleave {
    inputs: Vec<Dataset>,
    cycle_length: usize,
    block_length: usize,
    spec: ElementSpec,
}

impl Interleave {
    pub(super) fn new(
        inputs: Vec<Dataset>,
        cycle_length: usize,
        block_length: usize,
    ) -> Result<Self, DatasetError> {
        const OP: &str = "interleave";
        let first = inputs
            .first()
            .ok_or_else(|| DatasetError::invalid(OP, "no datasets to interleave"))?;
        if cycle_length == 0 || block_length == 0 {
            return Err(DatasetError::invalid(
                OP,
                "cycle_length and block_length must be at least 1",
            ));
        }
        let spec = first.element_spec().clone();
        if let Some(i) = inputs.iter().position(|d| *d.element_spec() != spec) {
            return Err(DatasetError::invalid(
                OP,
                format!(
                    "dataset {i} has element spec {:?}, dataset 0 has {spec:?}",
                    inputs[i].element_spec()
                ),
            ));
        }
        Ok(Interleave {
            inputs,
            cycle_length,
            block_length,
            spec,
        })
    }
}

impl Node for Interleave {
    fn spec(&self) -> &ElementSpec {
        &self.spec
    }

    fn cardinality(&self) -> Cardinality {
        let mut total = 0u64;
        for d in &self.inputs {
            match d.cardinality() {
                Cardinality::Finite(n) => total = total.saturating_add(n),
                other => return other,
            }
        }
        Cardinality::Finite(total)
    }

    fn open(&self, key: u64, start: u64) -> ElementIter {
        let iter = InterleaveIter {
            inputs: self.inputs.clone(),
            key,
            next_input: 0,
            slots: (0..self.cycle_length.min(self.inputs.len()))
                .map(|_| None)
                .collect(),
            open: 0,
            cycle_index: 0,
            block_index: 0,
            block_length: self.block_length,
        };
        fast_forward(Box::new(iter), start)
    }
}

struct InterleaveIter {
    inputs: Vec<Dataset>,
    key: u64,
    next_input: usize,
    slots: Vec<Option<ElementIter>>,
    open: usize,
    cycle_index: usize,
    block_index: usize,
    block_length: usize,
}

impl InterleaveIter {
    fn advance_cycle(&mut self) {
        self.block_index = 0;
        self.cycle_index = (self.cycle_index + 1) % self.slots.len();
    }
}

impl Iterator for InterleaveIter {
    type Item = ElementResult;

    fn next(&mut self) -> Option<ElementResult> {
        while self.next_input < self.inputs.len() || self.open > 0 {
            let c = self.cycle_index;
            if let Some(slot) = &mut self.slots[c] {
                if let Some(item) = slot.next() {
                    self.block_index += 1;
                    if self.block_index == self.block_length {
                        self.advance_cycle();
                    }
                    return Some(item);
                }
                self.slots[c] = None;
                self.open -= 1;
                self.advance_cycle();
            } else if self.next_input < self.inputs.len() {
                let d = &self.inputs[self.next_input];
                self.slots[c] = Some(d.node.open(self.key, 0));
                self.next_input += 1;
                self.open += 1;
            } else {
                self.advance_cycle();
            }
        }
        None
    }
}
