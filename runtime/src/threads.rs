//! The runtime's thread budget: how many compute threads a run may keep busy at once, shared
//! by the replicas (and by intra-op parallelism such as a GEMM's workers).
//!
//! Policy:
//! - The budget is `TESSEL_THREADS` if set (a positive integer), else the machine's available
//!   parallelism.
//! - Every replica is one thread: in-process collectives need all members of a group alive
//!   at a rendezvous, so replicas are never queued behind each other. Waiting at a rendezvous
//!   or an infeed blocks (it does not spin), so N replicas on fewer cores time-share without
//!   burning cycles.
//! - Intra-op workers are what the budget limits: with N replicas, each replica may use
//!   `max(1, budget / N)` threads (itself included), so N replicas × workers never exceeds
//!   the budget when N ≤ budget, and each replica runs single-threaded when N > budget.
//! - The feed threads (one infeed, one outfeed per host) only move data and wait; they are
//!   not counted.
//! - The intra-op workers are the calling thread plus the kernels crate's helper threads
//!   (`tessel_kernels::parallel`), started on first use and spinning 2 ms after their last
//!   share before they sleep, so a step's parallel routines do not each pay a wake-up; on a
//!   core shared with another process they sleep at once. Routines cut their work into
//!   several shares per thread, claimed as threads become free, so a thread the host
//!   deschedules does not hold the others up, and a caller waiting for a helper sleeps.
//!
//! Where it is applied: the JIT's GEMM threads are fixed when a program is compiled
//! (`JitOptions::gemm_threads`), so whoever compiles a program for N replicas sets
//! `gemm_threads = budget.per_replica(N)` (`tessel run --backend jit --replicas N` does;
//! `gemm` runs single-threaded when that is 1). The interpreter has no intra-op threads.

use std::num::NonZeroUsize;

/// `TESSEL_THREADS` is set to something other than a positive integer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("TESSEL_THREADS must be a positive integer, got \"{value}\"")]
pub struct ThreadBudgetError {
    /// The variable's value as set.
    pub value: String,
}

/// The number of compute threads a run may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadBudget {
    total: NonZeroUsize,
}

impl ThreadBudget {
    /// A budget of `total` threads (at least one).
    pub fn new(total: usize) -> ThreadBudget {
        ThreadBudget {
            total: NonZeroUsize::new(total).unwrap_or(NonZeroUsize::MIN),
        }
    }

    /// `TESSEL_THREADS`, else the available parallelism, else one. A malformed variable is
    /// an error rather than silently ignored.
    pub fn from_env() -> Result<ThreadBudget, ThreadBudgetError> {
        match std::env::var("TESSEL_THREADS") {
            Ok(v) => Self::parse(&v),
            Err(_) => Ok(Self::new(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            )),
        }
    }

    fn parse(v: &str) -> Result<ThreadBudget, ThreadBudgetError> {
        match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(Self::new(n)),
            _ => Err(ThreadBudgetError {
                value: v.to_string(),
            }),
        }
    }

    pub fn total(&self) -> usize {
        self.total.get()
    }

    /// Threads each of `replicas` replicas may use for its own work (itself included).
    pub fn per_replica(&self, replicas: usize) -> usize {
        (self.total() / replicas.max(1)).max(1)
    }

    #[cfg(test)]
    /// Whether `replicas` replica threads alone already use the whole budget (then intra-op
    /// work runs inline on the replica's thread).
    pub(crate) fn replicas_saturate(&self, replicas: usize) -> bool {
        replicas >= self.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_never_exceed_the_budget_and_never_drop_to_zero() {
        for total in 1..=8 {
            let b = ThreadBudget::new(total);
            for n in 1..=10 {
                let each = b.per_replica(n);
                assert!(each >= 1);
                if n <= total {
                    assert!(n * each <= total, "{n} x {each} > {total}");
                } else {
                    assert_eq!(each, 1);
                    assert!(b.replicas_saturate(n));
                }
            }
        }
        assert_eq!(ThreadBudget::new(2).per_replica(4), 1);
        assert_eq!(ThreadBudget::new(8).per_replica(2), 4);
        assert_eq!(ThreadBudget::new(0).total(), 1);
    }

    #[test]
    fn the_environment_variable_is_checked() {
        assert_eq!(ThreadBudget::parse("3").unwrap().total(), 3);
        assert!(ThreadBudget::parse("0").is_err());
        assert_eq!(
            ThreadBudget::parse("many").unwrap_err().to_string(),
            "TESSEL_THREADS must be a positive integer, got \"many\""
        );
    }
}
