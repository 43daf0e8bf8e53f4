//! The IR verifier: checks that a module is well formed. It runs after parsing, after tracing
//! and after every pass, so it is linear in the module's size and reports every problem it
//! finds, each with its computation, instruction and source location.
//!
//! What it checks:
//! - structure ([`structure`]): every computation has a root that exists; operands exist;
//!   no cycles; parameters numbered 0..n-1 without gaps or duplicates;
//! - names ([`names`]): computation names and instruction names unique in the module;
//! - calls ([`calls`]): called computations exist; the call graph has no cycle (no recursion);
//! - shapes ([`shapes`]): every instruction's recorded shape is what
//!   [`crate::shape_inference::check_given_shape`] accepts, which also checks the signatures
//!   of called computations (reducers, loop condition and body, branches, call and fusion
//!   parameters).

mod calls;
mod names;
mod shapes;
mod structure;

use crate::ir::{ComputationId, InstrId, Module, SourceLocation};
use std::fmt;

/// One problem found in a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub computation: String,
    pub instruction: Option<String>,
    pub message: String,
    pub location: Option<SourceLocation>,
}

impl fmt::Display for VerifyError {
    /// `in computation C, instruction I (file:line): message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in computation {}", self.computation)?;
        if let Some(i) = &self.instruction {
            write!(f, ", instruction {i}")?;
        }
        if let Some(l) = &self.location {
            write!(f, " ({}:{})", l.file, l.line)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for VerifyError {}

/// Several problems as one message, `; `-separated (for errors that carry one line of text).
pub fn join(errors: &[VerifyError]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Checks the whole module; returns every problem found, not just the first.
pub fn verify(module: &Module) -> Result<(), Vec<VerifyError>> {
    let mut report = Report {
        module,
        errors: Vec::new(),
    };
    if module.entry.0 as usize >= module.computations.len() {
        report.errors.push(VerifyError {
            computation: module.name.clone(),
            instruction: None,
            message: format!(
                "the entry is {}, but the module has only {} computations",
                module.entry,
                module.computations.len()
            ),
            location: None,
        });
    }
    names::check(&mut report);
    let bad_calls = calls::check(&mut report);
    for id in module.computation_ids() {
        structure::check(&mut report, id);
        shapes::check(&mut report, id, &bad_calls);
    }
    if report.errors.is_empty() {
        Ok(())
    } else {
        Err(report.errors)
    }
}

/// Collects errors with their context.
pub(crate) struct Report<'m> {
    pub module: &'m Module,
    pub errors: Vec<VerifyError>,
}

impl Report<'_> {
    /// An error about a computation as a whole.
    pub(crate) fn computation(&mut self, comp: ComputationId, message: String) {
        self.errors.push(VerifyError {
            computation: self.module.computation(comp).name.clone(),
            instruction: None,
            message,
            location: None,
        });
    }

    /// An error about one instruction, located at its source line (the user's line from the
    /// metadata, else the HLO text line it was parsed from).
    pub(crate) fn instruction(&mut self, comp: ComputationId, id: InstrId, message: String) {
        let c = self.module.computation(comp);
        let instr = c.get(id);
        let location = self.module.source_location(instr).or_else(|| {
            let file = self.module.source_file.clone()?;
            instr.text_line.map(|line| SourceLocation {
                file,
                line,
                column: 0,
            })
        });
        self.errors.push(VerifyError {
            computation: c.name.clone(),
            instruction: Some(instr.name.clone()),
            message,
            location,
        });
    }
}

#[cfg(test)]
mod tests;
