//! Device legality: diagnostics of traced models and of HLO modules, compared with golden
//! files, and the corpus rule (only `x64_mean.hlo` is rejected).

use tessel_compiler::ir::ElementType::{S32, S64};
use tessel_compiler::legality::{check_legality, render, DYNAMIC_SHAPE, SIXTY_FOUR_BIT};
use tessel_compiler::trace::Dim;
use tessel_tests::golden::compare;
use tessel_tests::{golden_dir, models};

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
