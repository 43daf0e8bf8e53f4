//! One module per verb.

pub mod check;
pub mod compile;
pub mod fmt;
pub mod grad;
pub mod run;
pub mod run_loop;

use std::process::ExitCode;

/// Prints `message` as an error and returns the failing exit code.
pub fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(1)
}
