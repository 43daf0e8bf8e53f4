//! What the parser makes of the text: attribute values land in the right fields (a round trip
//! alone would not notice two fields swapped consistently), plus errors and one-line printing.

use super::literal_text::literal_to_text;
use super::printer::print_instruction;
use super::*;
use crate::ir::{
    ArrayData, CollectiveAttrs, ComparisonDirection, ComparisonType, ElementType, Literal, Op,
    Shape,
};

fn parse(text: &str) -> Module {
    parse_module(text, Some("t.hlo")).unwrap_or_else(|e| panic!("{e}"))
}

/// The op of the instruction named `name` in the entry.
fn op_of<'m>(m: &'m Module, name: &str) -> &'m Op {
    let e = m.entry();
    &e.get(e.find(name).unwrap_or_else(|| panic!("no {name}")))
        .op
}

fn entry_with(body: &str) -> String {
    // The reducer's names are its own: a name the entry reused would be renamed there.
    format!("HloModule t\n\nadd {{\n  ra = f32[] parameter(0)\n  rb = f32[] parameter(1)\n  ROOT rs = f32[] add(ra, rb)\n}}\n\nENTRY main {{\n{body}\n}}\n")
}

#[test]
fn convolution_dim_labels_and_window() {
    let m = parse(&entry_with(
        "  x = f32[2,4,4,3]{3,2,1,0} parameter(0)\n  k = f32[3,4,4,5]{3,2,1,0} parameter(1)\n  \
         ROOT c = f32[4,4,3,5]{3,2,1,0} convolution(x, k), window={size=2x3 stride=1x2 pad=0_1x2_3 lhs_dilate=1x2 rhs_dilate=3x1 rhs_reversal=0x1}, dim_labels=f01b_i01o->01bf, feature_group_count=3, batch_group_count=2",
    ));
    let Op::Convolution(conv) = op_of(&m, "c") else {
        panic!("not a convolution")
    };
    let d = &conv.dims;
    assert_eq!(
        (d.input_batch, d.input_feature, &d.input_spatial[..]),
        (3, 0, &[1, 2][..])
    );
    assert_eq!(
        (
            d.kernel_input_feature,
            d.kernel_output_feature,
            &d.kernel_spatial[..]
        ),
        (0, 3, &[1, 2][..])
    );
    assert_eq!(
        (d.output_batch, d.output_feature, &d.output_spatial[..]),
        (2, 3, &[0, 1][..])
    );
    let w = &conv.window.dims;
    assert_eq!((w[0].size, w[1].size), (2, 3));
    assert_eq!((w[0].stride, w[1].stride), (1, 2));
    assert_eq!(
        (w[0].pad_low, w[0].pad_high, w[1].pad_low, w[1].pad_high),
        (0, 1, 2, 3)
    );
    assert_eq!((w[0].base_dilation, w[1].base_dilation), (1, 2));
    assert_eq!((w[0].window_dilation, w[1].window_dilation), (3, 1));
    assert_eq!((w[0].reversal, w[1].reversal), (false, true));
    assert_eq!((conv.feature_group_count, conv.batch_group_count), (3, 2));
}

#[test]
fn shape_op_attributes() {
    let m = parse(&entry_with(
        "  x = f32[4,6]{1,0} parameter(0)\n  z = f32[] constant(0)\n  \
         p = f32[9,8]{1,0} pad(x, z), padding=1_2_1x0_2\n  \
         s = f32[2,2]{1,0} slice(x), slice={[0:4:2], [1:3]}\n  \
         c = pred[4,6]{1,0} compare(x, x), direction=GE, type=TOTALORDER\n  \
         d = f32[4,4]{1,0} dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n  \
         ROOT t = (f32[9,8]{1,0}, f32[2,2]{1,0}) tuple(p, s)",
    ));
    let Op::Pad { dims } = op_of(&m, "p") else {
        panic!()
    };
    assert_eq!((dims[0].low, dims[0].high, dims[0].interior), (1, 2, 1));
    assert_eq!((dims[1].low, dims[1].high, dims[1].interior), (0, 2, 0));
    let Op::Slice { dims } = op_of(&m, "s") else {
        panic!()
    };
    assert_eq!((dims[0].start, dims[0].limit, dims[0].stride), (0, 4, 2));
    assert_eq!((dims[1].start, dims[1].limit, dims[1].stride), (1, 3, 1));
    assert_eq!(
        op_of(&m, "c"),
        &Op::Compare {
            direction: ComparisonDirection::Ge,
            comparison_type: Some(ComparisonType::TotalOrder)
        }
    );
    let Op::Dot(d) = op_of(&m, "d") else { panic!() };
    assert_eq!(
        (&d.lhs_contracting[..], &d.rhs_contracting[..]),
        (&[1][..], &[1][..])
    );
    assert!(d.lhs_batch.is_empty() && d.rhs_batch.is_empty());
}

