//! Unit tests of the legality rules on hand-built modules.

use super::diagnostic::code_name;
use super::*;
use crate::ir::{
    Array, ArrayData, ArrayShape, BinaryOp, Computation, ComputationId, ElementType, Instruction,
    Literal, Metadata, Module, Op, Shape, SourceLocation, UNKNOWN_DIM,
};
use ElementType::{F32, F64, S32, S64, U32, U64};

/// Builds the entry computation of a module instruction by instruction.
struct Build {
    m: Module,
}

impl Build {
    fn new() -> Build {
        Build {
            m: Module::new("t"),
        }
    }

    fn add_in(
        &mut self,
        c: ComputationId,
        op: Op,
        shape: Shape,
        operands: &[InstrId],
        line: u32,
    ) -> InstrId {
        let text_line = 100 + self.m.next_name_suffix as u32;
        let name = self.m.unique_name(op.opcode_name());
        let mut i = Instruction::new(name, op, shape);
        if line > 0 {
            i.metadata = Metadata {
                source: Some(SourceLocation {
                    file: "model.py".into(),
                    line,
                    column: 1,
                }),
                ..Metadata::default()
            };
        }
        i.text_line = Some(text_line);
        self.m.computation_mut(c).add(i, operands)
    }

    fn add(&mut self, op: Op, shape: Shape, operands: &[InstrId], line: u32) -> InstrId {
        let e = self.m.entry;
        self.add_in(e, op, shape, operands, line)
    }

    fn scalar(&mut self, ty: ElementType, v: f64) -> InstrId {
        let a = Array::new(ArrayShape::scalar(ty), ArrayData::from_f64_fn(ty, 1, |_| v));
        self.add(Op::Constant(Literal::Array(a)), Shape::scalar(ty), &[], 0)
    }

    fn codes(&self) -> Vec<(&'static str, String)> {
        check_legality(&self.m)
            .into_iter()
            .map(|d| (d.code, d.instruction.split(' ').next().unwrap().to_string()))
            .collect()
    }
}

fn arr(ty: ElementType, dims: &[i64]) -> Shape {
    Shape::array(ty, dims)
}

#[test]
fn a_32_bit_static_module_is_legal() {
    let mut b = Build::new();
    let x = b.add(Op::Parameter(0), arr(F32, &[4]), &[], 1);
    let y = b.add(Op::Binary(BinaryOp::Add), arr(F32, &[4]), &[x, x], 2);
    let _ = b.add(Op::Convert, arr(S32, &[4]), &[y], 3);
    assert!(check_legality(&b.m).is_empty());
    assert_eq!(render(&[], &b.m), "");
}

#[test]
fn every_f64_value_is_reported_and_inherited_ones_briefly() {
    let mut b = Build::new();
    let x = b.add(Op::Parameter(0), arr(F64, &[4, 3]), &[], 10);
    let two = b.scalar(F64, 2.0);
    let m = b.add(
        Op::Binary(BinaryOp::Multiply),
        arr(F64, &[4, 3]),
        &[x, x],
        11,
    );
    let _ = b.add(Op::Convert, arr(F32, &[4, 3]), &[m], 12);
    let d = check_legality(&b.m);
    assert_eq!(d.len(), 3, "{d:#?}");
    assert!(d.iter().all(|d| d.code == SIXTY_FOUR_BIT));
    assert_eq!(d[0].instruction, "parameter.1 = f64[4,3] parameter(0)");
    assert_eq!(d[0].message, "f64 value is not supported by the device");
    assert!(d[0].hint.contains("f32") && d[0].origin.is_none());
    // The constant has no location: it sorts at its first located user (none: it is
    // unused), after everything located.
    assert_eq!(
        d[1].instruction,
        "multiply.3 = f64[4,3] multiply(parameter.1, parameter.1)"
    );
    assert_eq!(d[1].origin.as_deref(), Some("parameter.1"));
    assert!(d[1].hint.is_empty());
    assert_eq!(d[2].instruction, "constant.2 = f64[] constant(2)");
    assert_eq!(d[2].location, None);
    assert_eq!(d[2].position(&b.m).as_deref(), Some("<hlo>:102"));
    let _ = two;
}

