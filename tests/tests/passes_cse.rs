//! Golden cases for the cse pass (`tests/golden/passes/cse/`).

use tessel_compiler::passes::Cse;
use tessel_tests::pass_golden::run_pass_suite;

#[test]
fn golden() {
    run_pass_suite("cse", || Box::new(Cse));
}
