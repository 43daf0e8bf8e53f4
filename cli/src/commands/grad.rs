//! `tessel grad FILE --wrt I,J`: prints a module whose root is (value, d value / d param I, ...).
use std::path::Path;
use std::process::ExitCode;
use tessel_compiler::autodiff::grad_module;
use tessel_compiler::hlo_text::{parse_module_file, print_module, PrintOptions};

pub fn run(file: &Path, wrt: &[u32]) -> ExitCode {
    let module = match parse_module_file(file) {
        Ok(m) => m,
        Err(e) => return super::fail(e),
    };
    match grad_module(&module, wrt) {
        Ok(g) => {
            print!("{}", print_module(&g, &PrintOptions::default()));
            ExitCode::SUCCESS
        }
        Err(e) => super::fail(format!("{}: {e}", file.display())),
    }
}
