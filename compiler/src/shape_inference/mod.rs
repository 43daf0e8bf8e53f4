//! Shape inference: the result shape of every op from its operands' shapes and attributes,
//! with HLO's semantics (no implicit broadcasting, exact element types).
//!
//! Errors name the op and every operand shape involved, and say what was expected.
//! Ops whose result shape HLO text states rather than implies (broadcast, reshape, convert,
//! constant, ...) are checked against the stated shape by [`check_given_shape`].
//! Dynamic dimensions (`f32[<=8]`, `f32[?]`) propagate to the result so that the legality
//! checker can explain them; an unknown size is compatible with any size.

mod collectives;
mod control_flow;
mod convolution;
mod dot;
mod elementwise;
mod gather;
mod given;
mod io;
mod reduce;
mod shape_ops;
mod sort;
mod topk;
mod util;
mod window;

pub(crate) use given::check_given_shape;

use crate::ir::{Module, Op, Shape};

/// Why an op cannot be applied to operands of these shapes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ShapeError {
    pub message: String,
}

impl ShapeError {
    pub fn new(message: impl Into<String>) -> ShapeError {
        ShapeError {
            message: message.into(),
        }
    }
}

/// Whether `op`'s result shape comes from HLO text (or the caller) rather than from its
/// operands: parameter, constant, iota, broadcast, reshape, bitcast, convert, bitcast-convert,
/// infeed, custom-call.
pub fn result_shape_is_given(op: &Op) -> bool {
    matches!(
        op,
        Op::Parameter(_)
            | Op::Constant(_)
            | Op::Iota { .. }
            | Op::Broadcast { .. }
            | Op::Reshape
            | Op::Bitcast
            | Op::Convert
            | Op::BitcastConvert
            | Op::Infeed { .. }
            | Op::CustomCall { .. }
    )
}

/// The shape `op` produces from operands of shapes `operands`. `module` gives the signatures
/// of called computations (reduce's `to_apply`, `call`, `while`, ...), which are checked too.
pub(crate) fn infer_shape(
    module: &Module,
    op: &Op,
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    use Op::*;
    match op {
        Unary(u) => elementwise::unary(*u, operands),
        Binary(b) => elementwise::binary(*b, operands),
        Compare {
            direction,
            comparison_type,
        } => elementwise::compare(*direction, *comparison_type, operands),
        Select => elementwise::select(operands),
        Clamp => elementwise::clamp(operands),
        Copy => elementwise::copy(operands),
        Transpose { permutation } => shape_ops::transpose(permutation, operands),
        Slice { dims } => shape_ops::slice(dims, operands),
        DynamicSlice { sizes } => shape_ops::dynamic_slice(sizes, operands),
        DynamicUpdateSlice => shape_ops::dynamic_update_slice(operands),
        Concatenate { dimension } => shape_ops::concatenate(*dimension, operands),
        Pad { dims } => shape_ops::pad(dims, operands),
        Reverse { dimensions } => shape_ops::reverse(dimensions, operands),
        TopK { k, .. } => topk::topk(*k, operands),
        Sort {
            dimension,
            to_apply,
            ..
        } => sort::sort(module, *dimension, *to_apply, operands),
        Reduce {
            dimensions,
            to_apply,
        } => reduce::reduce(module, dimensions, *to_apply, operands),
        ReduceWindow { window, to_apply } => {
            reduce::reduce_window(module, window, *to_apply, operands)
        }
        SelectAndScatter {
            window,
            select,
            scatter,
        } => reduce::select_and_scatter(module, window, *select, *scatter, operands),
        Dot(dn) => dot::dot(dn, operands),
        Gather {
            dims, slice_sizes, ..
        } => gather::gather(dims, slice_sizes, operands),
        Scatter { dims, to_apply, .. } => gather::scatter(module, dims, *to_apply, operands),
        Convolution(conv) => convolution::convolution(conv, operands),
        Tuple => control_flow::tuple(operands),
        GetTupleElement { index } => control_flow::get_tuple_element(*index, operands),
        Call { to_apply } => control_flow::call(module, *to_apply, operands),
        While { condition, body } => control_flow::while_loop(module, *condition, *body, operands),
        Conditional { branches } => control_flow::conditional(module, branches, operands),
        Fusion { calls, .. } => control_flow::fusion(module, *calls, operands),
        AllReduce {
            collective,
            to_apply,
        } => collectives::all_reduce(module, collective, *to_apply, operands),
        AllGather {
            collective,
            dimension,
        } => collectives::all_gather(module, collective, *dimension, operands),
        ReduceScatter {
            collective,
            dimension,
            to_apply,
        } => collectives::reduce_scatter(module, collective, *dimension, *to_apply, operands),
        CollectivePermute {
            source_target_pairs,
            ..
        } => collectives::collective_permute(module, source_target_pairs, operands),
        AllToAll {
            collective,
            dimension,
        } => collectives::all_to_all(module, collective, *dimension, operands),
        ReplicaId => io::device_id("replica-id", operands),
        PartitionId => io::device_id("partition-id", operands),
        AfterAll => io::after_all(operands),
        Outfeed { .. } => io::outfeed(operands),
        Parameter(_)
        | Constant(_)
        | Iota { .. }
        | Broadcast { .. }
        | Reshape
        | Bitcast
        | Convert
        | BitcastConvert
        | Infeed { .. }
        | CustomCall { .. } => Err(ShapeError::new(format!(
            "{}: the result shape cannot be inferred from the operands; it must be given \
                 (use Builder::add_given, which checks it with check_given_shape)",
            op.opcode_name()
        ))),
    }
}
