//! Traced models: they verify, have the expected signatures, and trace errors point at the
//! model's Rust lines.

use std::path::Path;
use tessel_compiler::ir::ElementType::{F32, S32, S64};
use tessel_compiler::ir::Module;
use tessel_compiler::trace::{Dim, Tracer};
use tessel_compiler::verifier::verify;
use tessel_tests::golden::compare;
use tessel_tests::{golden_dir, models};

fn signature(m: &Module) -> String {
    let (params, result) = m.entry_signature();
    let params: Vec<String> = params.iter().map(|s| s.to_text(false)).collect();
    format!("({}) -> {}", params.join(", "), result.to_text(false))
}

fn verified(m: Module) -> Module {
    if let Err(errors) = verify(&m) {
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        panic!(
            "traced module `{}` does not verify:\n{}",
            m.name,
            text.join("\n")
        );
    }
    m
}

#[test]
fn static_mlp_verifies() {
    let m = verified(models::mlp(Dim::Fixed(32), S32).unwrap());
    assert_eq!(
        signature(&m),
        "(f32[128], f32[784,128], f32[10], f32[128,10], f32[32,784], s32[32]) -> (f32[], f32[32,10])"
    );
}

#[test]
fn static_cnn_verifies_with_the_corpus_signature() {
    let m = verified(models::mnist_cnn(Dim::Fixed(8), S32).unwrap());
    assert_eq!(
        signature(&m),
        "(f32[32], f32[5,5,1,32], f32[64], f32[5,5,32,64], f32[128], f32[3136,128], f32[10], \
         f32[128,10], f32[8,784], s32[8], f32[8,128]) -> (f32[], f32[8,10])"
    );
    let p = verified(models::mnist_cnn_predict(16).unwrap());
    assert_eq!(
        signature(&p),
        "(f32[32], f32[5,5,1,32], f32[64], f32[5,5,32,64], f32[128], f32[3136,128], f32[10], \
         f32[128,10], f32[16,784]) -> s32[16]"
    );
}

#[test]
fn dynamic_and_64_bit_traces_are_kept_for_the_legality_check() {
    let m = models::mlp(Dim::Unknown, S64).unwrap();
    assert_eq!(
        signature(&m),
        "(f32[128], f32[784,128], f32[10], f32[128,10], f32[?,784], s64[?]) -> (f32[], f32[?,10])"
    );
}

/// A model with two shape mistakes: both are reported, each at its line.
fn broken_model() -> Result<Module, tessel_compiler::trace::TraceError> {
    let mut t = Tracer::new("broken");
    let x = t.parameter("x", &[Dim::Unknown, Dim::Fixed(784)], F32);
    let w = t.parameter("w", &[748, 10], F32);
    let b = t.parameter("b", &[12], F32);
    let y = t.scope("dense", |_| x.matmul(&w) + &b);
    let z = t.scope("head", |_| x.reshape(&[-1, 28, 28]) + &b);
    let labels = t.parameter("labels", &[Dim::Unknown], F32);
    let oh = labels.one_hot(10, F32);
    t.finish(&[&y, &z, &oh])
}

#[test]
fn trace_errors_golden() {
    let err = broken_model().unwrap_err();
    let path = golden_dir().join("trace/broken_model.errors");
    compare(Path::new(&path), &err.to_string()).unwrap_or_else(|e| panic!("{e}"));
}
