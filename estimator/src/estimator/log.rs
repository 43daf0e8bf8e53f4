//! The estimator's log: TF's lines, word for word, so a TF user finds what they know
//! (`loss = 0.12, step = 1000 (4.5 sec)`, `global_step/sec: 37.1`, `Saving checkpoints for
//! 1000 into DIR/model.ckpt.`), on stderr with the prefix `INFO:tessel:` in place of
//! `INFO:tensorflow:`. When stderr is a terminal, a progress bar (step, examples/s, ETA,
//! loss) stays below the lines.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub struct Log {
    bar: Option<ProgressBar>,
    /// Lines are also kept, for tests and for callers that show them elsewhere.
    pub lines: Vec<String>,
    quiet: bool,
}

impl Log {
    /// A log on stderr; `quiet` keeps lines in memory only (tests).
    pub fn new(quiet: bool) -> Log {
        Log {
            bar: None,
            lines: Vec::new(),
            quiet,
        }
    }

    pub fn info(&mut self, line: impl Into<String>) {
        let line = line.into();
        if !self.quiet {
            let text = format!("INFO:tessel:{line}");
            match &self.bar {
                Some(bar) => bar.println(text),
                None => eprintln!("{text}"),
            }
        }
        self.lines.push(line);
    }

    pub fn warn(&mut self, line: impl Into<String>) {
        let line = line.into();
        if !self.quiet {
            let text = format!("WARNING:tessel:{line}");
            match &self.bar {
                Some(bar) => bar.println(text),
                None => eprintln!("{text}"),
            }
        }
        self.lines.push(line);
    }

    /// Starts a progress bar from `start` to `end` steps, if stderr is a terminal.
    pub fn start_progress(&mut self, start: u64, end: u64) {
        if self.quiet || !std::io::stderr().is_terminal() {
            return;
        }
        let bar = ProgressBar::with_draw_target(Some(end), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{bar:30} step {pos}/{len}  {msg}  ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_position(start);
        self.bar = Some(bar);
    }

    /// Moves the bar to `step` with the latest loss and throughput.
    pub fn progress(&mut self, step: u64, loss: f64, examples_per_sec: f64) {
        if let Some(bar) = &self.bar {
            bar.set_position(step);
            bar.set_message(format!("{examples_per_sec:.0} examples/s  loss {loss:.4}"));
        }
    }

    pub fn finish_progress(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// TF's `%s` of a Python float: the shortest text that reads back as the same f32 (TF logs
/// numpy float32 values).
pub fn tf_float(v: f64) -> String {
    format!("{}", v as f32)
}

/// TF's `%g`: six significant digits, no trailing zeros.
pub fn tf_g(v: f64) -> String {
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
