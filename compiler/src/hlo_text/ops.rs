//! Builds an [`Op`] from an opcode and its attributes; attributes the op does not interpret
//! are left in the bag for `Instruction::extra_attrs`.

use super::attributes::{
    parse_dim_labels, parse_int_list_list, parse_name_list, parse_padding, parse_replica_groups,
    parse_slice, parse_window,
};
use super::lexer::{Cursor, PResult};
use super::literal_text::parse_literal;
use super::parser::{RawAttr, RawInstr, RawOperands};
use crate::ir::{
    BinaryOp, CollectiveAttrs, ComparisonDirection, ComparisonType, ComputationId, Convolution,
    DotDimensionNumbers, GatherDimensionNumbers, Op, ScatterDimensionNumbers, UnaryOp, Window,
    WindowDim,
};
use hashbrown::HashMap;

/// The attributes of one instruction; `take` marks one as interpreted.
pub(crate) struct AttrBag<'a> {
    cursor: Cursor<'a>,
    items: Vec<(RawAttr<'a>, bool)>,
}

impl<'a> AttrBag<'a> {
    pub(super) fn new(cursor: &Cursor<'a>, attrs: &[RawAttr<'a>]) -> Self {
        AttrBag {
            cursor: cursor.clone(),
            items: attrs.iter().map(|a| (*a, false)).collect(),
        }
    }

    /// A cursor over the value of `key`, if present.
    pub(super) fn take(&mut self, key: &str) -> Option<Cursor<'a>> {
        let (attr, used) = self.items.iter_mut().find(|(a, _)| a.key == key)?;
        *used = true;
        Some(self.cursor.span(attr.value.0, attr.value.1))
    }

    /// The attributes nobody took, verbatim.
    pub(super) fn leftovers(&self) -> Vec<(String, String)> {
        self.items
            .iter()
            .filter(|(_, used)| !used)
            .map(|(a, _)| {
                (
                    a.key.to_string(),
                    self.cursor.text[a.value.0..a.value.1].to_string(),
                )
            })
            .collect()
    }
}

pub(crate) struct OpBuilder<'a, 'b> {
    pub cursor: &'b Cursor<'a>,
    pub computations: &'b HashMap<&'a str, ComputationId>,
}

/// Parses a whole attribute value with `f`, failing on anything left over.
fn whole<'a, T>(
    mut v: Cursor<'a>,
    key: &str,
    f: impl FnOnce(&mut Cursor<'a>) -> PResult<T>,
) -> PResult<T> {
    let r = f(&mut v)?;
    v.expect_end(&format!("the value of `{key}`"))?;
    Ok(r)
}

