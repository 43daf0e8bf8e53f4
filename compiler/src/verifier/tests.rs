//! The verifier on modules broken in each way it must catch.

use super::{verify, VerifyError};
use crate::builder::Builder;
use crate::ir::{
    BinaryOp, ComparisonDirection, Computation, ComputationId, ElementType, InstrId, Module, Op,
    Shape, SourceLocation,
};
use ElementType::*;

fn f32s(dims: &[i64]) -> Shape {
    Shape::array(F32, dims)
}

/// `(t, t) -> t` adding its parameters.
fn add_region(m: &mut Module, name: &str, t: ElementType) -> ComputationId {
    let id = m.add_computation(Computation::new(name));
    let mut b = Builder::new(m, id);
    let x = b.add_with_shape(Op::Parameter(0), Shape::scalar(t), &[]);
    let y = b.add_with_shape(Op::Parameter(1), Shape::scalar(t), &[]);
    b.add(Op::Binary(BinaryOp::Add), &[x, y]).unwrap();
    id
}

/// A module using reduce, while and call that verifies clean. Returns it with the entry's
/// parameter and its last instruction.
fn good_module() -> (Module, InstrId, InstrId) {
    let mut m = Module::new("good");
    let sum = add_region(&mut m, "sum", F32);
    let state = Shape::Tuple(vec![Shape::scalar(S32), f32s(&[4])]);
    let body = m.add_computation(Computation::new("body"));
    {
        let mut b = Builder::new(&mut m, body);
        let p = b.add_with_shape(Op::Parameter(0), state.clone(), &[]);
        let i = b.add(Op::GetTupleElement { index: 0 }, &[p]).unwrap();
        let x = b.add(Op::GetTupleElement { index: 1 }, &[p]).unwrap();
        let x2 = b.add(Op::Unary(crate::ir::UnaryOp::Sine), &[x]).unwrap();
        b.add(Op::Tuple, &[i, x2]).unwrap();
    }
    let cond = m.add_computation(Computation::new("cond"));
    {
        let mut b = Builder::new(&mut m, cond);
        let p = b.add_with_shape(Op::Parameter(0), state.clone(), &[]);
        let i = b.add(Op::GetTupleElement { index: 0 }, &[p]).unwrap();
        let lt = Op::Compare {
            direction: ComparisonDirection::Lt,
            comparison_type: None,
        };
        b.add(lt, &[i, i]).unwrap();
    }
    let entry = m.entry;
    let mut b = Builder::new(&mut m, entry);
    let x = b.add_with_shape(Op::Parameter(0), f32s(&[4]), &[]);
    let zero = b
        .add_given(
            Op::Constant(crate::ir::Array::scalar_s32(0).into()),
            Shape::scalar(S32),
            &[],
        )
        .unwrap();
    let init = b.add(Op::Tuple, &[zero, x]).unwrap();
    let w = b
        .add(
            Op::While {
                condition: cond,
                body,
            },
            &[init],
        )
        .unwrap();
    let y = b.add(Op::GetTupleElement { index: 1 }, &[w]).unwrap();
    let c = b.add(Op::Call { to_apply: body }, &[w]).unwrap();
    let z = b.add(Op::GetTupleElement { index: 1 }, &[c]).unwrap();
    let s = b.add(Op::Binary(BinaryOp::Add), &[y, z]).unwrap();
    let zero_f = b
        .add_given(
            Op::Constant(crate::ir::Array::scalar_f32(0.0).into()),
            Shape::scalar(F32),
            &[],
        )
        .unwrap();
    let r = b
        .add(
            Op::Reduce {
                dimensions: vec![0],
                to_apply: sum,
            },
            &[s, zero_f],
        )
        .unwrap();
    (m, x, r)
}

fn errors(m: &Module) -> Vec<VerifyError> {
    verify(m).expect_err("the module should not verify")
}

fn has(errors: &[VerifyError], needle: &str) -> bool {
    errors.iter().any(|e| e.to_string().contains(needle))
}

