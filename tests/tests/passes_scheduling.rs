//! Golden cases for the scheduling pass (`tests/golden/passes/scheduling/`).

use tessel_compiler::passes::Scheduler;
use tessel_tests::pass_golden::run_pass_suite;

#[test]
fn golden() {
    run_pass_suite("scheduling", || Box::new(Scheduler));
}