#[test]
fn constant_64_bit_integers_are_legal() {
    // threefry's pattern: u64 iota * 5 + iota >> 32, converted to u32.
    let mut b = Build::new();
    let i = b.add(Op::Iota { dimension: 0 }, arr(U64, &[3]), &[], 0);
    let bi = b.add(
        Op::Broadcast {
            dimensions: vec![0],
        },
        arr(U64, &[3, 5]),
        &[i],
        0,
    );
    let c = b.scalar(U64, 32.0);
    let bc = b.add(
        Op::Broadcast { dimensions: vec![] },
        arr(U64, &[3, 5]),
        &[c],
        0,
    );
    let sh = b.add(
        Op::Binary(BinaryOp::ShiftRightLogical),
        arr(U64, &[3, 5]),
        &[bi, bc],
        0,
    );
    let _ = b.add(Op::Convert, arr(U32, &[3, 5]), &[sh], 0);
    assert!(b.codes().is_empty(), "{:?}", b.codes());
}

#[test]
fn integers_from_run_time_data_are_illegal() {
    let mut b = Build::new();
    let x = b.add(Op::Parameter(0), arr(F32, &[3]), &[], 1);
    let u = b.add(Op::Convert, arr(U64, &[3]), &[x], 2);
    let k = b.scalar(U64, 7.0);
    let kb = b.add(
        Op::Broadcast { dimensions: vec![] },
        arr(U64, &[3]),
        &[k],
        0,
    );
    let s = b.add(Op::Binary(BinaryOp::Add), arr(U64, &[3]), &[u, kb], 3);
    let _ = b.add(Op::Convert, arr(U32, &[3]), &[s], 4);
    let d = check_legality(&b.m);
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!(d[0].message, "u64 value is not supported by the device");
    assert!(
        d[0].note.as_deref().unwrap().contains("`parameter.1`"),
        "{:?}",
        d[0].note
    );
    assert!(d[0].hint.contains("s32"));
    assert_eq!(d[1].origin.as_deref(), Some("convert.2"));
}

#[test]
fn a_reduction_of_64_bit_integers_runs_on_the_device() {
    // x64_mean's `iota` s64 -> reduce: the iota folds, the reduce does not.
    let mut b = Build::new();
    let mut region = Computation::new("region");
    let rid =
        b.m.add_computation(std::mem::replace(&mut region, Computation::new("")));
    let p0 = b.add_in(rid, Op::Parameter(0), Shape::scalar(S64), &[], 0);
    let p1 = b.add_in(rid, Op::Parameter(1), Shape::scalar(S64), &[], 0);
    let _ = b.add_in(
        rid,
        Op::Binary(BinaryOp::Add),
        Shape::scalar(S64),
        &[p0, p1],
        5,
    );
    let i = b.add(Op::Iota { dimension: 0 }, arr(S64, &[3]), &[], 5);
    let z = b.scalar(S64, 0.0);
    let r = b.add(
        Op::Reduce {
            dimensions: vec![0],
            to_apply: rid,
        },
        Shape::scalar(S64),
        &[i, z],
        5,
    );
    let _ = b.add(Op::Convert, Shape::scalar(F32), &[r], 6);
    let d = check_legality(&b.m);
    let names: Vec<String> = d.iter().map(|d| d.instruction.clone()).collect();
    assert_eq!(d.len(), 4, "{names:#?}");
    let reduce = d
        .iter()
        .find(|d| d.instruction.starts_with("reduce"))
        .unwrap();
    assert!(reduce.origin.is_none());
    assert!(reduce
        .note
        .as_deref()
        .unwrap()
        .contains("`reduce` is evaluated at run time"));
    let param = d
        .iter()
        .find(|d| d.instruction.contains("parameter(0)"))
        .unwrap();
    assert_eq!(param.origin.as_deref(), Some("reduce.6"));
    assert_eq!(param.computation, "region");
    assert!(!d.iter().any(|d| d.instruction.starts_with("iota")));
}

#[test]
fn dynamic_dimensions_are_reported_with_their_origin() {
    let mut b = Build::new();
    let mut shape = ArrayShape::new(F32, &[UNKNOWN_DIM, 784]);
    shape.dynamic = [true, false].into_iter().collect();
    let x = b.add(Op::Parameter(0), Shape::Array(shape.clone()), &[], 3);
    let t = b.add(
        Op::Unary(crate::ir::UnaryOp::Tanh),
        Shape::Array(shape),
        &[x],
        4,
    );
    let _ = t;
    let d = check_legality(&b.m);
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].code, DYNAMIC_SHAPE);
    assert_eq!(
        d[0].message,
        "dynamic shape f32[?,784]: dimension 0 has no fixed size"
    );
    assert!(d[0].hint.contains("drop_remainder=True"));
    assert_eq!(d[1].origin.as_deref(), Some("parameter.1"));
}

