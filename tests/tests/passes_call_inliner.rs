//! Golden cases for the call-inliner pass (`tests/golden/passes/call-inliner/`).

use tessel_compiler::passes::CallInliner;
use tessel_tests::pass_golden::run_pass_suite;

#[test]
fn golden() {
    run_pass_suite("call-inliner", || Box::new(CallInliner));
}
