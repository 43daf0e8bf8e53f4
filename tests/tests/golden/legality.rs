//! Device legality: diagnostics of traced models and of HLO modules, compared with golden
//! files, and the corpus rule (only `x64_mean.hlo` is rejected).

use std::path::Path;
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::ElementType::{S32, S64};
use tessel_compiler::ir::Module;
use tessel_compiler::legality::{check_legality, render, DYNAMIC_SHAPE, SIXTY_FOUR_BIT};
use tessel_compiler::trace::Dim;
use tessel_tests::golden::{compare, run_suite};
use tessel_tests::{corpus_files, golden_dir, models};

#[test]
fn static_32_bit_traces_are_legal() {
    let m = models::mlp(Dim::Fixed(32), S32).unwrap();
    assert!(check_legality(&m).is_empty());
    let m = models::mnist_cnn(Dim::Fixed(8), S32).unwrap();
    let d = check_legality(&m);
    assert!(d.is_empty(), "{}", render(&d, &m));
}

#[test]
fn traced_mlp_with_dynamic_batch_and_int64_labels_is_rejected_at_rust_lines() {
    let m = models::mlp(Dim::Unknown, S64).unwrap();
    let d = check_legality(&m);
    // The origins point at the model's Rust lines and carry hints.
    let origins: Vec<_> = d.iter().filter(|d| d.origin.is_none()).collect();
    assert!(origins
        .iter()
        .any(|d| d.code == SIXTY_FOUR_BIT && d.instruction.starts_with("labels.")));
    assert!(origins
        .iter()
        .any(|d| d.code == DYNAMIC_SHAPE && d.instruction.starts_with("images.")));
    for d in &d {
        let loc = d
            .location
            .as_ref()
            .expect("traced instructions have locations");
        assert_eq!(loc.file, "tests/src/models.rs");
    }
    let path = golden_dir().join("legality/traced_mlp_dynamic_s64.diagnostics");
    compare(&path, &render(&d, &m)).unwrap_or_else(|e| panic!("{e}"));
}

/// Parses `path` and names it by its file name only, so that goldens do not hold absolute paths.
fn parse(path: &Path) -> Module {
    let mut m = parse_module_file(path).unwrap_or_else(|e| panic!("{e}"));
    m.source_file = Some(path.file_name().unwrap().to_string_lossy().into_owned());
    m
}

/// `ok` for a legal module, else the rendered diagnostics.
fn legality_report(m: &Module) -> String {
    let d = check_legality(m);
    if d.is_empty() {
        "ok\n".to_string()
    } else {
        render(&d, m)
    }
}

#[test]
fn hand_written_cases() {
    run_suite(&golden_dir().join("legality"), "hlo", "diagnostics", |p| {
        legality_report(&parse(p))
    });
}

#[test]
fn the_corpus_is_legal_except_x64_mean() {
    let mut checked = 0;
    for file in corpus_files() {
        let m = parse(&file);
        let d = check_legality(&m);
        if file.file_name().unwrap() == "x64_mean.hlo" {
            assert!(!d.is_empty());
            // Every diagnostic points at the Python line the debug tables give (its own, or
            // that of its nearest user for parameters and constants) and at its HLO line.
            assert!(d
                .iter()
                .any(|d| d.code == SIXTY_FOUR_BIT && d.origin.is_none()));
            for d in &d {
                let loc = d.location.as_ref().unwrap();
                assert_eq!((loc.file.as_str(), loc.line), ("gen_hlo_corpus.py", 127));
                assert!(d.hlo_line.is_some());
            }
            let path = golden_dir().join("legality/corpus_x64_mean.diagnostics");
            compare(&path, &render(&d, &m)).unwrap_or_else(|e| panic!("{e}"));
        } else {
            assert!(d.is_empty(), "{}:\n{}", file.display(), render(&d, &m));
        }
        checked += 1;
    }
    assert!(checked >= 10);
}
