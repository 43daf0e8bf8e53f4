//! `tessel grad` on the command line: HLO text out, errors with exit code 1.

use crate::common::{corpus, succeeded};

use std::process::Command;
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::ir::Shape;

#[test]
fn grad_prints_a_module_returning_value_and_gradients() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args([
            "grad",
            corpus("grad_softmax_xent.hlo").to_str().unwrap(),
            "--wrt",
            "0,1",
        ])
        .output()
        .unwrap();
    let text = succeeded(&out);
    let m = parse_module(&text, Some("stdout")).unwrap_or_else(|e| panic!("{e}"));
    let (params, result) = m.entry_signature();
    assert_eq!(params.len(), 4);
    let Shape::Tuple(parts) = result else {
        panic!("root is not a tuple")
    };
    assert_eq!(
        parts,
        vec![
            Shape::scalar(tessel_compiler::ir::ElementType::F32),
            params[0].clone(),
            params[1].clone()
        ]
    );
}

#[test]
fn grad_reports_a_missing_parameter() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args([
            "grad",
            corpus("grad_pool_conv.hlo").to_str().unwrap(),
            "--wrt",
            "0,9",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no parameter 9"), "{err}");
}