#[test]
fn replica_groups_in_both_forms() {
    let m = parse(&entry_with(
        "  x = f32[4]{0} parameter(0)\n  \
         a = f32[4]{0} all-reduce(x), channel_id=2, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add\n  \
         b = f32[4]{0} all-reduce(x), replica_groups=[2,2]<=[4], to_apply=add\n  \
         c = f32[4]{0} all-reduce(x), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=add\n  \
         d = f32[4]{0} all-reduce(x), replica_groups=[1,6]<=[2,3]T(1,0), to_apply=add\n  \
         ROOT p = f32[4]{0} collective-permute(x), source_target_pairs={{0,1},{1,0}}",
    ));
    let groups = |n: &str| match op_of(&m, n) {
        Op::AllReduce { collective, .. } => collective.clone(),
        _ => panic!(),
    };
    let a = groups("a");
    assert_eq!(a.replica_groups, vec![vec![0, 1], vec![2, 3]]);
    assert_eq!((a.channel_id, a.use_global_device_ids), (Some(2), true));
    assert_eq!(groups("b").replica_groups, vec![vec![0, 1], vec![2, 3]]);
    assert_eq!(groups("c").replica_groups, vec![vec![0, 2], vec![1, 3]]);
    assert_eq!(groups("d").replica_groups, vec![vec![0, 3, 1, 4, 2, 5]]);
    assert_eq!(
        op_of(&m, "p"),
        &Op::CollectivePermute {
            channel_id: None,
            source_target_pairs: vec![(0, 1), (1, 0)]
        }
    );
}

#[test]
fn all_to_all_in_array_and_tuple_forms() {
    let m = parse(&entry_with(
        "  x = f32[4,2]{1,0} parameter(0)\n  \
         a = f32[4,2]{1,0} all-to-all(x), channel_id=3, replica_groups={{0,1},{2,3}}, dimensions={0}\n  \
         ROOT t = (f32[4,2]{1,0}, f32[4,2]{1,0}) all-to-all(x, a), replica_groups={{1,0}}",
    ));
    assert_eq!(
        op_of(&m, "a"),
        &Op::AllToAll {
            collective: CollectiveAttrs {
                replica_groups: vec![vec![0, 1], vec![2, 3]],
                channel_id: Some(3),
                use_global_device_ids: false,
            },
            dimension: Some(0),
        }
    );
    assert_eq!(
        op_of(&m, "t"),
        &Op::AllToAll {
            collective: CollectiveAttrs {
                replica_groups: vec![vec![1, 0]],
                ..Default::default()
            },
            dimension: None,
        }
    );
    let e = m.entry();
    let printed = print_instruction(&m, m.entry, e.find("a").unwrap());
    assert!(
        printed
            .contains("all-to-all(x), channel_id=3, replica_groups={{0,1},{2,3}}, dimensions={0}"),
        "{printed}"
    );
    let two_dims = parse_module(
        &entry_with(
            "  x = f32[4,2]{1,0} parameter(0)\n  \
             ROOT a = f32[4,2]{1,0} all-to-all(x), replica_groups={{0,1}}, dimensions={0,1}",
        ),
        None,
    )
    .unwrap_err();
    assert!(
        two_dims.to_string().contains("exactly one dimension"),
        "{two_dims}"
    );
    let two_operands = parse_module(
        &entry_with(
            "  x = f32[4]{0} parameter(0)\n  \
             ROOT a = f32[4]{0} all-to-all(x, x), replica_groups={{0,1}}, dimensions={0}",
        ),
        None,
    )
    .unwrap_err();
    assert!(
        two_operands
            .to_string()
            .contains("takes 1 operand, found 2"),
        "{two_operands}"
    );
}

