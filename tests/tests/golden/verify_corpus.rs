//! Every corpus module verifies clean, and the verifier is not vacuous on them: a wrong shape
//! recorded on any instruction is caught, located at the user's Python line where JAX gave one.

use std::collections::HashSet;
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::ir::{Module, Op, Shape};
use tessel_compiler::shape_inference::result_shape_is_given;
use tessel_compiler::verifier::verify;

fn load_corpus() -> Vec<(String, Module)> {
    tessel_tests::corpus_files()
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let module = parse_module(&text, Some(&name)).unwrap_or_else(|e| panic!("{e}"));
            (name, module)
        })
        .collect()
}

#[test]
fn every_corpus_file_verifies_clean() {
    for (name, m) in load_corpus() {
        if let Err(errors) = verify(&m) {
            let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!("{name} does not verify:\n{}", text.join("\n"));
        }
    }
}

/// The same shape with one more dimension (or a different one for tuples and tokens).
fn corrupt(shape: &Shape) -> Shape {
    match shape {
        Shape::Array(a) => {
            let mut dims = a.dims.to_vec();
            dims.push(3);
            Shape::array(a.element_type, &dims)
        }
        _ => Shape::array(tessel_compiler::ir::ElementType::F32, &[7]),
    }
}

#[test]
fn a_wrong_shape_on_any_kind_of_instruction_is_caught() {
    let mut checked = 0;
    for (name, m) in load_corpus() {
        // One instruction per (computation, opcode), to keep the test fast. Parameters are left
        // out: an entry parameter that only feeds a custom-call has no shape to compare with.
        let mut seen = HashSet::new();
        for c in m.computation_ids() {
            let comp = m.computation(c);
            for &id in comp.ids() {
                let instr = comp.get(id);
                if matches!(instr.op, Op::Parameter(_)) || !seen.insert((c, instr.op.opcode_name()))
                {
                    continue;
                }
                let mut broken = m.clone();
                let target = broken.computation_mut(c).get_mut(id);
                target.shape = corrupt(&target.shape);
                let errors = verify(&broken).err().unwrap_or_else(|| {
                    panic!(
                        "{name}: a wrong shape on {} ({}) was not caught",
                        instr.name,
                        instr.op.opcode_name()
                    )
                });
                // An inferable shape is wrong on the instruction itself, which is named and
                // located where the module says it came from. (A given shape may still be a
                // valid one, e.g. a broadcast to more dimensions; then its users fail.)
                if !result_shape_is_given(&instr.op) {
                    let own = errors
                        .iter()
                        .find(|e| e.instruction.as_deref() == Some(instr.name.as_str()))
                        .unwrap_or_else(|| {
                            panic!("{name}: no error names {}: {errors:?}", instr.name)
                        });
                    assert_eq!(own.computation, comp.name);
                    assert_eq!(own.location, m.source_location(instr), "{name}: {own}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} instructions were checked");
}

#[test]
fn errors_point_at_the_python_line() {
    let (_, m) = load_corpus()
        .into_iter()
        .find(|(name, _)| name == "tanh_matmul_sum.hlo")
        .expect("tanh_matmul_sum.hlo is in the corpus");
    let entry = m.entry;
    let comp = m.entry();
    let dot = comp
        .ids()
        .iter()
        .copied()
        .find(|&id| matches!(comp.get(id).op, Op::Dot(_)))
        .expect("the module has a dot");
    let mut broken = m.clone();
    let shape = broken.computation(entry).get(dot).shape.clone();
    broken.computation_mut(entry).get_mut(dot).shape = corrupt(&shape);
    let errors = verify(&broken).unwrap_err();
    let text = errors[0].to_string();
    assert!(text.starts_with("in computation "), "{text}");
    assert!(
        text.contains(".py:"),
        "the location is the Python source line: {text}"
    );
    assert!(text.contains("dot: the result shape is"), "{text}");
}