impl<'a> OpBuilder<'a, '_> {
    fn required(&self, bag: &mut AttrBag<'a>, raw: &RawInstr, key: &str) -> PResult<Cursor<'a>> {
        bag.take(key).ok_or_else(|| {
            self.cursor.error_at(
                raw.opcode_at,
                format!("`{}` needs the attribute `{key}`", raw.opcode),
            )
        })
    }

    fn int(&self, bag: &mut AttrBag<'a>, raw: &RawInstr, key: &str) -> PResult<i64> {
        whole(self.required(bag, raw, key)?, key, |c| c.int())
    }

    fn opt_int(&self, bag: &mut AttrBag<'a>, key: &str) -> PResult<Option<i64>> {
        bag.take(key)
            .map(|v| whole(v, key, |c| c.int()))
            .transpose()
    }

    fn list(&self, bag: &mut AttrBag<'a>, raw: &RawInstr, key: &str) -> PResult<Vec<i64>> {
        whole(self.required(bag, raw, key)?, key, |c| c.int_list_braced())
    }

    fn opt_list(&self, bag: &mut AttrBag<'a>, key: &str) -> PResult<Vec<i64>> {
        Ok(bag
            .take(key)
            .map(|v| whole(v, key, |c| c.int_list_braced()))
            .transpose()?
            .unwrap_or_default())
    }

    fn opt_bool(&self, bag: &mut AttrBag<'a>, key: &str) -> PResult<bool> {
        Ok(bag
            .take(key)
            .map(|v| whole(v, key, |c| c.bool()))
            .transpose()?
            .unwrap_or(false))
    }

    fn opt_string(&self, bag: &mut AttrBag<'a>, key: &str) -> PResult<Option<String>> {
        bag.take(key)
            .map(|v| whole(v, key, |c| c.string()))
            .transpose()
    }

    fn computation(&self, name: &str, at: usize) -> PResult<ComputationId> {
        self.computations.get(name).copied().ok_or_else(|| {
            self.cursor
                .error_at(at, format!("undefined computation `{name}`"))
        })
    }

    fn comp(&self, bag: &mut AttrBag<'a>, raw: &RawInstr, key: &str) -> PResult<ComputationId> {
        let v = self.required(bag, raw, key)?;
        let (name, at) = whole(v, key, |c| c.name("a computation name"))?;
        self.computation(name, at)
    }

    fn comp_list(&self, v: Cursor<'a>, key: &str) -> PResult<Vec<ComputationId>> {
        let names = whole(v, key, parse_name_list)?;
        names
            .into_iter()
            .map(|(n, at)| self.computation(n, at))
            .collect()
    }

    fn window(&self, bag: &mut AttrBag<'a>, raw: &RawInstr) -> PResult<Window> {
        whole(self.required(bag, raw, "window")?, "window", parse_window)
    }

    fn collective(&self, bag: &mut AttrBag<'a>) -> PResult<CollectiveAttrs> {
        Ok(CollectiveAttrs {
            replica_groups: bag
                .take("replica_groups")
                .map(|v| whole(v, "replica_groups", parse_replica_groups))
                .transpose()?
                .unwrap_or_default(),
            channel_id: self.opt_int(bag, "channel_id")?,
            use_global_device_ids: self.opt_bool(bag, "use_global_device_ids")?,
        })
    }

    /// `dimensions={d}` of all-gather, reduce-scatter and sort.
    fn single_dimension(&self, bag: &mut AttrBag<'a>, raw: &RawInstr) -> PResult<i64> {
        let v = self.required(bag, raw, "dimensions")?;
        let at = v.pos;
        let dims = whole(v, "dimensions", |c| c.int_list_braced())?;
        match dims[..] {
            [d] => Ok(d),
            _ => Err(self
                .cursor
                .error_at(at, format!("`{}` takes exactly one dimension", raw.opcode))),
        }
    }

    pub(super) fn build(&self, raw: &RawInstr<'a>, bag: &mut AttrBag<'a>) -> PResult<Op> {
        let op = self.build_unchecked(raw, bag)?;
        if let RawOperands::Names(names) = &raw.operands {
            check_arity(&op, names.len()).map_err(|m| {
                self.cursor
                    .error_at(raw.opcode_at, format!("`{}` {m}", raw.opcode))
            })?;
        }
        Ok(op)
    }

    fn build_unchecked(&self, raw: &RawInstr<'a>, bag: &mut AttrBag<'a>) -> PResult<Op> {
        let c = self.cursor;
        if let RawOperands::Text(s, e) = raw.operands {
            let v = c.span(s, e);
            return match raw.opcode {
                "parameter" => Ok(Op::Parameter(whole(v, "parameter", |c| c.u32())?)),
                _ => Ok(Op::Constant(whole(v, "constant", |c| {
                    parse_literal(c, &raw.shape)
                })?)),
            };
        }
        let op = match raw.opcode {
            "parameter" | "constant" => malformed(c, raw)?,
            "iota" => Op::Iota {
                dimension: self.int(bag, raw, "iota_dimension")?,
            },
            "broadcast" => Op::Broadcast {
                dimensions: self.list(bag, raw, "dimensions")?,
            },
            "reshape" => Op::Reshape,
            "bitcast" => Op::Bitcast,
            "transpose" => Op::Transpose {
                permutation: self.list(bag, raw, "dimensions")?,
            },
            "slice" => Op::Slice {
                dims: whole(self.required(bag, raw, "slice")?, "slice", parse_slice)?,
            },
            "dynamic-slice" => Op::DynamicSlice {
                sizes: self.list(bag, raw, "dynamic_slice_sizes")?,
            },
            "dynamic-update-slice" => Op::DynamicUpdateSlice,
            "concatenate" => Op::Concatenate {
                dimension: self.single_dimension(bag, raw)?,
            },
            "pad" => Op::Pad {
                dims: whole(
                    self.required(bag, raw, "padding")?,
                    "padding",
                    parse_padding,
                )?,
            },
            "reverse" => Op::Reverse {
                dimensions: self.list(bag, raw, "dimensions")?,
            },
            "convert" => Op::Convert,
            "bitcast-convert" => Op::BitcastConvert,
            "copy" => Op::Copy,
            "compare" => {
                let v = self.required(bag, raw, "direction")?;
                let at = v.pos;
                let d = whole(v, "direction", |c| Ok(c.word()))?;
                let direction = ComparisonDirection::from_name(d)
                    .ok_or_else(|| c.error_at(at, format!("unknown comparison direction `{d}`")))?;
                let comparison_type = match bag.take("type") {
                    None => None,
                    Some(v) => {
                        let at = v.pos;
                        let t = whole(v, "type", |c| Ok(c.word()))?;
                        Some(ComparisonType::from_name(t).ok_or_else(|| {
                            c.error_at(at, format!("unknown comparison type `{t}`"))
                        })?)
                    }
                };
                Op::Compare {
                    direction,
                    comparison_type,
                }
            }
            "select" => Op::Select,
            "clamp" => Op::Clamp,
            "reduce" => Op::Reduce {
                dimensions: self.list(bag, raw, "dimensions")?,
                to_apply: self.comp(bag, raw, "to_apply")?,
            },
            "reduce-window" => Op::ReduceWindow {
                window: self.window(bag, raw)?,
                to_apply: self.comp(bag, raw, "to_apply")?,
            },
            "select-and-scatter" => Op::SelectAndScatter {
                window: self.window(bag, raw)?,
                select: self.comp(bag, raw, "select")?,
                scatter: self.comp(bag, raw, "scatter")?,
            },
            "dot" => Op::Dot(DotDimensionNumbers {
                lhs_batch: self.opt_list(bag, "lhs_batch_dims")?,
                rhs_batch: self.opt_list(bag, "rhs_batch_dims")?,
                lhs_contracting: self.opt_list(bag, "lhs_contracting_dims")?,
                rhs_contracting: self.opt_list(bag, "rhs_contracting_dims")?,
            }),
            "convolution" => {
                let dims = whole(
                    self.required(bag, raw, "dim_labels")?,
                    "dim_labels",
                    parse_dim_labels,
                )?;
                let window = match bag.take("window") {
                    Some(v) => {
                        let at = v.pos;
                        let w = whole(v, "window", parse_window)?;
                        if w.dims.len() != dims.input_spatial.len() {
                            return Err(c.error_at(
                                at,
                                format!(
                                    "window has {} dimensions but dim_labels has {} spatial dimensions",
                                    w.dims.len(),
                                    dims.input_spatial.len()
                                ),
                            ));
                        }
                        w
                    }
                    None => Window {
                        dims: vec![WindowDim::new(1); dims.input_spatial.len()],
                    },
                };
                Op::Convolution(Convolution {
                    window,
                    dims,
                    feature_group_count: self.opt_int(bag, "feature_group_count")?.unwrap_or(1),
                    batch_group_count: self.opt_int(bag, "batch_group_count")?.unwrap_or(1),
                })
            }
            "gather" => Op::Gather {
                dims: GatherDimensionNumbers {
                    offset_dims: self.opt_list(bag, "offset_dims")?,
                    collapsed_slice_dims: self.opt_list(bag, "collapsed_slice_dims")?,
                    start_index_map: self.opt_list(bag, "start_index_map")?,
                    index_vector_dim: self.int(bag, raw, "index_vector_dim")?,
                    operand_batching_dims: self.opt_list(bag, "operand_batching_dims")?,
                    start_indices_batching_dims: self
                        .opt_list(bag, "start_indices_batching_dims")?,
                },
                slice_sizes: self.list(bag, raw, "slice_sizes")?,
                indices_are_sorted: self.opt_bool(bag, "indices_are_sorted")?,
            },
            "scatter" => Op::Scatter {
                dims: ScatterDimensionNumbers {
                    update_window_dims: self.opt_list(bag, "update_window_dims")?,
                    inserted_window_dims: self.opt_list(bag, "inserted_window_dims")?,
                    scatter_dims_to_operand_dims: self
                        .opt_list(bag, "scatter_dims_to_operand_dims")?,
                    index_vector_dim: self.int(bag, raw, "index_vector_dim")?,
                    input_batching_dims: self.opt_list(bag, "input_batching_dims")?,
                    scatter_indices_batching_dims: self
                        .opt_list(bag, "scatter_indices_batching_dims")?,
                },
                to_apply: self.comp(bag, raw, "to_apply")?,
                indices_are_sorted: self.opt_bool(bag, "indices_are_sorted")?,
                unique_indices: self.opt_bool(bag, "unique_indices")?,
            },
            "tuple" => Op::Tuple,
            "get-tuple-element" => Op::GetTupleElement {
                index: self.int(bag, raw, "index")?,
            },
            "call" => Op::Call {
                to_apply: self.comp(bag, raw, "to_apply")?,
            },
            "while" => Op::While {
                condition: self.comp(bag, raw, "condition")?,
                body: self.comp(bag, raw, "body")?,
            },
            "conditional" => {
                let branches = match bag.take("branch_computations") {
                    Some(v) => self.comp_list(v, "branch_computations")?,
                    None => vec![
                        self.comp(bag, raw, "true_computation")?,
                        self.comp(bag, raw, "false_computation")?,
                    ],
                };
                Op::Conditional { branches }
            }
            "all-reduce" => Op::AllReduce {
                collective: self.collective(bag)?,
                to_apply: self.comp(bag, raw, "to_apply")?,
            },
            "all-gather" => Op::AllGather {
                collective: self.collective(bag)?,
                dimension: self.single_dimension(bag, raw)?,
            },
            "reduce-scatter" => Op::ReduceScatter {
                collective: self.collective(bag)?,
                dimension: self.single_dimension(bag, raw)?,
                to_apply: self.comp(bag, raw, "to_apply")?,
            },
            "collective-permute" => {
                let v = self.required(bag, raw, "source_target_pairs")?;
                let at = v.pos;
                let pairs = whole(v, "source_target_pairs", parse_int_list_list)?;
                let source_target_pairs = pairs
                    .iter()
                    .map(|p| match p[..] {
                        [a, b] => Ok((a, b)),
                        _ => Err(c.error_at(at, "each source-target pair needs two numbers")),
                    })
                    .collect::<PResult<Vec<_>>>()?;
                Op::CollectivePermute {
                    channel_id: self.opt_int(bag, "channel_id")?,
                    source_target_pairs,
                }
            }
            "all-to-all" => Op::AllToAll {
                collective: self.collective(bag)?,
                dimension: match bag.take("dimensions") {
                    None => None,
                    Some(v) => {
                        let at = v.pos;
                        let dims = whole(v, "dimensions", |c| c.int_list_braced())?;
                        match dims[..] {
                            [d] => Some(d),
                            _ => {
                                return Err(c.error_at(
                                    at,
                                    "`all-to-all` takes exactly one dimension (its split and \
                                     concat dimension), or none in the tuple form",
                                ))
                            }
                        }
                    }
                },
            },
            "replica-id" => Op::ReplicaId,
            "partition-id" => Op::PartitionId,
            "infeed" => Op::Infeed {
                config: self.opt_string(bag, "infeed_config")?.unwrap_or_default(),
            },
            "outfeed" => Op::Outfeed {
                config: self.opt_string(bag, "outfeed_config")?.unwrap_or_default(),
            },
            "after-all" => Op::AfterAll,
            "custom-call" => {
                let target = whole(
                    self.required(bag, raw, "custom_call_target")?,
                    "custom_call_target",
                    |c| c.string(),
                )?;
                let backend_config = match bag.take("backend_config") {
                    None => None,
                    Some(mut v) => {
                        v.skip_ws();
                        if v.peek() == Some(b'"') {
                            Some(whole(v, "backend_config", |c| c.string())?)
                        } else {
                            // `backend_config={...}`: JSON kept as written.
                            Some(v.rest().to_string())
                        }
                    }
                };
                Op::CustomCall {
                    target,
                    has_side_effect: self.opt_bool(bag, "custom_call_has_side_effect")?,
                    backend_config,
                    called: match bag.take("called_computations") {
                        Some(v) => self.comp_list(v, "called_computations")?,
                        None => Vec::new(),
                    },
                }
            }
            "sort" => Op::Sort {
                dimension: self.single_dimension(bag, raw)?,
                is_stable: self.opt_bool(bag, "is_stable")?,
                to_apply: self.comp(bag, raw, "to_apply")?,
            },
            "topk" => Op::TopK {
                k: self.int(bag, raw, "k")?,
                // XLA's `largest` defaults to true.
                largest: bag
                    .take("largest")
                    .map(|v| whole(v, "largest", |c| c.bool()))
                    .transpose()?
                    .unwrap_or(true),
            },
            "fusion" => {
                let v = self.required(bag, raw, "kind")?;
                let kind = whole(v, "kind", |c| Ok(c.word().to_string()))?;
                Op::Fusion {
                    kind,
                    calls: self.comp(bag, raw, "calls")?,
                }
            }
            other => {
                if let Some(u) = UnaryOp::from_name(other) {
                    Op::Unary(u)
                } else if let Some(b) = BinaryOp::from_name(other) {
                    Op::Binary(b)
                } else if XLA_OPCODES_NOT_SUPPORTED.contains(&other) {
                    return Err(c.error_at(
                        raw.opcode_at,
                        format!("the XLA opcode `{other}` is not supported by tessel"),
                    ));
                } else {
                    return Err(c.error_at(raw.opcode_at, format!("unknown opcode `{other}`")));
                }
            }
        };
        Ok(op)
    }
}

