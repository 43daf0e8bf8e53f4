//! Property test: random modules (random ops, attribute values, constants, strings and
//! metadata) print to text that parses back to the same module and prints the same again.
//! Shapes are arbitrary: the text format does not check them, the verifier does.

use super::*;
use crate::ir::*;
use proptest::prelude::*;

fn arb_element_type() -> impl Strategy<Value = ElementType> {
    proptest::sample::select(ElementType::ALL.to_vec())
}

fn arb_array_shape() -> impl Strategy<Value = ArrayShape> {
    (
        arb_element_type(),
        proptest::collection::vec((0i64..5, 0u8..6), 0..4),
    )
        .prop_map(|(t, dims)| {
            let mut s = ArrayShape::new(t, &dims.iter().map(|d| d.0).collect::<Vec<_>>());
            // Now and then a dynamic dimension: bounded, or unknown.
            if dims.iter().any(|d| d.1 == 0) {
                s.dynamic = dims.iter().map(|d| d.1 == 0).collect();
                for (i, d) in dims.iter().enumerate() {
                    if d.1 == 0 && d.0 == 0 {
                        s.dims[i] = UNKNOWN_DIM;
                    }
                }
            }
            s
        })
}

fn arb_shape() -> impl Strategy<Value = Shape> {
    let leaf = prop_oneof![
        8 => arb_array_shape().prop_map(Shape::Array),
        1 => Just(Shape::Token),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        proptest::collection::vec(inner, 0..7).prop_map(Shape::Tuple)
    })
}

/// A string with quotes, backslashes, control characters and non-ASCII text.
fn arb_text() -> impl Strategy<Value = String> {
    "[a-z\"\\\\\n\t\u{1}\u{7f}é∂'/ .{}=,]{0,12}"
}

fn arb_constant() -> impl Strategy<Value = Literal> {
    (
        arb_element_type(),
        proptest::collection::vec(0i64..4, 0..3),
        any::<u64>(),
    )
        .prop_map(|(t, dims, seed)| {
            let shape = ArrayShape::new(t, &dims);
            let n = shape.element_count() as usize;
            // Raw bit patterns, so that NaN payloads, -0, infinities and subnormals show up.
            let mut x = seed | 1;
            let mut bits = Vec::with_capacity(n * t.byte_size());
            for _ in 0..n * t.byte_size() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bits.push(x as u8);
            }
            let mut data = ArrayData::from_le_bytes(t, &bits).unwrap();
            if let ArrayData::Pred(v) = &mut data {
                v.iter_mut()
                    .enumerate()
                    .for_each(|(i, b)| *b = bits[i] & 1 == 1);
            }
            Literal::Array(Array { shape, data })
        })
}

fn arb_window() -> impl Strategy<Value = Window> {
    proptest::collection::vec(
        (
            1i64..5,
            1i64..3,
            -2i64..3,
            -2i64..3,
            1i64..3,
            1i64..3,
            any::<bool>(),
        ),
        0..4,
    )
    .prop_map(|dims| Window {
        dims: dims
            .into_iter()
            .map(|(size, stride, lo, hi, wd, bd, rev)| WindowDim {
                size,
                stride,
                pad_low: lo,
                pad_high: hi,
                window_dilation: wd,
                base_dilation: bd,
                reversal: rev,
            })
            .collect(),
    })
}

fn arb_conv() -> impl Strategy<Value = Convolution> {
    (0usize..4).prop_flat_map(|n| {
        let perm = move || Just((0..n as i64 + 2).collect::<Vec<_>>()).prop_shuffle();
        (perm(), perm(), perm(), 1i64..4, 1i64..4).prop_map(move |(a, b, c, f, g)| Convolution {
            window: Window {
                dims: vec![WindowDim::new(2); n],
            },
            dims: ConvDimensionNumbers {
                input_batch: a[0],
                input_feature: a[1],
                input_spatial: a[2..].to_vec(),
                kernel_input_feature: b[0],
                kernel_output_feature: b[1],
                kernel_spatial: b[2..].to_vec(),
                output_batch: c[0],
                output_feature: c[1],
                output_spatial: c[2..].to_vec(),
            },
            feature_group_count: f,
            batch_group_count: g,
        })
    })
}

