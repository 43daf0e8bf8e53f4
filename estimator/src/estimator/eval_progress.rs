//! Evaluation's progress lines at TF's cadence (`_StopAfterNEvalsHook`): with N steps known,
//! `Evaluation [k/N]` after every step when N < 20, else every `floor(N / 10)` steps and at
//! N; with N unknown, `Evaluation [k]` once per compiled loop (TPUEstimator logs once per
//! device call).

use crate::input::dataset::Cardinality;

pub(crate) struct EvalProgress {
    /// The steps the evaluation runs, when known.
    total: Option<u64>,
    /// Log every this many steps.
    every: u64,
}

impl EvalProgress {
    /// `steps` as given to `evaluate`; without it, the steps the whole dataset makes when
    /// its cardinality (in per-shard batches) is known.
    pub(crate) fn new(steps: Option<u64>, cardinality: Cardinality, shards: usize) -> EvalProgress {
        let total = steps.or(match cardinality {
            Cardinality::Finite(batches) => Some(batches.div_ceil(shards.max(1) as u64)),
            Cardinality::Infinite | Cardinality::Unknown => None,
        });
        let every = match total {
            Some(n) if n >= 20 => n / 10,
            _ => 1,
        };
        EvalProgress { total, every }
    }

    /// The line after step `done` (1-based), if one is due.
    pub(crate) fn line_after_step(&self, done: u64) -> Option<String> {
        let total = self.total?;
        (done.is_multiple_of(self.every) || done == total)
            .then(|| format!("Evaluation [{done}/{total}]"))
    }

    /// The line after a loop that ended at step `done`, when the total is unknown.
    pub(crate) fn line_after_loop(&self, done: u64) -> Option<String> {
        match self.total {
            Some(_) => None,
            None => Some(format!("Evaluation [{done}]")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(p: &EvalProgress, steps: u64) -> Vec<String> {
        (1..=steps).filter_map(|k| p.line_after_step(k)).collect()
    }

    #[test]
    fn tf_cadence() {
        // MNIST's test set at 128: 79 steps, a line every 7 and at the end (TF's 12 lines).
        let p = EvalProgress::new(None, Cardinality::Finite(79), 1);
        let l = lines(&p, 79);
        assert_eq!(l.len(), 12, "{l:?}");
        assert_eq!(l[0], "Evaluation [7/79]");
        assert_eq!(l[10], "Evaluation [77/79]");
        assert_eq!(l[11], "Evaluation [79/79]");
        // Fewer than 20 steps: every step.
        let p = EvalProgress::new(Some(5), Cardinality::Unknown, 1);
        assert_eq!(lines(&p, 5).len(), 5);
        // Batches dealt to 2 shards: 9 batches are 5 steps.
        let p = EvalProgress::new(None, Cardinality::Finite(9), 2);
        assert_eq!(lines(&p, 5).last().unwrap(), "Evaluation [5/5]");
        // Unknown: once per loop, no per-step line.
        let p = EvalProgress::new(None, Cardinality::Unknown, 1);
        assert!(lines(&p, 100).is_empty());
        assert_eq!(p.line_after_loop(50).unwrap(), "Evaluation [50]");
    }
}
