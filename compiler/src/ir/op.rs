//! Operations of the IR, with HLO's opcode names and attributes.
//!
//! Every attribute an op carries lives in its [`Op`] variant; computations it calls are
//! referenced by [`ComputationId`].

use super::element_type::ElementType;
use super::literal::Literal;
use super::module::ComputationId;

/// Elementwise ops of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Abs,
    Negate,
    Exp,
    Expm1,
    Log,
    Log1p,
    Tanh,
    Logistic,
    Sqrt,
    Rsqrt,
    Cbrt,
    Floor,
    Ceil,
    RoundNearestEven,
    RoundNearestAfz,
    Sign,
    Not,
    Sine,
    Cosine,
    Tan,
    /// The error function (`jax.scipy.special.erf`, exact GELU).
    Erf,
    IsFinite,
    PopCnt,
    Clz,
    Real,
    Imag,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 26] = [
        UnaryOp::Abs,
        UnaryOp::Negate,
        UnaryOp::Exp,
        UnaryOp::Expm1,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Tanh,
        UnaryOp::Logistic,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Cbrt,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::RoundNearestEven,
        UnaryOp::RoundNearestAfz,
        UnaryOp::Sign,
        UnaryOp::Not,
        UnaryOp::Sine,
        UnaryOp::Cosine,
        UnaryOp::Tan,
        UnaryOp::Erf,
        UnaryOp::IsFinite,
        UnaryOp::PopCnt,
        UnaryOp::Clz,
        UnaryOp::Real,
        UnaryOp::Imag,
    ];

    pub fn name(self) -> &'static str {
        use UnaryOp::*;
        match self {
            Abs => "abs",
            Negate => "negate",
            Exp => "exponential",
            Expm1 => "exponential-minus-one",
            Log => "log",
            Log1p => "log-plus-one",
            Tanh => "tanh",
            Logistic => "logistic",
            Sqrt => "sqrt",
            Rsqrt => "rsqrt",
            Cbrt => "cbrt",
            Floor => "floor",
            Ceil => "ceil",
            RoundNearestEven => "round-nearest-even",
            RoundNearestAfz => "round-nearest-afz",
            Sign => "sign",
            Not => "not",
            Sine => "sine",
            Cosine => "cosine",
            Tan => "tan",
            Erf => "erf",
            IsFinite => "is-finite",
            PopCnt => "popcnt",
            Clz => "count-leading-zeros",
            Real => "real",
            Imag => "imag",
        }
    }

    pub fn from_name(s: &str) -> Option<UnaryOp> {
        // XLA prints `count-leading-zeros`; accept the short `clz` too.
        if s == "clz" {
            return Some(UnaryOp::Clz);
        }
        UnaryOp::ALL.iter().copied().find(|o| o.name() == s)
    }
}

/// Elementwise ops of two operands of the same shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Remainder,
    Maximum,
    Minimum,
    Power,
    Atan2,
    And,
    Or,
    Xor,
    ShiftLeft,
    ShiftRightLogical,
    ShiftRightArithmetic,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 15] = [
        BinaryOp::Add,
        BinaryOp::Subtract,
        BinaryOp::Multiply,
        BinaryOp::Divide,
        BinaryOp::Remainder,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Power,
        BinaryOp::Atan2,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::ShiftLeft,
        BinaryOp::ShiftRightLogical,
        BinaryOp::ShiftRightArithmetic,
    ];

    pub fn name(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "add",
            Subtract => "subtract",
            Multiply => "multiply",
            Divide => "divide",
            Remainder => "remainder",
            Maximum => "maximum",
            Minimum => "minimum",
            Power => "power",
            Atan2 => "atan2",
            And => "and",
            Or => "or",
            Xor => "xor",
            ShiftLeft => "shift-left",
            ShiftRightLogical => "shift-right-logical",
            ShiftRightArithmetic => "shift-right-arithmetic",
        }
    }

    pub fn from_name(s: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.iter().copied().find(|o| o.name() == s)
    }

    /// Bitwise and shift ops apply to integers (and `and`/`or`/`xor` to pred).
    pub(crate) fn is_bitwise(self) -> bool {
        use BinaryOp::*;
        matches!(
            self,
            And | Or | Xor | ShiftLeft | ShiftRightLogical | ShiftRightArithmetic
        )
    }
}

