//! `tessel check FILE...`: parse, verify and check device legality; exit 1 when any file is
//! illegal or cannot be read. `FILE: ok` lines go to stdout; diagnostics, errors and the count
//! of failing files go to stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::legality::{check_legality, render};
use tessel_compiler::verifier::verify;

/// What checking one file found.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Legal,
    /// The report to print: parse error, verifier errors or legality diagnostics.
    Illegal(String),
}

pub fn run(files: &[PathBuf]) -> ExitCode {
    let mut failed = 0;
    for file in files {
        match check_file(file) {
            Outcome::Legal => println!("{}: ok", file.display()),
            // Diagnostics and errors go to stderr, as every other verb's do.
            Outcome::Illegal(report) => {
                failed += 1;
                eprint!("{report}");
                eprintln!();
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "{failed} of {} file{} cannot run on the device",
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        );
        ExitCode::from(1)
    }
}

/// Parses, verifies and checks one file.
fn check_file(path: &Path) -> Outcome {
    let module = match parse_module_file(path) {
        Ok(m) => m,
        // The parse error names the file, line and column and quotes the line.
        Err(e) => return Outcome::Illegal(format!("error: cannot parse {e}\n")),
    };
    if let Err(errors) = verify(&module) {
        let mut text = format!(
            "error: {} is not a well-formed module ({} problem{}):\n",
            path.display(),
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        );
        for e in &errors {
            text.push_str(&format!("  {e}\n"));
        }
        return Outcome::Illegal(text);
    }
    let diags = check_legality(&module);
    if diags.is_empty() {
        Outcome::Legal
    } else {
        Outcome::Illegal(render(&diags, &module))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/conformance")
    }

    /// Writes `text` to file `name` in the test's directory (removed with it).
    fn temp_file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn corpus_files_are_legal_except_x64_mean() {
        let dir = corpus();
        assert!(
            dir.is_dir(),
            "the corpus tests/corpus/conformance is missing"
        );
        assert_eq!(check_file(&dir.join("softmax_rows.hlo")), Outcome::Legal);
        let Outcome::Illegal(report) = check_file(&dir.join("x64_mean.hlo")) else {
            panic!("x64_mean.hlo must be rejected");
        };
        assert!(report.contains("error[E0201]"), "{report}");
        assert!(report.contains("--> gen_hlo_corpus.py:127:"), "{report}");
    }

    #[test]
    fn parse_and_verify_errors_are_illegal() {
        let dir = tempfile::tempdir().unwrap();
        let bad = temp_file(
            &dir,
            "bad.hlo",
            "HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0\n}\n",
        );
        let Outcome::Illegal(report) = check_file(&bad) else {
            panic!("a parse error must fail");
        };
        assert!(report.contains("cannot parse"), "{report}");
        let missing = check_file(Path::new("/nonexistent/file.hlo"));
        assert!(matches!(missing, Outcome::Illegal(_)));
        let wrong = temp_file(
            &dir,
            "wrong.hlo",
            "HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[3] tanh(x)\n}\n",
        );
        let Outcome::Illegal(report) = check_file(&wrong) else {
            panic!("a verifier error must fail");
        };
        assert!(report.contains("not a well-formed module"), "{report}");
    }

    #[test]
    fn exit_status_follows_legality() {
        let dir = tempfile::tempdir().unwrap();
        let ok = temp_file(
            &dir,
            "ok.hlo",
            "HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] tanh(x)\n}\n",
        );
        let f64 = temp_file(
            &dir,
            "f64.hlo",
            "HloModule m\n\nENTRY e {\n  x = f64[2] parameter(0)\n  ROOT y = f64[2] tanh(x)\n}\n",
        );
        assert_eq!(run(std::slice::from_ref(&ok)), ExitCode::SUCCESS);
        assert_eq!(run(&[ok, f64]), ExitCode::from(1));
    }
}
