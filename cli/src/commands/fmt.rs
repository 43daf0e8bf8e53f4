//! `tessel fmt FILE`: the module in canonical text (stable names, no metadata), which parses
//! back to the same text. Parse errors are printed with their position; the exit code is 1.
use std::path::Path;
use std::process::ExitCode;
use tessel_compiler::hlo_text::{parse_module_file, print_module, PrintOptions};

pub fn run(file: &Path) -> ExitCode {
    match parse_module_file(file) {
        Ok(module) => {
            print!(
                "{}",
                print_module(&module, &PrintOptions { canonical: true })
            );
            ExitCode::SUCCESS
        }
        Err(e) => super::fail(e),
    }
}
