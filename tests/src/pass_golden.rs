//! Golden pass tests in XLA's style: `tests/golden/passes/<pass>/NAME.hlo` is parsed, the pass
//! (or the whole pipeline) runs on it, and the canonical text of the result must equal
//! `NAME.expected`. Each suite also checks that the pass reports honestly: when it says
//! "unchanged", the module prints exactly as before.

use crate::golden::run_suite;
use crate::golden_dir;
use tessel_compiler::hlo_text::{parse_module_file, print_module, PrintOptions};
use tessel_compiler::ir::Module;
use tessel_compiler::passes::Pass;

pub fn canonical(m: &Module) -> String {
    print_module(m, &PrintOptions { canonical: true })
}

/// Runs `pass` once on every case of `tests/golden/passes/<dir>/`.
pub fn run_pass_suite(dir: &str, make: impl Fn() -> Box<dyn Pass>) {
    let path = golden_dir().join("passes").join(dir);
    run_suite(&path, "hlo", "expected", |input| {
        let mut m = parse_module_file(input).unwrap_or_else(|e| panic!("{e}"));
        let before = canonical(&m);
        let mut pass = make();
        let changed = pass
            .run(&mut m)
            .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        let after = canonical(&m);
        if !changed {
            assert_eq!(
                before,
                after,
                "{} said it left {} unchanged, but the module changed",
                pass.name(),
                input.display()
            );
        }
        if let Err(errors) = tessel_compiler::verifier::verify(&m) {
            panic!(
                "{} left {} invalid: {:?}",
                pass.name(),
                input.display(),
                errors
            );
        }
        format!("// changed: {changed}\n{after}")
    });
}
