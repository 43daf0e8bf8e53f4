//! The corpus modules that fail today, each with why and the error (or mismatch) it must
//! still give. Fixing one makes its check fail until its entry here is removed.

use crate::runs::{Mode, MODES};

/// One way of checking a module: forward against JAX's outputs, or its gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    pub mode: Mode,
    pub grad: bool,
}

impl Check {
    pub fn forward(mode: Mode) -> Check {
        Check { mode, grad: false }
    }

    pub fn grad(mode: Mode) -> Check {
        Check { mode, grad: true }
    }
}

pub struct Known {
    pub name: &'static str,
    /// The modes it fails in (forward checks unless `grad`).
    pub modes: &'static [Mode],
    pub grad: bool,
    /// A part of the error (or of the mismatch) it must give.
    pub error: &'static str,
    pub reason: &'static str,
}

const ALL: &[Mode] = &MODES;

pub const KNOWN: &[Known] = &[
    Known {
        name: "embedding_lookup",
        modes: ALL,
        grad: false,
        error: "`gather` is not supported",
        reason: "gather is not in tessel's IR",
    },
    Known {
        name: "embedding_gradient",
        modes: ALL,
        grad: false,
        error: "`gather` is not supported",
        reason: "gather (and scatter) are not in tessel's IR",
    },
];

/// The known failure of `name` under `check`, if it has one.
pub fn failure(name: &str, check: Check) -> Option<&'static Known> {
    KNOWN
        .iter()
        .find(|k| k.name == name && k.grad == check.grad && k.modes.contains(&check.mode))
}