/// `direction=` of a compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComparisonDirection {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl ComparisonDirection {
    pub const ALL: [ComparisonDirection; 6] = [
        ComparisonDirection::Eq,
        ComparisonDirection::Ne,
        ComparisonDirection::Lt,
        ComparisonDirection::Le,
        ComparisonDirection::Gt,
        ComparisonDirection::Ge,
    ];

    pub fn name(self) -> &'static str {
        use ComparisonDirection::*;
        match self {
            Eq => "EQ",
            Ne => "NE",
            Lt => "LT",
            Le => "LE",
            Gt => "GT",
            Ge => "GE",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|d| d.name() == s)
    }
}

/// `type=` of a compare: how the operands are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComparisonType {
    Float,
    TotalOrder,
    Signed,
    Unsigned,
}

impl ComparisonType {
    pub const ALL: [ComparisonType; 4] = [
        ComparisonType::Float,
        ComparisonType::TotalOrder,
        ComparisonType::Signed,
        ComparisonType::Unsigned,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ComparisonType::Float => "FLOAT",
            ComparisonType::TotalOrder => "TOTALORDER",
            ComparisonType::Signed => "SIGNED",
            ComparisonType::Unsigned => "UNSIGNED",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|d| d.name() == s)
    }

    /// The comparison type XLA uses by default for an element type.
    pub fn default_for(ty: ElementType) -> ComparisonType {
        if ty.is_float() {
            ComparisonType::Float
        } else if ty.is_signed_int() {
            ComparisonType::Signed
        } else {
            ComparisonType::Unsigned
        }
    }
}

/// One spatial dimension of a window (reduce-window, select-and-scatter, convolution).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WindowDim {
    pub size: i64,
    pub stride: i64,
    pub pad_low: i64,
    pub pad_high: i64,
    /// `rhs_dilate`: dilation of the window itself.
    pub window_dilation: i64,
    /// `lhs_dilate`: dilation of the base (input) area.
    pub base_dilation: i64,
    /// `rhs_reversal`: the window is reversed.
    pub reversal: bool,
}

impl WindowDim {
    pub fn new(size: i64) -> WindowDim {
        WindowDim {
            size,
            stride: 1,
            pad_low: 0,
            pad_high: 0,
            window_dilation: 1,
            base_dilation: 1,
            reversal: false,
        }
    }
}

/// `window={size=.. stride=.. pad=.. lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Window {
    pub dims: Vec<WindowDim>,
}

/// `dim_labels=b01f_01io->b01f`: which dimension of each convolution operand plays which role.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvDimensionNumbers {
    pub input_batch: i64,
    pub input_feature: i64,
    pub input_spatial: Vec<i64>,
    pub kernel_input_feature: i64,
    pub kernel_output_feature: i64,
    pub kernel_spatial: Vec<i64>,
    pub output_batch: i64,
    pub output_feature: i64,
    pub output_spatial: Vec<i64>,
}

impl ConvDimensionNumbers {
    /// TensorFlow's 2-D layout, `dim_labels=b01f_01io->b01f`: NHWC input and output, HWIO kernel.
    pub fn nhwc_hwio() -> ConvDimensionNumbers {
        ConvDimensionNumbers {
            input_batch: 0,
            input_feature: 3,
            input_spatial: vec![1, 2],
            kernel_input_feature: 2,
            kernel_output_feature: 3,
            kernel_spatial: vec![0, 1],
            output_batch: 0,
            output_feature: 3,
            output_spatial: vec![1, 2],
        }
    }
}

/// Attributes of `convolution`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Convolution {
    pub window: Window,
    pub dims: ConvDimensionNumbers,
    pub feature_group_count: i64,
    pub batch_group_count: i64,
}