#[test]
fn constants_hold_exact_values() {
    let m = parse(&entry_with(
        "  u = u32[2]{0} constant({4294967295, 7})\n  \
         n = f32[3]{0} constant({-0, -nan(0x5), 1e-05})\n  \
         a = s32[2,2]{1,0} constant({ {1, 2}, {3, 4} })\n  \
         ROOT t = (u32[2]{0}, f32[3]{0}, s32[2,2]{1,0}) tuple(u, n, a)",
    ));
    let data = |n: &str| match op_of(&m, n) {
        Op::Constant(Literal::Array(a)) => a.data.clone(),
        _ => panic!(),
    };
    assert_eq!(data("u"), ArrayData::U32(vec![u32::MAX, 7]));
    let ArrayData::F32(f) = data("n") else {
        panic!()
    };
    assert_eq!(f[0].to_bits(), 0x8000_0000);
    assert_eq!(f[1].to_bits(), 0xff80_0005);
    assert_eq!(f[2], 1e-5);
    assert_eq!(data("a"), ArrayData::S32(vec![1, 2, 3, 4]));
    let l = match op_of(&m, "n") {
        Op::Constant(l) => l,
        _ => panic!(),
    };
    assert_eq!(literal_to_text(l), "{-0, -nan(0x5), 1e-05}");
}

#[test]
fn module_structure_names_and_lines() {
    let text = "HloModule jit_f, replica_count=2, num_partitions=1, frontend_attributes={mesh={a=1}}, is_scheduled=true\n\
        \n\
        FileNames\n1 \"f.py\"\n\
        \n\
        FunctionNames\n1 \"f\"\n\
        \n\
        FileLocations\n1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=3 end_column=9}\n\
        \n\
        StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\
        \n\
        ENTRY main.9 {\n\
        \x20 y.12 = f32[?,3]{1,0} parameter(1)\n\
        \x20 x.11 = f32[<=4]{0} parameter(0), metadata={op_name=\"x\" stack_frame_id=1}\n\
        \x20 c.13 = f32[<=4]{0} call(x.11), to_apply=later.2\n\
        }\n\
        \n\
        later.2 {\n\
        \x20 p.1 = f32[<=4]{0} parameter(0)\n\
        \x20 n.30 = f32[<=4]{0} negate(p.1), metadata={op_type=\"Neg\" source_file=\"g.py\" source_line=4}\n\
        }\n";
    let m = parse(text);
    assert_eq!(m.name, "jit_f");
    assert_eq!((m.replica_count, m.num_partitions), (Some(2), Some(1)));
    assert_eq!(
        m.frontend_attributes,
        vec![("mesh".to_string(), "{a=1}".to_string())]
    );
    assert_eq!(
        m.extra_attrs,
        vec![("is_scheduled".to_string(), "true".to_string())]
    );
    assert_eq!(m.entry().name, "main.9");
    assert!(m.next_name_suffix > 30, "note_name saw n.30");
    let e = m.entry();
    let x = e.get(e.parameter(0).unwrap());
    assert_eq!(x.name, "x.11");
    assert_eq!(x.text_line, Some(17));
    assert_eq!(m.source_location(x).unwrap().to_string(), "f.py:7:3");
    let y = e.get(e.parameter(1).unwrap());
    assert_eq!(
        y.shape.as_array().unwrap().dynamic.to_vec(),
        vec![true, false]
    );
    assert_eq!(y.shape.dims(), &[crate::ir::UNKNOWN_DIM, 3]);
    // Without ROOT the last instruction is the root; `later.2` is called before it is defined.
    assert_eq!(e.get(e.root()).name, "c.13");
    let later = m.find_computation("later.2").unwrap();
    assert_eq!(op_of(&m, "c.13"), &Op::Call { to_apply: later });
    let lc = m.computation(later);
    let n = lc.get(lc.root());
    assert_eq!(n.metadata.op_type.as_deref(), Some("Neg"));
    assert_eq!(m.source_location(n).unwrap().to_string(), "g.py:4");
    assert_eq!(
        print_instruction(&m, later, lc.root()),
        "n.30 = f32[<=4]{0} negate(p.1)"
    );
}