/// Fails with "unknown opcode" (or "not supported") for a name that is no op of the IR.
pub(crate) fn check_opcode(name: &str) -> Result<(), String> {
    const NAMED: &[&str] = &[
        "parameter",
        "constant",
        "iota",
        "broadcast",
        "reshape",
        "bitcast",
        "transpose",
        "slice",
        "dynamic-slice",
        "dynamic-update-slice",
        "concatenate",
        "pad",
        "reverse",
        "convert",
        "bitcast-convert",
        "copy",
        "compare",
        "select",
        "clamp",
        "reduce",
        "reduce-window",
        "select-and-scatter",
        "dot",
        "convolution",
        "gather",
        "scatter",
        "tuple",
        "get-tuple-element",
        "call",
        "while",
        "conditional",
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "collective-permute",
        "all-to-all",
        "replica-id",
        "partition-id",
        "infeed",
        "outfeed",
        "after-all",
        "custom-call",
        "fusion",
        "topk",
        "sort",
    ];
    if NAMED.contains(&name)
        || UnaryOp::from_name(name).is_some()
        || BinaryOp::from_name(name).is_some()
    {
        Ok(())
    } else if XLA_OPCODES_NOT_SUPPORTED.contains(&name) {
        Err(format!(
            "the XLA opcode `{name}` is not supported by tessel"
        ))
    } else {
        Err(format!("unknown opcode `{name}`"))
    }
}