fn ints() -> impl Strategy<Value = Vec<i64>> {
    proptest::collection::vec(-3i64..9, 0..4)
}

fn arb_collective() -> impl Strategy<Value = CollectiveAttrs> {
    (
        proptest::collection::vec(proptest::collection::vec(0i64..8, 1..4), 0..3),
        proptest::option::of(1i64..9),
        any::<bool>(),
    )
        .prop_map(|(g, c, u)| CollectiveAttrs {
            replica_groups: g,
            channel_id: c,
            use_global_device_ids: u,
        })
}

/// An op with its operand count; `r` is the id of a reducer computation.
fn arb_op(r: ComputationId) -> impl Strategy<Value = (Op, usize)> {
    prop_oneof![
        arb_constant().prop_map(|l| (Op::Constant(l), 0)),
        (0i64..4).prop_map(|d| (Op::Iota { dimension: d }, 0)),
        ints().prop_map(|d| (Op::Broadcast { dimensions: d }, 1)),
        ints().prop_map(|d| (Op::Transpose { permutation: d }, 1)),
        ints().prop_map(|d| (Op::Reverse { dimensions: d }, 1)),
        ints().prop_map(|d| (Op::DynamicSlice { sizes: d }, 2)),
        (0i64..3).prop_map(|d| (Op::Concatenate { dimension: d }, 2)),
        proptest::collection::vec((-3i64..4, -3i64..4, 1i64..4), 0..3).prop_map(|v| (
            Op::Slice {
                dims: v
                    .into_iter()
                    .map(|(s, l, st)| SliceDim {
                        start: s,
                        limit: l,
                        stride: st
                    })
                    .collect()
            },
            1
        )),
        proptest::collection::vec((-3i64..4, -3i64..4, 0i64..3), 0..3).prop_map(|v| (
            Op::Pad {
                dims: v
                    .into_iter()
                    .map(|(l, h, i)| PadDim {
                        low: l,
                        high: h,
                        interior: i
                    })
                    .collect()
            },
            2
        )),
        proptest::sample::select(UnaryOp::ALL.to_vec()).prop_map(|u| (Op::Unary(u), 1)),
        proptest::sample::select(BinaryOp::ALL.to_vec()).prop_map(|b| (Op::Binary(b), 2)),
        (
            proptest::sample::select(ComparisonDirection::ALL.to_vec()),
            proptest::option::of(proptest::sample::select(ComparisonType::ALL.to_vec()))
        )
            .prop_map(|(d, t)| (
                Op::Compare {
                    direction: d,
                    comparison_type: t
                },
                2
            )),
        Just((Op::Select, 3)),
        Just((Op::Convert, 1)),
        ints().prop_map(move |d| (
            Op::Reduce {
                dimensions: d,
                to_apply: r
            },
            2
        )),
        arb_window().prop_map(move |w| (
            Op::ReduceWindow {
                window: w,
                to_apply: r
            },
            2
        )),
        arb_window().prop_map(move |w| (
            Op::SelectAndScatter {
                window: w,
                select: r,
                scatter: r
            },
            3
        )),
        (ints(), ints(), ints(), ints()).prop_map(|(a, b, c, d)| (
            Op::Dot(DotDimensionNumbers {
                lhs_batch: a,
                rhs_batch: b,
                lhs_contracting: c,
                rhs_contracting: d
            }),
            2
        )),
        arb_conv().prop_map(|c| (Op::Convolution(c), 2)),
        (0usize..4).prop_map(|n| (Op::Tuple, n)),
        (0i64..3).prop_map(|i| (Op::GetTupleElement { index: i }, 1)),
        Just((Op::Call { to_apply: r }, 2)),
        Just((
            Op::While {
                condition: r,
                body: r
            },
            1
        )),
        (1usize..4).prop_map(move |n| (
            Op::Conditional {
                branches: vec![r; n]
            },
            n + 1
        )),
        arb_collective().prop_map(move |c| (
            Op::AllReduce {
                collective: c,
                to_apply: r
            },
            1
        )),
        (arb_collective(), 0i64..3).prop_map(|(c, d)| (
            Op::AllGather {
                collective: c,
                dimension: d
            },
            1
        )),
        (
            proptest::option::of(0i64..5),
            proptest::collection::vec((0i64..4, 0i64..4), 0..4)
        )
            .prop_map(|(c, p)| (
                Op::CollectivePermute {
                    channel_id: c,
                    source_target_pairs: p
                },
                1
            )),
        (arb_collective(), proptest::option::of(0i64..3), 1usize..4).prop_map(|(c, d, n)| (
            Op::AllToAll {
                // all-to-all has no use_global_device_ids attribute.
                collective: CollectiveAttrs {
                    use_global_device_ids: false,
                    ..c
                },
                dimension: d
            },
            if d.is_some() { 1 } else { n }
        )),
        Just((Op::ReplicaId, 0)),
        arb_text().prop_map(|s| (Op::Infeed { config: s }, 1)),
        arb_text().prop_map(|s| (Op::Outfeed { config: s }, 2)),
        (0usize..3).prop_map(|n| (Op::AfterAll, n)),
        (
            arb_text(),
            any::<bool>(),
            proptest::option::of("[a-z0-9_]{0,6}"),
            0usize..3
        )
            .prop_map(move |(t, s, b, n)| (
                Op::CustomCall {
                    target: t,
                    has_side_effect: s,
                    backend_config: b,
                    called: vec![r; n]
                },
                2
            )),
        "k[A-Z][a-z]{2,5}".prop_map(move |k| (Op::Fusion { kind: k, calls: r }, 1)),
    ]
}

