//! The properties every input must satisfy, shared by the fixed-seed mutation test
//! (`tests/tests/fuzz/`) and the cargo-fuzz targets (`tests/fuzz/`): HLO text goes through parse,
//! print and re-parse, verify, legality and (when small) the interpreter on zero inputs;
//! safetensors bytes go through `read_safetensors` and a write/read round trip. A stage may
//! refuse its input with an error; a panic (or an abort) is the bug these functions look for.
//! Broken invariants (printed text that does not parse again, a round trip that changes the
//! arrays) panic too, so that both harnesses report them the same way.

use std::path::Path;
use tessel_compiler::hlo_text::{parse_module, parse_module_file, print_module, PrintOptions};
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, Literal, Module, Op, Shape};
use tessel_compiler::legality::{check_legality, render};
use tessel_compiler::verifier::verify;
use tessel_runtime::host_io::{read_safetensors, write_safetensors};

/// How far an HLO input got before a stage refused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HloOutcome {
    NotUtf8,
    ParseError,
    VerifyError,
    /// Verified; not run (a `while`, a dynamic shape, or too many bytes).
    Verified,
    InterpreterError,
    InterpreterOk,
}

/// The interpreter runs a mutant only when every value is static and at most this many bytes,
/// and all of them together at most [`MAX_TOTAL_BYTES`]: a mutant's run stays in milliseconds.
const MAX_VALUE_BYTES: i64 = 1 << 20;
const MAX_TOTAL_BYTES: i64 = 8 << 20;

/// Checks HLO bytes. Bytes that are not UTF-8 are written to `scratch` (when given) and read
/// with `parse_module_file`, which must refuse them with a position.
pub fn check_hlo_bytes(bytes: &[u8], scratch: Option<&Path>) -> HloOutcome {
    match std::str::from_utf8(bytes) {
        Ok(text) => check_hlo(text),
        Err(_) => {
            if let Some(path) = scratch {
                std::fs::write(path, bytes).expect("writing the scratch file");
                match parse_module_file(path) {
                    Ok(_) => panic!("text that is not UTF-8 was accepted"),
                    Err(e) => assert!(e.line >= 1 && e.column >= 1, "no position: {e}"),
                }
            }
            HloOutcome::NotUtf8
        }
    }
}

/// Checks HLO text through every front-end stage and, when it is small, the interpreter.
pub fn check_hlo(text: &str) -> HloOutcome {
    let m = match parse_module(text, Some("fuzz.hlo")) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.to_string();
            return HloOutcome::ParseError;
        }
    };
    // A module the parser accepts prints to text that it accepts again.
    for canonical in [false, true] {
        let printed = print_module(&m, &PrintOptions { canonical });
        if let Err(e) = parse_module(&printed, None) {
            panic!("printed text (canonical: {canonical}) does not parse again: {e}\n{printed}");
        }
    }
    if let Err(errors) = verify(&m) {
        for e in &errors {
            let _ = e.to_string();
        }
        return HloOutcome::VerifyError;
    }
    let _ = render(&check_legality(&m), &m);
    let Some(args) = small_zero_args(&m) else {
        return HloOutcome::Verified;
    };
    match evaluate(&m, &args) {
        Ok(_) => HloOutcome::InterpreterOk,
        Err(e) => {
            let _ = e.to_string();
            HloOutcome::InterpreterError
        }
    }
}

/// Zero arguments for the entry, when the module is small enough to interpret quickly: no
/// `while` (a mutated bound could run for hours), static shapes, bounded bytes.
fn small_zero_args(m: &Module) -> Option<Vec<Literal>> {
    let mut total = 0i64;
    for id in m.computation_ids() {
        for (_, instr) in m.computation(id).instructions() {
            if matches!(instr.op, Op::While { .. }) {
                return None;
            }
            for leaf in instr.shape.leaves() {
                let bytes = leaf.checked_byte_size()?;
                if !leaf.is_static() || bytes > MAX_VALUE_BYTES {
                    return None;
                }
                total += bytes;
            }
        }
    }
    if total > MAX_TOTAL_BYTES {
        return None;
    }
    let (params, _) = m.entry_signature();
    Some(params.iter().map(zero_literal).collect())
}

fn zero_literal(shape: &Shape) -> Literal {
    match shape {
        Shape::Array(a) => Literal::Array(Array::zeros(a.clone())),
        Shape::Tuple(t) => Literal::Tuple(t.iter().map(zero_literal).collect()),
        Shape::Token => Literal::Token,
    }
}

/// How a safetensors input ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SafetensorsOutcome {
    Error,
    Read,
}

/// Writes `bytes` to `scratch` and reads them as safetensors. What reads must write and read
/// back to the same named arrays (through `scratch` with `.again` appended).
pub fn check_safetensors(bytes: &[u8], scratch: &Path) -> SafetensorsOutcome {
    std::fs::write(scratch, bytes).expect("writing the scratch file");
    let tensors = match read_safetensors(scratch) {
        Ok(t) => t,
        Err(e) => {
            let _ = e.to_string();
            return SafetensorsOutcome::Error;
        }
    };
    for (name, a) in &tensors {
        assert_eq!(
            a.len() as i64,
            a.shape.element_count(),
            "tensor {name}: data and shape disagree"
        );
    }
    let again = scratch.with_extension("again");
    write_safetensors(&again, &tensors)
        .unwrap_or_else(|e| panic!("arrays that were read do not write: {e}"));
    let back =
        read_safetensors(&again).unwrap_or_else(|e| panic!("written file does not read: {e}"));
    let _ = std::fs::remove_file(&again);
    let key = |t: &[(String, Array)]| {
        let mut v: Vec<(String, Array)> = t.to_vec();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let (a, b) = (key(&tensors), key(&back));
    assert_eq!(a.len(), b.len(), "round trip changed the number of tensors");
    for ((na, xa), (nb, xb)) in a.iter().zip(&b) {
        assert_eq!(na, nb, "round trip changed a name");
        assert_eq!(xa.shape, xb.shape, "round trip changed the shape of {na}");
        // Compare bytes: NaN payloads must survive, and NaN != NaN as floats.
        assert_eq!(
            xa.data.to_le_bytes(),
            xb.data.to_le_bytes(),
            "round trip changed the data of {na}"
        );
    }
    SafetensorsOutcome::Read
}
