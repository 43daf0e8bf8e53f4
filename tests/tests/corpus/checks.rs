//! The corpus checks: one test per way of running, each over every module of the manifest,
//! so one failure does not hide the others. A module listed in `known.rs` must fail with the
//! error listed there; any other failure, and a listed module that now passes, fails the test.

use crate::known::{self, Check};
use crate::manifest::{compare, entries, Entry};
use crate::runs::{run, Mode, MODES};
use std::panic::{catch_unwind, AssertUnwindSafe};
use tessel_compiler::autodiff::grad_module;

/// The module's forward outputs against JAX's.
fn forward(e: &Entry, mode: Mode) -> Result<(), String> {
    let module = e.module()?;
    let got = run(&module, &e.inputs(), e.replicas, mode)?;
    compare(&got, &e.outputs(), e.rtol)
}

/// `tessel grad`'s library path: the gradient module's (value, gradients) against JAX's.
fn gradient(e: &Entry, mode: Mode) -> Result<(), String> {
    let module = e.module()?;
    let grad = grad_module(&module, &e.grad_wrt).map_err(|e| format!("grad: {e}"))?;
    let got = run(&grad, &e.inputs(), e.replicas, mode)?;
    compare(&got, &e.grad_outputs(), e.rtol)
}

/// Runs `check` on every module it applies to; panics listing every unexpected outcome.
fn check_corpus(check: Check) {
    let mut unexpected = Vec::new();
    let mut passed = 0;
    let mut known_failures = 0;
    for e in entries() {
        if check.grad && e.grad_wrt.is_empty() {
            continue;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if check.grad {
                gradient(&e, check.mode)
            } else {
                forward(&e, check.mode)
            }
        }))
        .unwrap_or_else(|p| {
            let message = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {message}"))
        });
        match (outcome, known::failure(&e.name, check)) {
            (Ok(()), None) => passed += 1,
            (Err(m), None) => unexpected.push(format!("{}: {m}", e.name)),
            (Ok(()), Some(k)) => unexpected.push(format!(
                "{} passes now ({}): remove it from known.rs",
                e.name, k.reason
            )),
            (Err(m), Some(k)) if m.contains(k.error) => {
                known_failures += 1;
                eprintln!("{} fails as known ({}): {m}", e.name, k.reason);
            }
            (Err(m), Some(k)) => unexpected.push(format!(
                "{} fails otherwise than known.rs says (`{}`): {m}",
                e.name, k.error
            )),
        }
    }
    eprintln!("{check:?}: {passed} modules pass, {known_failures} fail as known");
    assert!(
        unexpected.is_empty(),
        "{check:?}:\n{}",
        unexpected.join("\n")
    );
    assert!(passed > 0, "{check:?}: no module ran");
}

#[test]
fn interpreter_as_parsed() {
    check_corpus(Check::forward(Mode::Interpreter));
}

#[test]
fn interpreter_optimized() {
    check_corpus(Check::forward(Mode::InterpreterOptimized));
}

#[test]
fn jit_as_parsed() {
    check_corpus(Check::forward(Mode::Jit));
}

#[test]
fn jit_optimized() {
    check_corpus(Check::forward(Mode::JitOptimized));
}

#[test]
fn gradients_on_the_interpreter() {
    check_corpus(Check::grad(Mode::Interpreter));
    check_corpus(Check::grad(Mode::InterpreterOptimized));
}

#[test]
fn gradients_on_the_jit() {
    check_corpus(Check::grad(Mode::Jit));
    check_corpus(Check::grad(Mode::JitOptimized));
}

/// Every entry of known.rs names a module of the manifest and a way it is run.
#[test]
fn known_failures_name_manifest_modules() {
    let names: Vec<String> = entries().into_iter().map(|e| e.name).collect();
    for k in known::KNOWN {
        assert!(names.contains(&k.name.to_string()), "known.rs: {}", k.name);
        assert!(!k.error.is_empty() && !k.reason.is_empty(), "{}", k.name);
    }
    assert_eq!(MODES.len(), 4);
}
