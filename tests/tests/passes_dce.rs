//! Golden cases for the dce pass (`tests/golden/passes/dce/`).

use tessel_compiler::passes::Dce;
use tessel_tests::pass_golden::run_pass_suite;

#[test]
fn golden() {
    run_pass_suite("dce", || Box::new(Dce));
}