/// `parameter` and `constant` are read as text by the parser; written any other way they are
/// malformed.
fn malformed(c: &Cursor, raw: &RawInstr) -> PResult<Op> {
    Err(c.error_at(raw.opcode_at, format!("malformed `{}`", raw.opcode)))
}

/// Opcodes XLA has that tessel's IR does not, for a clearer message than "unknown".
const XLA_OPCODES_NOT_SUPPORTED: &[&str] = &[
    "map",
    "rng",
    "rng-bit-generator",
    "rng-get-and-update-state",
    "reduce-precision",
    "cholesky",
    "triangular-solve",
    "fft",
    "dynamic-reshape",
    "get-dimension-size",
    "set-dimension-size",
    "add-dependency",
    "optimization-barrier",
    "collective-broadcast",
    "send",
    "send-done",
    "recv",
    "recv-done",
    "domain",
    "batch-norm-training",
    "batch-norm-inference",
    "batch-norm-grad",
    "complex",
    "stochastic-convert",
    "top-k",
    "async-start",
    "async-update",
    "async-done",
    "copy-start",
    "copy-done",
    "all-reduce-start",
    "all-reduce-done",
    "all-gather-start",
    "all-gather-done",
    "collective-permute-start",
    "collective-permute-done",
];

/// Checks the operand count an op needs.
fn check_arity(op: &Op, n: usize) -> Result<(), String> {
    let exactly = |k: usize| {
        if n == k {
            Ok(())
        } else {
            Err(format!(
                "takes {k} operand{}, found {n}",
                if k == 1 { "" } else { "s" }
            ))
        }
    };
    let at_least = |k: usize| {
        if n >= k {
            Ok(())
        } else {
            Err(format!("takes at least {k} operand(s), found {n}"))
        }
    };
    match op {
        Op::Parameter(_) | Op::Constant(_) | Op::Iota { .. } | Op::ReplicaId | Op::PartitionId => {
            exactly(0)
        }
        Op::Broadcast { .. }
        | Op::Reshape
        | Op::Bitcast
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Reverse { .. }
        | Op::Convert
        | Op::BitcastConvert
        | Op::Copy
        | Op::Unary(_)
        | Op::GetTupleElement { .. }
        | Op::While { .. }
        | Op::CollectivePermute { .. }
        | Op::TopK { .. }
        | Op::Infeed { .. } => exactly(1),
        Op::Binary(_) | Op::Compare { .. } | Op::Pad { .. } | Op::Dot(_) | Op::Outfeed { .. } => {
            exactly(2)
        }
        Op::Convolution(_) | Op::Gather { .. } => exactly(2),
        // Variadic scatter (N arrays, indices, N updates) is rejected by shape inference with
        // a clearer message than an arity error.
        Op::Scatter { .. } => {
            if n >= 3 && n % 2 == 1 {
                Ok(())
            } else {
                Err(format!(
                    "takes N arrays, the indices and N updates, found {n} operands"
                ))
            }
        }
        Op::Select | Op::Clamp | Op::SelectAndScatter { .. } => exactly(3),
        Op::DynamicSlice { .. } | Op::Concatenate { .. } | Op::AllGather { .. } => at_least(1),
        Op::AllReduce { .. } | Op::ReduceScatter { .. } | Op::Sort { .. } => at_least(1),
        Op::AllToAll { dimension, .. } => match dimension {
            Some(_) => exactly(1),
            None => at_least(1),
        },
        Op::DynamicUpdateSlice => at_least(2),
        Op::Reduce { .. } | Op::ReduceWindow { .. } => {
            if n >= 2 && n.is_multiple_of(2) {
                Ok(())
            } else {
                Err(format!(
                    "takes N arrays and N init values, found {n} operands"
                ))
            }
        }
        Op::Conditional { branches } => exactly(branches.len() + 1),
        Op::Tuple | Op::Call { .. } | Op::AfterAll | Op::CustomCall { .. } | Op::Fusion { .. } => {
            Ok(())
        }
    }
}
