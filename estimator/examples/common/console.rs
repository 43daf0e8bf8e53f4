//! The examples' console: the estimator's log lines on stderr as TF prints them
//! (`INFO:tessel:...`, `WARNING:tessel:...`), and, when stderr is a terminal, a progress bar
//! (step, examples/s, loss, ETA) under them while training runs. The library prints nothing:
//! it logs through the `log` facade and reports progress to a callback.
#![allow(dead_code)] // each includer uses part of it

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use tessel_estimator::estimator::Progress;

/// The bar while training draws one: log lines print above it.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

struct Console;

impl log::Log for Console {
    fn enabled(&self, m: &log::Metadata) -> bool {
        // The estimator's lines; from other crates only warnings and errors.
        m.level() <= log::Level::Warn || (m.level() <= log::Level::Info && m.target() == "tessel")
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Error => "ERROR",
            log::Level::Warn => "WARNING",
            _ => "INFO",
        };
        let text = format!("{level}:{}:{}", record.target(), record.args());
        let bar = BAR.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    fn flush(&self) {}
}

/// Shows the `log` facade's lines on stderr (once per process; a second call keeps the first).
pub fn install_logger() {
    static CONSOLE: Console = Console;
    if log::set_logger(&CONSOLE).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// The estimator's progress callback: a bar on a terminal, nothing otherwise.
pub fn progress_bar() -> impl Fn(&Progress) + Send + Sync + 'static {
    let terminal = std::io::stderr().is_terminal();
    move |p: &Progress| {
        if !terminal {
            return;
        }
        let mut slot = BAR.lock().unwrap_or_else(|e| e.into_inner());
        if p.done {
            if let Some(bar) = slot.take() {
                bar.finish_and_clear();
            }
            return;
        }
        let bar = slot.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(Some(p.target), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("{bar:30} step {pos}/{len}  {msg}  ETA {eta}")
            {
                bar.set_style(style);
            }
            bar
        });
        bar.set_position(p.step);
        if p.loss.is_finite() {
            bar.set_message(format!(
                "{:.0} examples/s  loss {:.4}",
                p.examples_per_sec, p.loss
            ));
        }
    }
}
