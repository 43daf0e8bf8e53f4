//! Golden cases for the algebraic-simplifier pass (`tests/golden/passes/algebraic-simplifier/`).

use tessel_compiler::passes::AlgebraicSimplifier;
use tessel_tests::pass_golden::run_pass_suite;

#[test]
fn golden() {
    run_pass_suite("algebraic-simplifier", || Box::new(AlgebraicSimplifier));
}
