//! Golden cases for the while-loop-simplifier pass (`tests/golden/passes/while-loop-simplifier/`).

use tessel_compiler::passes::WhileLoopSimplifier;
use tessel_tests::pass_golden::run_pass_suite;

#[test]
fn golden() {
    run_pass_suite("while-loop-simplifier", || Box::new(WhileLoopSimplifier));
}
