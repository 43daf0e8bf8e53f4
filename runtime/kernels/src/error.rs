//! Why a routine cannot be planned.

/// Why a routine cannot be planned for a geometry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The geometry is valid, but this routine does not handle it (another one may).
    #[error("{routine} does not take this geometry: {reason}")]
    Declined {
        routine: &'static str,
        reason: &'static str,
    },
    /// No routine of this crate computes it.
    #[error("{0}")]
    Unsupported(String),
    /// The sizes contradict each other.
    #[error("{0}")]
    Invalid(String),
}

impl KernelError {
    pub(crate) fn declined(routine: &'static str, reason: &'static str) -> KernelError {
        KernelError::Declined { routine, reason }
    }
}
