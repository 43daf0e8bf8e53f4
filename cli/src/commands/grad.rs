//! `tessel grad FILE --wrt I,J`
use std::path::Path;
use std::process::ExitCode;

pub fn run(file: &Path, wrt: &[u32]) -> ExitCode {
    super::fail(format!(
        "grad is not built yet ({}, {wrt:?})",
        file.display()
    ))
}