/// `lhs_batch_dims`, `lhs_contracting_dims`, ... of `dot`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct DotDimensionNumbers {
    pub lhs_batch: Vec<i64>,
    pub rhs_batch: Vec<i64>,
    pub lhs_contracting: Vec<i64>,
    pub rhs_contracting: Vec<i64>,
}

/// One dimension of `padding=lo_hi_interior`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PadDim {
    pub low: i64,
    pub high: i64,
    pub interior: i64,
}

/// One dimension of `slice={[start:limit:stride], ...}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SliceDim {
    pub start: i64,
    pub limit: i64,
    pub stride: i64,
}

/// `offset_dims`, `collapsed_slice_dims`, ... of `gather` (XLA's GatherDimensionNumbers).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct GatherDimensionNumbers {
    /// Output dimensions that index within a slice, in increasing order.
    pub offset_dims: Vec<i64>,
    /// Operand dimensions of slice size 1 that the output drops.
    pub collapsed_slice_dims: Vec<i64>,
    /// For each component of an index vector, the operand dimension it starts.
    pub start_index_map: Vec<i64>,
    /// The dimension of the indices that holds the index vectors (may equal their rank).
    pub index_vector_dim: i64,
    /// Operand dimensions indexed by the matching `start_indices_batching_dims` (dropped too).
    pub operand_batching_dims: Vec<i64>,
    pub start_indices_batching_dims: Vec<i64>,
}

/// `update_window_dims`, `inserted_window_dims`, ... of `scatter` (XLA's
/// ScatterDimensionNumbers).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ScatterDimensionNumbers {
    /// Update dimensions that index within a window, in increasing order.
    pub update_window_dims: Vec<i64>,
    /// Operand dimensions of window size 1 absent from the updates.
    pub inserted_window_dims: Vec<i64>,
    /// For each component of an index vector, the operand dimension it starts.
    pub scatter_dims_to_operand_dims: Vec<i64>,
    pub index_vector_dim: i64,
    pub input_batching_dims: Vec<i64>,
    pub scatter_indices_batching_dims: Vec<i64>,
}

/// `replica_groups={{0,1},{2,3}}`; empty means one group of all replicas.
pub type ReplicaGroups = Vec<Vec<i64>>;

/// Attributes shared by the collectives that exchange data between replicas.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct CollectiveAttrs {
    pub replica_groups: ReplicaGroups,
    pub channel_id: Option<i64>,
    pub use_global_device_ids: bool,
}

