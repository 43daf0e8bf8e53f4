//! The corpus modules that fail today, each with why and the error (or mismatch) it must
//! still give. Fixing one makes its check fail until its entry here is removed.

use crate::runs::Mode;

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

/// Every module of the corpus passes today; an entry here (with `modes: &crate::runs::MODES` for all
/// modes) records a failure that must keep its error until fixed.
pub const KNOWN: &[Known] = &[];

/// The known failure of `name` under `check`, if it has one.
pub fn failure(name: &str, check: Check) -> Option<&'static Known> {
    KNOWN
        .iter()
        .find(|k| k.name == name && k.grad == check.grad && k.modes.contains(&check.mode))
}
