//! The estimator's log: TF's lines, word for word, so a TF user finds what they know
//! (`loss = 0.12, step = 1000 (4.5 sec)`, `global_step/sec: 37.1`, `Saving checkpoints for
//! 1000 into DIR/model.ckpt.`). The library prints nothing itself: each line goes to the `log`
//! facade (target `tessel`), where the program's logger shows it (the examples print
//! `INFO:tessel:` in place of `INFO:tensorflow:`), and training's progress goes to the
//! estimator's progress callback (the examples draw a bar with it).

use std::sync::Arc;

/// Training's progress after each loop, for a program's progress bar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// The global step reached, and the one training stops at.
    pub step: u64,
    pub target: u64,
    /// The loss of the last step.
    pub loss: f64,
    /// Examples per second over the loops so far (compile time excluded).
    pub examples_per_sec: f64,
    /// The last report of this `train` call (it ended, or failed).
    pub done: bool,
}

/// A program's progress callback ([`super::TpuEstimator::with_progress`]).
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

pub(crate) struct Log {
    /// Lines are also kept, for tests and for callers that show them elsewhere.
    pub lines: Vec<String>,
    quiet: bool,
    progress: Option<ProgressFn>,
    last: Option<Progress>,
}

impl Log {
    /// A log through the `log` facade; `quiet` keeps lines in memory only (tests).
    pub(crate) fn new(quiet: bool) -> Log {
        Log {
            lines: Vec::new(),
            quiet,
            progress: None,
            last: None,
        }
    }

    /// Reports training's progress to `progress` too.
    pub(crate) fn with_progress(mut self, progress: Option<ProgressFn>) -> Log {
        self.progress = progress;
        self
    }

    pub(crate) fn info(&mut self, line: impl Into<String>) {
        let line = line.into();
        if !self.quiet {
            log::info!(target: "tessel", "{line}");
        }
        self.lines.push(line);
    }

    pub(crate) fn warn(&mut self, line: impl Into<String>) {
        let line = line.into();
        if !self.quiet {
            log::warn!(target: "tessel", "{line}");
        }
        self.lines.push(line);
    }

    /// Training starts at `start` and stops at `end`.
    pub(crate) fn start_progress(&mut self, start: u64, end: u64) {
        self.report(Progress {
            step: start,
            target: end,
            loss: f64::NAN,
            examples_per_sec: 0.0,
            done: false,
        });
    }

    /// Training reached `step` with the latest loss and throughput.
    pub(crate) fn progress(&mut self, step: u64, loss: f64, examples_per_sec: f64) {
        let target = self.last.map_or(step, |p| p.target);
        self.report(Progress {
            step,
            target,
            loss,
            examples_per_sec,
            done: false,
        });
    }

    /// Training ended (or failed): the last report.
    pub(crate) fn finish_progress(&mut self) {
        if let Some(last) = self.last.take() {
            self.report(Progress { done: true, ..last });
            self.last = None;
        }
    }

    fn report(&mut self, progress: Progress) {
        if let Some(f) = &self.progress {
            f(&progress);
        }
        self.last = Some(progress);
    }
}

/// TF's `%s` of a Python float: the shortest text that reads back as the same f32 (TF logs
/// numpy float32 values).
pub(crate) fn tf_float(v: f64) -> String {
    format!("{}", v as f32)
}

/// TF's `%g`: six significant digits, no trailing zeros.
pub(crate) fn tf_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let s = format!("{v:.5e}");
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS` in UTC (the civil date from days
/// since 1970-01-01, Howard Hinnant's algorithm).
pub(crate) fn utc_iso(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_iso_is_the_calendar_date() {
        assert_eq!(utc_iso(0), "1970-01-01T00:00:00");
        assert_eq!(utc_iso(951_782_400), "2000-02-29T00:00:00");
        assert_eq!(utc_iso(1_795_775_187), "2026-11-27T10:26:27");
    }

    #[test]
    fn g_format_matches_pythons() {
        assert_eq!(tf_g(37.1234567), "37.1235");
        assert_eq!(tf_g(4750.0), "4750");
        assert_eq!(tf_g(123456789.0), "1.23457e+08");
        assert_eq!(tf_g(0.000012345), "1.2345e-05");
        assert_eq!(tf_g(0.5), "0.5");
    }
}