#[test]
fn custom_calls_and_kept_attributes() {
    let m = parse(&entry_with(
        "  x = f32[2]{0} parameter(0), sharding={devices=[2]0,1}\n  \
         ROOT c = f32[2]{0} custom-call(x), custom_call_target=\"foo\", custom_call_has_side_effect=true, called_computations={add}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={k=\"a\\\"b\"}, backend_config=\"cfg\"",
    ));
    let e = m.entry();
    let x = e.get(e.parameter(0).unwrap());
    assert_eq!(x.extra_attr("sharding"), Some("{devices=[2]0,1}"));
    let c = e.get(e.root());
    assert_eq!(
        c.op,
        Op::CustomCall {
            target: "foo".into(),
            has_side_effect: true,
            backend_config: Some("cfg".into()),
            called: vec![m.find_computation("add").unwrap()],
        }
    );
    assert_eq!(
        c.extra_attrs,
        vec![
            (
                "api_version".to_string(),
                "API_VERSION_TYPED_FFI".to_string()
            ),
            (
                "frontend_attributes".to_string(),
                "{k=\"a\\\"b\"}".to_string()
            ),
        ]
    );
    let fa = parse_frontend_attributes(c.extra_attr("frontend_attributes").unwrap()).unwrap();
    assert_eq!(fa, vec![("k".to_string(), "a\"b".to_string())]);
    let line = print_instruction(&m, m.entry, e.root());
    assert!(
        line.ends_with("frontend_attributes={k=\"a\\\"b\"}, backend_config=\"cfg\""),
        "{line}"
    );
}

#[test]
fn errors_point_at_the_text() {
    let err = parse_module(
        "HloModule m\nENTRY e {\n  x = f32[2] parametr(0)\n}\n",
        Some("m.hlo"),
    )
    .unwrap_err();
    assert_eq!((err.line, err.column), (3, 14));
    assert_eq!(err.message, "unknown opcode `parametr`");
    assert_eq!(
        err.to_string(),
        "m.hlo:3:14: unknown opcode `parametr`\n  x = f32[2] parametr(0)\n             ^"
    );
    let err = parse_module("HloModule m\nENTRY e {\n", None).unwrap_err();
    assert!(
        err.to_string().starts_with("2:9: unterminated `{`"),
        "{err}"
    );
    assert!(parse_module("", None).is_err());
    assert!(parse_module("HloModule m", None)
        .unwrap_err()
        .message
        .contains("no computations"));
}

#[test]
fn tokens_and_tuples() {
    let m = parse(&entry_with(
        "  t = token[] after-all()\n  \
         i = ((f32[2]{0}, s32[]), token[]) infeed(t), infeed_config=\"q\"\n  \
         ROOT o = token[] outfeed(i, t), outfeed_config=\"r\"",
    ));
    let e = m.entry();
    assert_eq!(e.get(e.find("t").unwrap()).shape, Shape::Token);
    assert_eq!(
        e.get(e.find("i").unwrap()).shape,
        Shape::Tuple(vec![
            Shape::Tuple(vec![
                Shape::array(ElementType::F32, &[2]),
                Shape::scalar(ElementType::S32)
            ]),
            Shape::Token
        ])
    );
    assert_eq!(op_of(&m, "i"), &Op::Infeed { config: "q".into() });
    assert_eq!(op_of(&m, "o"), &Op::Outfeed { config: "r".into() });
}

#[test]
fn windows_line_endings_and_byte_order_mark() {
    let text = "\u{feff}HloModule m\r\n\r\nENTRY e {\r\n  x = f32[2]{0} parameter(0)\r\n  ROOT y = f32[2]{0} negate(x), metadata={op_name=\"n\"}\r\n}\r\n";
    let m = parse(text);
    let e = m.entry();
    assert_eq!(e.get(e.root()).metadata.op_name.as_deref(), Some("n"));
    assert_eq!(e.get(e.root()).text_line, Some(5));
    let err = parse_module(
        "HloModule m\r\nENTRY e {\r\n  ROOT y = f32[2]{0} nope()\r\n}\r\n",
        None,
    )
    .unwrap_err();
    assert_eq!(err.source_line, "  ROOT y = f32[2]{0} nope()");
}