fn all_text(errors: &[VerifyError]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn good_module_verifies() {
    let (m, _, _) = good_module();
    assert_eq!(verify(&m), Ok(()));
}

#[test]
fn wrong_recorded_shape_is_reported_with_location() {
    let (mut m, x, _) = good_module();
    let entry = m.entry;
    let mut b = Builder::new(&mut m, entry);
    b.metadata.source = Some(SourceLocation {
        file: "model.rs".into(),
        line: 12,
        column: 5,
    });
    let bad = b.add_with_shape(Op::Binary(BinaryOp::Multiply), f32s(&[5]), &[x, x]);
    let name = m.entry().get(bad).name.clone();
    let errs = errors(&m);
    assert_eq!(errs.len(), 1, "{}", all_text(&errs));
    let text = errs[0].to_string();
    assert_eq!(
        text,
        format!(
            "in computation main.good, instruction {name} (model.rs:12): multiply: the result \
             shape is f32[5], but operands f32[4] and f32[4] give f32[4]"
        )
    );
    assert_eq!(errs[0].location.as_ref().unwrap().line, 12);
}

#[test]
fn hlo_text_line_is_the_fallback_location() {
    let (mut m, x, _) = good_module();
    m.source_file = Some("model.hlo".into());
    let entry = m.entry;
    let bad = Builder::new(&mut m, entry).add_with_shape(Op::Copy, f32s(&[5]), &[x]);
    m.entry_mut().get_mut(bad).text_line = Some(40);
    assert!(has(&errors(&m), "(model.hlo:40): copy"));
}

#[test]
fn missing_root_and_empty_callee() {
    let (mut m, x, _) = good_module();
    let empty = m.add_computation(Computation::new("empty"));
    let entry = m.entry;
    Builder::new(&mut m, entry).add_with_shape(Op::Call { to_apply: empty }, f32s(&[4]), &[x]);
    let errs = errors(&m);
    assert!(
        has(
            &errs,
            "in computation empty: the computation has no instructions"
        ),
        "{}",
        all_text(&errs)
    );
    assert!(
        has(&errs, "call: to_apply computation empty has no root"),
        "{}",
        all_text(&errs)
    );
}

#[test]
fn removed_root() {
    let mut m = Module::new("t");
    let entry = m.entry;
    let mut b = Builder::new(&mut m, entry);
    let x = b.add_with_shape(Op::Parameter(0), f32s(&[4]), &[]);
    let y = b.add(Op::Unary(crate::ir::UnaryOp::Negate), &[x]).unwrap();
    m.entry_mut().set_root(y);
    m.entry_mut().remove(y);
    assert!(has(&errors(&m), "the root instruction was removed"));
}

#[test]
fn cycles_are_found() {
    let (mut m, x, _) = good_module();
    let entry = m.entry;
    let mut b = Builder::new(&mut m, entry);
    let a = b.add(Op::Binary(BinaryOp::Add), &[x, x]).unwrap();
    let c = b.add(Op::Binary(BinaryOp::Add), &[a, x]).unwrap();
    m.entry_mut().set_operand(a, 0, c);
    let errs = errors(&m);
    let (an, cn) = (m.entry().get(a).name.clone(), m.entry().get(c).name.clone());
    assert!(
        has(
            &errs,
            &format!("depends on itself: {an} uses {cn} uses {an}")
        ) || has(
            &errs,
            &format!("depends on itself: {cn} uses {an} uses {cn}")
        ),
        "{}",
        all_text(&errs)
    );
    // One cycle, reported once.
    assert_eq!(
        errs.iter()
            .filter(|e| e.message.contains("depends on itself"))
            .count(),
        1
    );
}

#[test]
fn parameter_numbers_gaps_and_duplicates() {
    let mut m = Module::new("t");
    let entry = m.entry;
    let mut b = Builder::new(&mut m, entry);
    let p0 = b.add_with_shape(Op::Parameter(0), f32s(&[2]), &[]);
    b.add_with_shape(Op::Parameter(0), f32s(&[2]), &[]);
    let p3 = b.add_with_shape(Op::Parameter(3), f32s(&[2]), &[]);
    b.add(Op::Binary(BinaryOp::Add), &[p0, p3]).unwrap();
    let errs = errors(&m);
    assert!(
        has(&errs, "parameter number 0 is also used by parameter"),
        "{}",
        all_text(&errs)
    );
    assert!(
        has(&errs, "parameter(3) in a computation with 3 parameters"),
        "{}",
        all_text(&errs)
    );
}

#[test]
fn duplicate_names() {
    let (mut m, x, r) = good_module();
    let name = m.entry().get(x).name.clone();
    m.entry_mut().get_mut(r).name = name.clone();
    let errs = errors(&m);
    assert!(
        has(
            &errs,
            &format!("instruction name {name} is already used in computation main.good")
        ),
        "{}",
        all_text(&errs)
    );
    let sum = m.find_computation("sum").unwrap();
    m.computation_mut(sum).name = "body".into();
    assert!(has(&errors(&m), "computation name body is used twice"));
}

#[test]
fn missing_callee_and_recursion() {
    let (mut m, x, _) = good_module();
    let entry = m.entry;
    Builder::new(&mut m, entry).add_with_shape(
        Op::Call {
            to_apply: ComputationId(99),
        },
        f32s(&[4]),
        &[x],
    );
    // f calls g and g calls f.
    let f = m.add_computation(Computation::new("f"));
    let g = m.add_computation(Computation::new("g"));
    for (me, other) in [(f, g), (g, f)] {
        let mut b = Builder::new(&mut m, me);
        let p = b.add_with_shape(Op::Parameter(0), f32s(&[]), &[]);
        b.add_with_shape(Op::Call { to_apply: other }, f32s(&[]), &[p]);
    }
    let errs = errors(&m);
    assert!(
        has(&errs, "call calls computation#99, but the module has only"),
        "{}",
        all_text(&errs)
    );
    assert!(
        has(&errs, "computation f calls itself through f -> g -> f")
            || has(&errs, "computation g calls itself through g -> f -> g"),
        "{}",
        all_text(&errs)
    );
    // The missing callee is reported once, not again by shape inference.
    assert_eq!(
        errs.iter()
            .filter(|e| e.message.contains("computation#99"))
            .count(),
        1
    );
}

#[test]
fn reducer_and_loop_signatures() {
    let (mut m, x, _) = good_module();
    let sum_s32 = add_region(&mut m, "sum_s32", S32);
    let entry = m.entry;
    let cond = m.find_computation("cond").unwrap();
    let body = m.find_computation("body").unwrap();
    let mut b = Builder::new(&mut m, entry);
    let zero = b
        .add_given(
            Op::Constant(crate::ir::Array::scalar_f32(0.0).into()),
            Shape::scalar(F32),
            &[],
        )
        .unwrap();
    b.add_with_shape(
        Op::Reduce {
            dimensions: vec![0],
            to_apply: sum_s32,
        },
        Shape::scalar(F32),
        &[x, zero],
    );
    b.add_with_shape(
        Op::AllReduce {
            collective: Default::default(),
            to_apply: sum_s32,
        },
        f32s(&[4]),
        &[x],
    );
    // Condition and body swapped.
    let st = b.shape(m_entry_while(&b)).clone();
    let init = m_entry_while_operand(&b);
    b.add_with_shape(
        Op::While {
            condition: body,
            body: cond,
        },
        st,
        &[init],
    );
    let errs = errors(&m);
    let text = all_text(&errs);
    assert!(has(&errs, "reduce: to_apply computation sum_s32 has signature (s32[], s32[]) -> s32[], but operands f32[4] with init f32[] need (f32[], f32[]) -> f32[]"), "{text}");
    assert!(
        has(&errs, "all-reduce: to_apply computation sum_s32"),
        "{text}"
    );
    assert!(has(&errs, "but a loop condition returns pred[]"), "{text}");
    assert_eq!(errs.len(), 3, "{text}");
}

/// The entry's while instruction.
fn m_entry_while(b: &Builder) -> InstrId {
    let comp = b.module.computation(b.comp);
    comp.ids()
        .iter()
        .copied()
        .find(|&i| matches!(comp.get(i).op, Op::While { .. }))
        .unwrap()
}

fn m_entry_while_operand(b: &Builder) -> InstrId {
    b.module
        .computation(b.comp)
        .get(m_entry_while(b))
        .operand(0)
}

#[test]
fn every_error_is_collected() {
    let (mut m, x, _) = good_module();
    let entry = m.entry;
    let mut b = Builder::new(&mut m, entry);
    b.add_with_shape(Op::Copy, f32s(&[1]), &[x]);
    b.add_with_shape(Op::Copy, f32s(&[2]), &[x]);
    b.add_with_shape(Op::Parameter(7), f32s(&[2]), &[]);
    let errs = errors(&m);
    assert_eq!(errs.len(), 3, "{}", all_text(&errs));
}

#[test]
fn entry_out_of_range() {
    let mut m = Module::new("t");
    m.entry = ComputationId(5);
    assert!(has(
        &errors(&m),
        "in computation t: the entry is computation#5"
    ));
}

/// A chain of 9,000 nested calls is reported (it overflowed the interpreter's stack); a chain
/// at the limit verifies.
#[test]
fn call_chains_deeper_than_the_limit_are_reported() {
    let chain = |n: usize| {
        let mut text = String::from(
            "HloModule deep\n\nc0 {\n  p0 = f32[] parameter(0)\n  ROOT n0 = f32[] negate(p0)\n}\n",
        );
        for i in 1..n {
            text += &format!(
                "\nc{i} {{\n  p{i} = f32[] parameter(0)\n  ROOT r{i} = f32[] call(p{i}), to_apply=c{}\n}}\n",
                i - 1
            );
        }
        text += &format!(
            "\nENTRY main {{\n  x = f32[] parameter(0)\n  ROOT r = f32[] call(x), to_apply=c{}\n}}\n",
            n - 1
        );
        crate::hlo_text::parse_module(&text, None).unwrap()
    };
    let text = all_text(&errors(&chain(9_000)));
    assert!(text.contains("chain of 9001 nested calls"), "{text}");
    assert!(verify(&chain(super::calls::MAX_CALL_DEPTH - 1)).is_ok());
}

/// A shape whose byte size overflows 64 bits is reported (its element count wrapped to 0, so
/// `check` accepted it and `run` wrote a file safetensors refused).
#[test]
fn shapes_whose_byte_size_overflows_are_reported() {
    let text = "HloModule big\n\nENTRY main {\n  c = f32[] constant(1)\n  ROOT b = f32[4294967296,4294967296] broadcast(c), dimensions={}\n}\n";
    let m = crate::hlo_text::parse_module(text, None).unwrap();
    let text = all_text(&errors(&m));
    assert!(
        text.contains("more bytes than a 64-bit size can count"),
        "{text}"
    );
    let fits = "HloModule big\n\nENTRY main {\n  c = f32[] constant(1)\n  ROOT b = f32[65536,65536] broadcast(c), dimensions={}\n}\n";
    assert!(verify(&crate::hlo_text::parse_module(fits, None).unwrap()).is_ok());
}
