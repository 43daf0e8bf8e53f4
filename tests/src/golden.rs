//! Golden files: an input and its expected output side by side.
//!
//! A case is an input file (`NAME.hlo`, or a traced model named by the test) and an expected
//! file beside it (`NAME.<suffix>`). On a mismatch the test fails with a unified diff. Run
//! with `TESSEL_BLESS=1` to rewrite the expected files, then read the diff (`git diff`): a
//! blessed file is right only if it is what the compiler should print.

use similar::TextDiff;
use std::path::{Path, PathBuf};

/// The environment switch that rewrites expected files.
pub const BLESS_VAR: &str = "TESSEL_BLESS";

pub fn blessing() -> bool {
    std::env::var(BLESS_VAR).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Compares `actual` with the contents of `expected_path`. Returns a failure message with a
/// unified diff, or rewrites the file when blessing.
pub fn compare(expected_path: &Path, actual: &str) -> Result<(), String> {
    if blessing() {
        if let Some(parent) = expected_path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        let old = std::fs::read_to_string(expected_path).unwrap_or_default();
        if old != actual {
            std::fs::write(expected_path, actual).unwrap();
        }
        return Ok(());
    }
    let expected = match std::fs::read_to_string(expected_path) {
        Ok(s) => s,
        Err(_) => {
            return Err(format!(
                "{} does not exist; run with {BLESS_VAR}=1 to create it, then read it",
                expected_path.display()
            ))
        }
    };
    if expected == actual {
        return Ok(());
    }
    let diff = TextDiff::from_lines(expected.as_str(), actual)
        .unified_diff()
        .context_radius(3)
        .header(&expected_path.display().to_string(), "actual")
        .to_string();
    Err(format!(
        "golden mismatch for {}:\n{diff}\nIf the new output is right, rerun with {BLESS_VAR}=1 and review the diff.",
        expected_path.display()
    ))
}

/// Runs `f` over every file in `dir` ending in `.input_ext`, comparing its output with the
/// file of the same stem ending in `.expected_ext`. All mismatches are reported together;
/// panics if the directory holds no case (so that a suite cannot pass vacuously).
pub fn run_suite(dir: &Path, input_ext: &str, expected_ext: &str, f: impl Fn(&Path) -> String) {
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("golden dir {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(&format!(".{input_ext}")))
        .collect();
    inputs.sort();
    assert!(
        !inputs.is_empty(),
        "no .{input_ext} cases in {}",
        dir.display()
    );
    let mut failures = Vec::new();
    for input in &inputs {
        let stem = input.file_name().unwrap().to_string_lossy();
        let stem = stem.strip_suffix(&format!(".{input_ext}")).unwrap();
        let expected = input.with_file_name(format!("{stem}.{expected_ext}"));
        if let Err(msg) = compare(&expected, &f(input)) {
            failures.push(msg);
        }
    }
    if !failures.is_empty() {
        panic!(
            "{} of {} golden cases failed:\n\n{}",
            failures.len(),
            inputs.len(),
            failures.join("\n\n")
        );
    }
}