#[test]
fn tuple_constants() {
    let m = parse(&entry_with(
        "  ROOT c = (f32[], (s32[2]{0}, pred[])) constant((1.5, ({1, 2}, true)))",
    ));
    let Op::Constant(l) = op_of(&m, "c") else {
        panic!()
    };
    assert_eq!(literal_to_text(l), "(1.5, ({1, 2}, true))");
    assert_eq!(l.shape(), m.entry().get(m.entry().root()).shape);
}

#[test]
fn bad_iota_groups_and_inconsistent_literals() {
    let bad = parse_module(
        &entry_with("  x = f32[4]{0} parameter(0)\n  ROOT a = f32[4]{0} all-reduce(x), replica_groups=[-1,-4]<=[4], to_apply=add"),
        None,
    )
    .unwrap_err();
    assert!(bad.message.contains("positive sizes"), "{bad}");
    // Data that does not fill the shape prints flat instead of walking the shape.
    let l = Literal::Array(crate::ir::Array {
        shape: crate::ir::ArrayShape::new(ElementType::S32, &[1 << 40, 2]),
        data: ArrayData::S32(vec![1, 2]),
    });
    assert_eq!(literal_to_text(&l), "{1, 2}");
}

/// Deeply nested tuple shapes end in an error, not a stack overflow: in an instruction's shape,
/// in an operand's long-form shape and in `entry_computation_layout` (found by fuzzing).
#[test]
fn deep_tuple_nesting_is_an_error() {
    let deep = |d: usize| format!("{}f32[]{}", "(".repeat(d), ")".repeat(d));
    let texts = [
        format!("HloModule t\n\nENTRY main {{\n  ROOT p = {} parameter(0)\n}}\n", deep(15_000)),
        format!(
            "HloModule t\n\nENTRY main {{\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate({} a)\n}}\n",
            deep(15_000)
        ),
        format!(
            "HloModule t, entry_computation_layout={{({})->f32[]}}\n\nENTRY main {{\n  ROOT a = f32[] parameter(0)\n}}\n",
            deep(15_000)
        ),
    ];
    for text in &texts {
        let e = parse_module(text, Some("t.hlo")).unwrap_err().to_string();
        assert!(e.contains("nest more than 256 levels"), "{e}");
    }
    // Nesting at the limit still parses.
    let ok = format!(
        "HloModule t\n\nENTRY main {{\n  ROOT p = {} parameter(0)\n}}\n",
        deep(256)
    );
    parse_module(&ok, Some("t.hlo")).unwrap_or_else(|e| panic!("{e}"));
}

/// A layout must order the shape's own dimensions (`{5,0}` on a rank-2 shape was accepted).
#[test]
fn impossible_layouts_are_errors() {
    for layout in ["{5,0}", "{0,0}", "{0}", "{1,0,2}"] {
        let text =
            format!("HloModule t\n\nENTRY main {{\n  ROOT p = f32[2,2]{layout} parameter(0)\n}}\n");
        let e = parse_module(&text, Some("t.hlo")).unwrap_err().to_string();
        assert!(
            e.contains("is not a permutation of the 2 dimensions"),
            "{layout}: {e}"
        );
    }
    for layout in ["{1,0}", "{0,1}", "{1,0:T(8,128)}", "{}"] {
        let text =
            format!("HloModule t\n\nENTRY main {{\n  ROOT p = f32[2,2]{layout} parameter(0)\n}}\n");
        parse_module(&text, Some("t.hlo")).unwrap_or_else(|e| panic!("{layout}: {e}"));
    }
}

/// A file that is not UTF-8 gets the line and column of the first bad byte (it got neither).
#[test]
fn invalid_utf8_has_a_position() {
    let path = std::env::temp_dir().join(format!("tessel_bad_utf8_{}.hlo", std::process::id()));
    std::fs::write(
        &path,
        b"HloModule t\n\nENTRY main {\n  ROOT p = f32[] parameter(0) \xff\xfe\n}\n",
    )
    .unwrap();
    let e = parse_module_file(&path).unwrap_err();
    std::fs::remove_file(&path).ok();
    assert_eq!((e.line, e.column), (4, 31), "{e}");
    assert!(e.to_string().contains("invalid UTF-8 (byte 0xff)"), "{e}");
}

