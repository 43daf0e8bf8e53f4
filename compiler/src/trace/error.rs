//! Errors found while tracing: every bad op of a model function, with the user's source line.

use crate::ir::SourceLocation;
use std::fmt;

/// One op that could not be traced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceIssue {
    /// The tracing API's name of the op: `matmul`, `add`, `reshape`, ...
    pub op: String,
    /// What is wrong, naming every shape involved.
    pub message: String,
    /// Where the model function called the op.
    pub location: SourceLocation,
    /// The name scope the op was in (`""` at top level).
    pub scope: String,
}

impl fmt::Display for TraceIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error: {}: {}", self.op, self.message)?;
        write!(f, "  --> {}", self.location)?;
        if !self.scope.is_empty() {
            write!(f, " (in scope `{}`)", self.scope)?;
        }
        Ok(())
    }
}

/// Tracing failed: the issues in the order the model function made them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub module: String,
    pub issues: Vec<TraceIssue>,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.issues.len();
        writeln!(
            f,
            "tracing `{}` failed with {n} error{}:",
            self.module,
            if n == 1 { "" } else { "s" }
        )?;
        for issue in &self.issues {
            writeln!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl std::error::Error for TraceError {}
