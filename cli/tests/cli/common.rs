//! Shared by the command-line tests.

use std::path::PathBuf;

/// A file of the JAX conformance corpus (`tests/corpus/conformance/`); panics when the corpus is
/// missing, so that a test meant to cover it cannot pass without it.
pub fn corpus(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/conformance");
    assert!(
        dir.is_dir(),
        "tests/corpus/conformance is missing: this test needs the corpus"
    );
    dir.join(name)
}

/// The stdout of a command that must have succeeded (else the test fails with its stderr).
pub fn succeeded(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}
