//! One module per verb, and what the verbs share.

pub mod check;
pub mod compile;
pub mod data;
pub mod fmt;
pub mod grad;
pub mod keras;
mod keras_data;
pub mod logger;
pub mod predict;
pub mod run;
mod run_hosts;
pub mod run_loop;
mod session_errors;
mod timing;
mod trace_file;

use std::process::ExitCode;

/// Prints `message` as an error and returns the failing exit code.
pub fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(1)
}