/// An operation and its attributes. Operands are held by the instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Parameter(u32),
    Constant(Literal),
    Iota {
        dimension: i64,
    },
    /// `dimensions` maps each operand dimension to an output dimension.
    Broadcast {
        dimensions: Vec<i64>,
    },
    Reshape,
    Bitcast,
    Transpose {
        permutation: Vec<i64>,
    },
    Slice {
        dims: Vec<SliceDim>,
    },
    /// Operands: the array, then one scalar start index per dimension.
    DynamicSlice {
        sizes: Vec<i64>,
    },
    /// Operands: the array, the update, then one scalar start index per dimension.
    DynamicUpdateSlice,
    Concatenate {
        dimension: i64,
    },
    /// Operands: the array and the scalar padding value.
    Pad {
        dims: Vec<PadDim>,
    },
    Reverse {
        dimensions: Vec<i64>,
    },
    Convert,
    BitcastConvert,
    Copy,
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare {
        direction: ComparisonDirection,
        comparison_type: Option<ComparisonType>,
    },
    Select,
    /// Operands: min, x, max.
    Clamp,
    /// Operands: N arrays then N init values.
    Reduce {
        dimensions: Vec<i64>,
        to_apply: ComputationId,
    },
    /// Operands: N arrays then N init values.
    ReduceWindow {
        window: Window,
        to_apply: ComputationId,
    },
    /// Operands: operand, source, init value.
    SelectAndScatter {
        window: Window,
        select: ComputationId,
        scatter: ComputationId,
    },
    Dot(DotDimensionNumbers),
    Convolution(Convolution),
    /// Operands: the array and the start indices.
    Gather {
        dims: GatherDimensionNumbers,
        slice_sizes: Vec<i64>,
        indices_are_sorted: bool,
    },
    /// Operands: the array, the scatter indices, the updates (one array: tessel has no
    /// variadic scatter). `to_apply` combines the old value with an update.
    Scatter {
        dims: ScatterDimensionNumbers,
        to_apply: ComputationId,
        indices_are_sorted: bool,
        unique_indices: bool,
    },
    Tuple,
    GetTupleElement {
        index: i64,
    },
    Call {
        to_apply: ComputationId,
    },
    While {
        condition: ComputationId,
        body: ComputationId,
    },
    /// Operand 0 is a pred (two branches: true, false) or s32 index; then one operand per branch.
    Conditional {
        branches: Vec<ComputationId>,
    },
    AllReduce {
        collective: CollectiveAttrs,
        to_apply: ComputationId,
    },
    AllGather {
        collective: CollectiveAttrs,
        dimension: i64,
    },
    ReduceScatter {
        collective: CollectiveAttrs,
        dimension: i64,
        to_apply: ComputationId,
    },
    CollectivePermute {
        channel_id: Option<i64>,
        source_target_pairs: Vec<(i64, i64)>,
    },
    /// XLA's all-to-all. The array form (`dimension` given, `dimensions={d}`): one operand,
    /// split along d into one chunk per group member; chunk i goes to member i, and the
    /// chunks received are concatenated along d in group order. The tuple form (no
    /// dimension): one operand per group member, operand i goes to member i, and the result is
    /// the tuple of what each member sent here. With a `channel_id` the groups name
    /// partitions, else replicas (XLA's modes for all-to-all).
    AllToAll {
        collective: CollectiveAttrs,
        dimension: Option<i64>,
    },
    ReplicaId,
    PartitionId,
    /// Operand: a token. Result: `(data, token)`.
    Infeed {
        config: String,
    },
    /// Operands: data and a token. Result: a token.
    Outfeed {
        config: String,
    },
    AfterAll,
    CustomCall {
        target: String,
        has_side_effect: bool,
        backend_config: Option<String>,
        called: Vec<ComputationId>,
    },
    /// XLA's TopK over the last dimension: `(values, s32 indices)` of the `k` largest (or
    /// smallest) elements of each row, ties broken by the lower index.
    TopK {
        k: i64,
        largest: bool,
    },
    /// Sorts every 1-D slice along `dimension` of its operands (all of the same dimensions)
    /// together, ordered by the comparator `to_apply`: `less(a_0, b_0, a_1, b_1, ...)` on
    /// scalars, true when the element with values `a` goes first. A tuple of the sorted
    /// operands when there are several.
    Sort {
        dimension: i64,
        is_stable: bool,
        to_apply: ComputationId,
    },
    /// A fused kernel made by the fusion pass; `kind` is XLA's `kLoop`, `kInput`, `kOutput`.
    Fusion {
        kind: String,
        calls: ComputationId,
    },
}