/// A name reused in another computation is renamed as XLA renames it (jaxlib 0.10.2's
/// `hlo_module_from_text` printed these names for this module); operands follow, the
/// verifier then passes, and the printed module parses back to the same names. A name
/// defined twice in one computation is still an error, as in XLA.
#[test]
fn names_reused_across_computations_are_renamed_as_xla_does() {
    let text = "HloModule m\n\n\
        add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
        add.1 {\n  a.1 = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a.1, b)\n}\n\n\
        ENTRY main {\n  a = f32[4] parameter(0)\n  s.1 = f32[4] parameter(1)\n  z = f32[] constant(0)\n  \
        r1 = f32[] reduce(a, z), dimensions={0}, to_apply=add\n  \
        r2 = f32[] reduce(s.1, z), dimensions={0}, to_apply=add.1\n  ROOT s = f32[] add(r1, r2)\n}\n";
    let m = parse(text);
    let names = |c: &crate::ir::Computation| -> Vec<String> {
        c.instructions().map(|(_, i)| i.name.clone()).collect()
    };
    let add1 = m.computation(m.find_computation("add.1").unwrap());
    assert_eq!(names(add1), ["a.1", "b.1", "s.1"]);
    let main = m.entry();
    let mut got = names(main);
    got.sort();
    assert_eq!(got, ["a.2", "r1", "r2", "s.2", "s.3", "z"]);
    // The operands are the renamed instructions.
    let r2 = main.get(main.find("r2").unwrap());
    assert_eq!(main.get(r2.operands()[0]).name, "s.2");
    assert_eq!(main.get(main.root()).name, "s.3");
    crate::verifier::verify(&m).unwrap_or_else(|e| panic!("{e:?}"));
    let printed = print_module(&m, &PrintOptions::default());
    assert_eq!(names(parse(&printed).entry()), names(main));

    let twice = entry_with(
        "  a = f32[4] parameter(0)\n  a = f32[4] negate(a)\n  ROOT r = f32[4] add(a, a)",
    );
    let err = parse_module(&twice, Some("t.hlo")).unwrap_err().to_string();
    assert!(
        err.contains("instruction `a` is defined twice in computation `main`"),
        "{err}"
    );
}

/// `sort` parses with its attributes, prints them back as XLA does, and a comparator that
/// does not take two scalars per operand, or a dimension the operands lack, is reported with
/// both signatures or the shape.
#[test]
fn sort_attributes_and_its_errors() {
    let text = |operands: &str, shape: &str, dim: i64| {
        format!(
            "HloModule m\n\nless {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
             ROOT lt = pred[] compare(a, b), direction=LT\n}}\n\nENTRY main {{\n  \
             x = f32[4,8] parameter(0)\n  i = s32[4,8] iota(), iota_dimension=1\n  \
             ROOT s = {shape} sort({operands}), dimensions={{{dim}}}, is_stable=true, to_apply=less\n}}\n"
        )
    };
    let m = parse(&text("x", "f32[4,8]", 1));
    let Op::Sort {
        dimension,
        is_stable,
        ..
    } = op_of(&m, "s")
    else {
        panic!("not a sort");
    };
    assert_eq!((*dimension, *is_stable), (1, true));
    crate::verifier::verify(&m).unwrap_or_else(|e| panic!("{e:?}"));
    let printed = print_module(&m, &PrintOptions::default());
    assert!(
        printed.contains("sort(x), dimensions={1}, is_stable=true, to_apply=less"),
        "{printed}"
    );
    let messages = |t: String| -> String {
        let errs = crate::verifier::verify(&parse(&t)).expect_err("invalid");
        format!("{errs:?}")
    };
    let two = messages(text("x, i", "(f32[4,8], s32[4,8])", 1));
    assert!(
        two.contains("comparator less has signature (f32[], f32[]) -> pred[], but the operands need (f32[], f32[], s32[], s32[]) -> pred[]"),
        "{two}"
    );
    let dim = messages(text("x", "f32[4,8]", 2));
    assert!(
        dim.contains("sort: dimension 2 is not a dimension of f32[4,8]"),
        "{dim}"
    );
}
