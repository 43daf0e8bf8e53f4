//! Golden canonical text: hand-written cases (`tests/golden/fmt/NAME.hlo` ->
//! `NAME.canonical`), every corpus file (-> `tests/golden/fmt/corpus/NAME.canonical`), and
//! parse errors (`tests/golden/fmt/errors/NAME.bad.hlo` -> `NAME.error`).
//! Run with `TESSEL_BLESS=1` to rewrite the expected files, then review the diff.

use std::path::Path;
use tessel_compiler::hlo_text::{parse_module, parse_module_file, print_module, PrintOptions};
use tessel_compiler::verifier::verify;
use tessel_tests::golden::{compare, run_suite};
use tessel_tests::{corpus_files, golden_dir};

const CANONICAL: PrintOptions = PrintOptions { canonical: true };

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// Canonical text of a file, checking that it parses back to itself.
fn canonical_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let name = file_name(path);
    let module = parse_module(&text, Some(&name)).unwrap_or_else(|e| panic!("{e}"));
    let canonical = print_module(&module, &CANONICAL);
    let again = parse_module(&canonical, Some(&name))
        .unwrap_or_else(|e| panic!("canonical text of {name} does not parse: {e}\n{canonical}"));
    assert_eq!(
        print_module(&again, &CANONICAL),
        canonical,
        "canonical text of {name} is not a fixed point"
    );
    canonical
}

#[test]
fn hand_written_cases() {
    run_suite(&golden_dir().join("fmt"), "hlo", "canonical", |path| {
        // The cases are valid HLO, not just valid syntax.
        let module = parse_module_file(path).unwrap_or_else(|e| panic!("{e}"));
        if let Err(errors) = verify(&module) {
            panic!("{}: {}", path.display(), errors[0]);
        }
        canonical_text(path)
    });
}

#[test]
fn corpus_cases() {
    let dir = golden_dir().join("fmt").join("corpus");
    let failures: Vec<String> = corpus_files()
        .iter()
        .filter_map(|path| {
            let stem = file_name(path).trim_end_matches(".hlo").to_string();
            compare(
                &dir.join(format!("{stem}.canonical")),
                &canonical_text(path),
            )
            .err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn parse_errors() {
    run_suite(
        &golden_dir().join("fmt").join("errors"),
        "bad.hlo",
        "error",
        |path| {
            let text = std::fs::read_to_string(path).unwrap();
            match parse_module(&text, Some(&file_name(path))) {
                Ok(m) => panic!(
                    "{} parsed but should not:\n{}",
                    path.display(),
                    print_module(&m, &CANONICAL)
                ),
                Err(e) => format!("{e}\n"),
            }
        },
    );
}