fn arb_metadata() -> impl Strategy<Value = Metadata> {
    (
        proptest::option::of(arb_text()),
        proptest::option::of(arb_text()),
        proptest::option::of((arb_text(), 0u32..500, 0u32..80)),
        proptest::option::of(1u32..20),
    )
        .prop_map(|(t, n, s, f)| Metadata {
            op_type: t,
            op_name: n,
            source: s.map(|(file, line, column)| SourceLocation { file, line, column }),
            stack_frame_id: f,
        })
}

fn arb_module() -> impl Strategy<Value = Module> {
    let reducer = ComputationId(0);
    (
        proptest::collection::vec(arb_shape(), 1..4),
        proptest::collection::vec(
            (arb_op(reducer), arb_shape(), arb_metadata(), any::<u64>()),
            1..12,
        ),
        proptest::option::of(1i64..9),
    )
        .prop_map(|(params, instrs, replicas)| {
            let mut m = Module::new("random");
            let mut red = Computation::new("reducer.1");
            let a = red.add(
                Instruction::new("a.1", Op::Parameter(0), Shape::scalar(ElementType::F32)),
                &[],
            );
            let b = red.add(
                Instruction::new("b.1", Op::Parameter(1), Shape::scalar(ElementType::F32)),
                &[],
            );
            red.add(
                Instruction::new(
                    "s.1",
                    Op::Binary(BinaryOp::Add),
                    Shape::scalar(ElementType::F32),
                ),
                &[a, b],
            );
            let mut entry = Computation::new("main.2");
            let mut ids = Vec::new();
            for (i, s) in params.into_iter().enumerate() {
                ids.push(entry.add(
                    Instruction::new(format!("p.{i}"), Op::Parameter(i as u32), s),
                    &[],
                ));
            }
            for (k, ((op, arity), shape, metadata, pick)) in instrs.into_iter().enumerate() {
                let operands: Vec<InstrId> = (0..arity)
                    .map(|j| ids[((pick >> (j * 8)) as usize) % ids.len()])
                    .collect();
                // A constant's text is read at the instruction's shape, so they must agree.
                let shape = match &op {
                    Op::Constant(l) => l.shape(),
                    _ => shape,
                };
                let mut instr = Instruction::new(format!("i.{k}"), op, shape);
                instr.metadata = metadata;
                ids.push(entry.add(instr, &operands));
            }
            m.computations = vec![red, entry];
            m.entry = ComputationId(1);
            m.replica_count = replicas;
            m
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn printed_modules_parse_back_the_same(m in arb_module()) {
        for canonical in [false, true] {
            let opts = PrintOptions { canonical };
            let text = print_module(&m, &opts);
            let again = parse_module(&text, None).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(print_module(&again, &opts), text.clone());
            if !canonical {
                if let Some(d) = module_difference(&m, &again) {
                    return Err(TestCaseError::fail(format!("{d}\n{text}")));
                }
            }
        }
    }
}
