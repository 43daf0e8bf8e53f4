//! `--repeat R` and `--profile` for `tessel run`: timing repeated runs and printing the JIT's
//! per-kernel table.

use std::time::Instant;
use tessel_runtime::session::profile::{render_rows, ProfileCounters};

/// `--repeat R` and `--profile`: R more runs after the one made, their median, and the JIT's
/// per-kernel table (leaving out the first run when R is given).
pub struct Timing {
    pub repeat: Option<usize>,
    pub compile_ms: f64,
    /// For a loop: its K, to print the time per iteration and the table per iteration.
    pub iterations: Option<usize>,
    /// Rows of the per-kernel table before the rest is summed (`--profile-rows`; 0: all).
    pub profile_rows: usize,
}

impl Timing {
    pub fn print(
        &self,
        profile: Option<&ProfileCounters>,
        mut run: impl FnMut() -> Result<(), String>,
    ) -> Result<(), String> {
        if let (Some(profile), Some(_)) = (profile, self.repeat) {
            profile.reset();
        }
        if let Some(repeat) = self.repeat {
            let mut times = Vec::with_capacity(repeat);
            for _ in 0..repeat {
                let start = Instant::now();
                run()?;
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
            times.sort_by(f64::total_cmp);
            let median = match self.iterations {
                // The loop has always printed the upper median.
                Some(_) => times[times.len() / 2],
                None => median(&times),
            };
            println!("compile_ms: {:.3}", self.compile_ms);
            println!("run_ms_median: {median:.3}");
            if let Some(k) = self.iterations {
                println!("loop_ms_per_iteration: {:.3}", median / k as f64);
            }
        }
        if let Some(profile) = profile {
            let runs = (self.repeat.unwrap_or(1) * self.iterations.unwrap_or(1)) as u64;
            if self.iterations.is_some() {
                println!("per iteration:");
            }
            let rows = match self.profile_rows {
                0 => usize::MAX,
                n => n,
            };
            print!("{}", render_rows(&profile.times(), runs, rows));
        }
        Ok(())
    }
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}