#[test]
fn unknown_custom_calls_are_unsupported_and_sdy_markers_are_not() {
    let mut b = Build::new();
    let x = b.add(Op::Parameter(0), arr(F32, &[4]), &[], 1);
    let cc = |target: &str| Op::CustomCall {
        target: target.into(),
        has_side_effect: false,
        backend_config: None,
        called: vec![],
    };
    let g = b.add(cc("xla.sdy.GlobalToLocalShape"), arr(F32, &[4]), &[x], 2);
    let _ = b.add(cc("Sharding"), arr(F32, &[4]), &[g], 3);
    let _ = b.add(cc("xla.sdy.LocalToGlobalShape"), arr(F32, &[4]), &[g], 4);
    let d = check_legality(&b.m);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].code, UNSUPPORTED_OP);
    assert!(d[0].message.contains("`Sharding`"));
    assert!(d[0]
        .instruction
        .ends_with("custom_call_target=\"Sharding\""));
    assert!(d[0].hint.contains("host call"));
}

#[test]
fn problems_of_every_kind_come_in_source_order() {
    let mut b = Build::new();
    let mut dynamic = ArrayShape::new(F32, &[UNKNOWN_DIM]);
    dynamic.dynamic = [true].into_iter().collect();
    // Created out of source order on purpose.
    let late = b.add(Op::Parameter(0), arr(S64, &[2]), &[], 30);
    let early = b.add(Op::Parameter(1), Shape::Array(dynamic), &[], 10);
    let mid = b.add(Op::Parameter(2), arr(F64, &[2]), &[], 20);
    let _ = (late, early, mid);
    let d = check_legality(&b.m);
    let lines: Vec<u32> = d
        .iter()
        .map(|d| d.location.as_ref().unwrap().line)
        .collect();
    assert_eq!(lines, vec![10, 20, 30]);
    assert_eq!(
        d.iter().map(|d| d.code).collect::<Vec<_>>(),
        vec![DYNAMIC_SHAPE, SIXTY_FOUR_BIT, SIXTY_FOUR_BIT]
    );
}

#[test]
fn unlocated_instructions_sort_at_their_first_located_user() {
    let mut b = Build::new();
    let x = b.add(Op::Parameter(0), arr(F64, &[2]), &[], 0); // no location
    let c = b.scalar(F64, 1.0);
    let cb = b.add(
        Op::Broadcast { dimensions: vec![] },
        arr(F64, &[2]),
        &[c],
        0,
    );
    let late = b.add(Op::Binary(BinaryOp::Add), arr(F64, &[2]), &[cb, cb], 9);
    let early = b.add(Op::Binary(BinaryOp::Multiply), arr(F64, &[2]), &[x, x], 5);
    let _ = (late, early);
    let order: Vec<String> = check_legality(&b.m)
        .into_iter()
        .map(|d| d.instruction.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(
        order,
        vec![
            "parameter.1",
            "multiply.5",
            "constant.2",
            "broadcast.3",
            "add.4"
        ]
    );
}

#[test]
fn rendering_looks_like_rustc() {
    let mut b = Build::new();
    b.m.source_file = Some("m.hlo".into());
    let x = b.add(Op::Parameter(0), arr(F64, &[2]), &[], 7);
    let _ = b.add(
        Op::Unary(crate::ir::UnaryOp::Negate),
        arr(F64, &[2]),
        &[x],
        8,
    );
    let d = check_legality(&b.m);
    let text = render(&d, &b.m);
    let expected = "\
error[E0201]: f64 value is not supported by the device
  --> model.py:7:1
    |
101 | parameter.1 = f64[2] parameter(0)
    |
    = note: in computation `main.t`, m.hlo:101
    = hint: cast to f32 (with JAX, keep jax_enable_x64 off)

error[E0201]: f64 value is not supported by the device
  --> model.py:8:1
    |
102 | negate.2 = f64[2] negate(parameter.1)
    |
    = note: in computation `main.t`, m.hlo:102
    = note: follows from `parameter.1`, reported on its own; fixing it fixes this

error: module `t` cannot run on the device: 2 problems (2 64-bit-type)
";
    assert_eq!(text, expected);
    assert_eq!(code_name("E0101"), "dynamic-shape");
}

#[test]
fn gather_and_scatter_are_legal() {
    // TPUs run gather and scatter: an embedding lookup and its scatter-add gradient pass.
    let text = "HloModule t\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
                ROOT r = f32[] add(a, b)\n}\n\nENTRY main {\n  t = f32[20,8] parameter(0)\n  \
                i = s32[10,1] parameter(1)\n  \
                g = f32[10,8] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, \
                start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}\n  \
                ROOT s = f32[20,8] scatter(t, i, g), update_window_dims={1}, \
                inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, \
                to_apply=add\n}\n";
    let m = crate::hlo_text::parse_module(text, None).unwrap();
    assert!(crate::verifier::verify(&m).is_ok());
    assert_eq!(check_legality(&m), vec![]);
}