impl Op {
    /// The opcode as HLO text spells it.
    pub fn opcode_name(&self) -> &'static str {
        use Op::*;
        match self {
            Parameter(_) => "parameter",
            Constant(_) => "constant",
            Iota { .. } => "iota",
            Broadcast { .. } => "broadcast",
            Reshape => "reshape",
            Bitcast => "bitcast",
            Transpose { .. } => "transpose",
            Slice { .. } => "slice",
            DynamicSlice { .. } => "dynamic-slice",
            DynamicUpdateSlice => "dynamic-update-slice",
            Concatenate { .. } => "concatenate",
            Pad { .. } => "pad",
            Reverse { .. } => "reverse",
            Convert => "convert",
            BitcastConvert => "bitcast-convert",
            Copy => "copy",
            Unary(u) => u.name(),
            Binary(b) => b.name(),
            Compare { .. } => "compare",
            Select => "select",
            Clamp => "clamp",
            Reduce { .. } => "reduce",
            ReduceWindow { .. } => "reduce-window",
            SelectAndScatter { .. } => "select-and-scatter",
            Dot(_) => "dot",
            Convolution(_) => "convolution",
            Gather { .. } => "gather",
            Scatter { .. } => "scatter",
            Tuple => "tuple",
            GetTupleElement { .. } => "get-tuple-element",
            Call { .. } => "call",
            While { .. } => "while",
            Conditional { .. } => "conditional",
            AllReduce { .. } => "all-reduce",
            AllGather { .. } => "all-gather",
            ReduceScatter { .. } => "reduce-scatter",
            CollectivePermute { .. } => "collective-permute",
            AllToAll { .. } => "all-to-all",
            ReplicaId => "replica-id",
            PartitionId => "partition-id",
            Infeed { .. } => "infeed",
            Outfeed { .. } => "outfeed",
            AfterAll => "after-all",
            CustomCall { .. } => "custom-call",
            Fusion { .. } => "fusion",
            TopK { .. } => "topk",
            Sort { .. } => "sort",
        }
    }

    /// Computations this op calls, in the order HLO text names them.
    pub(crate) fn called_computations(&self) -> Vec<ComputationId> {
        use Op::*;
        match self {
            Reduce { to_apply, .. }
            | ReduceWindow { to_apply, .. }
            | Call { to_apply }
            | Scatter { to_apply, .. }
            | AllReduce { to_apply, .. }
            | ReduceScatter { to_apply, .. }
            | Sort { to_apply, .. } => vec![*to_apply],
            SelectAndScatter {
                select, scatter, ..
            } => vec![*select, *scatter],
            While { condition, body } => vec![*condition, *body],
            Conditional { branches } => branches.clone(),
            CustomCall { called, .. } => called.clone(),
            Fusion { calls, .. } => vec![*calls],
            _ => vec![],
        }
    }

    /// Rewrites every called computation id through `f` (used when computations are renumbered).
    pub(crate) fn map_called_computations(
        &mut self,
        mut f: impl FnMut(ComputationId) -> ComputationId,
    ) {
        use Op::*;
        match self {
            Reduce { to_apply, .. }
            | ReduceWindow { to_apply, .. }
            | Call { to_apply }
            | Scatter { to_apply, .. }
            | AllReduce { to_apply, .. }
            | ReduceScatter { to_apply, .. }
            | Sort { to_apply, .. } => *to_apply = f(*to_apply),
            SelectAndScatter {
                select, scatter, ..
            } => {
                *select = f(*select);
                *scatter = f(*scatter);
            }
            While { condition, body } => {
                *condition = f(*condition);
                *body = f(*body);
            }
            Conditional { branches } => branches.iter_mut().for_each(|b| *b = f(*b)),
            CustomCall { called, .. } => called.iter_mut().for_each(|b| *b = f(*b)),
            Fusion { calls, .. } => *calls = f(*calls),
            _ => {}
        }
    }

    /// Elementwise ops: every output element depends only on the same element of each operand.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(_)
                | Op::Binary(_)
                | Op::Compare { .. }
                | Op::Select
                | Op::Clamp
                | Op::Convert
                | Op::BitcastConvert
                | Op::Copy
        )
    }

    /// Ops whose effect is more than their result (they must not be removed or merged).
    pub(crate) fn has_side_effect(&self) -> bool {
        match self {
            Op::Infeed { .. } | Op::Outfeed { .. } => true,
            Op::CustomCall {
                has_side_effect, ..
            } => *has_side_effect,
            _ => false,
        }
    }

    /// Ops that exchange data between replicas.
    pub(crate) fn is_collective(&self) -> bool {
        matches!(
            self,
            Op::AllReduce { .. }
                | Op::AllGather { .. }
                | Op::ReduceScatter { .. }
                | Op::CollectivePermute { .. }
                | Op::AllToAll { .. }
        )
    }
}
