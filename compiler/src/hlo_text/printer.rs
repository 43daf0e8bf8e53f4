//! Prints modules as HLO text in XLA's layout: header, debug tables, computations callees
//! first, instructions in topological order, operands as plain names.

use super::attributes::{
    dim_labels_to_text, frontend_attributes_to_text, int_list_list_to_text, int_list_to_text,
    metadata_to_text, padding_to_text, quote, slice_to_text, window_to_text,
};
use super::canonical::Names;
use super::literal_text::literal_to_text;
use super::shape_text::shape_to_text;
use crate::ir::{
    CollectiveAttrs, Computation, ComputationId, DebugInfo, InstrId, Module, Op, Shape,
};
use std::fmt::Write;

/// What [`print_module`] writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrintOptions {
    /// Canonical text for golden files: stable names, no metadata, no debug tables.
    /// The default (`false`) prints everything the module holds.
    pub canonical: bool,
}

pub fn print_module(m: &Module, opts: &PrintOptions) -> String {
    let names = if opts.canonical {
        Names::canonical(m)
    } else {
        Names::as_written(m)
    };
    let mut out = String::new();
    write_header(&mut out, m);
    if !opts.canonical {
        write_debug_info(&mut out, &m.debug_info);
    }
    for cid in m.computation_post_order() {
        out.push('\n');
        write_computation(&mut out, m, cid, &names, !opts.canonical);
    }
    out
}

#[cfg(test)]
/// One instruction on one line (without metadata), for diagnostics.
pub(crate) fn print_instruction(m: &Module, comp: ComputationId, id: InstrId) -> String {
    let names = Names::as_written(m);
    instruction_line(m, comp, id, &names, false)
}

fn write_header(out: &mut String, m: &Module) {
    let _ = write!(out, "HloModule {}", m.name);
    let entry = m.entry();
    // A module being built (or broken by a pass) may lack a root; print what there is.
    if entry.has_root() && entry.contains(entry.root()) {
        let (params, result) = m.entry_signature();
        let params: Vec<String> = params.iter().map(shape_to_text).collect();
        let _ = write!(
            out,
            ", entry_computation_layout={{({})->{}}}",
            join_indexed(&params),
            shape_to_text(&result)
        );
    }
    if let Some(n) = m.replica_count {
        let _ = write!(out, ", replica_count={n}");
    }
    if let Some(n) = m.num_partitions {
        let _ = write!(out, ", num_partitions={n}");
    }
    if !m.frontend_attributes.is_empty() {
        let _ = write!(
            out,
            ", frontend_attributes={}",
            frontend_attributes_to_text(&m.frontend_attributes)
        );
    }
    for (k, v) in &m.extra_attrs {
        let _ = write!(out, ", {k}={v}");
    }
    out.push('\n');
}

/// `a, b, c, d, e, /*index=5*/f` as XLA writes long lists of shapes.
fn join_indexed(items: &[String]) -> String {
    let mut s = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
            if i % 5 == 0 {
                let _ = write!(s, "/*index={i}*/");
            }
        }
        s.push_str(item);
    }
    s
}

fn write_debug_info(out: &mut String, d: &DebugInfo) {
    if !d.file_names.is_empty() {
        out.push_str("\nFileNames\n");
        for (id, name) in &d.file_names {
            let _ = writeln!(out, "{id} {}", quote(name));
        }
    }
    if !d.function_names.is_empty() {
        out.push_str("\nFunctionNames\n");
        for (id, name) in &d.function_names {
            let _ = writeln!(out, "{id} {}", quote(name));
        }
    }
    if !d.file_locations.is_empty() {
        out.push_str("\nFileLocations\n");
        for (id, l) in &d.file_locations {
            let _ = writeln!(
                out,
                "{id} {{file_name_id={} function_name_id={} line={} end_line={} column={} end_column={}}}",
                l.file_name_id, l.function_name_id, l.line, l.end_line, l.column, l.end_column
            );
        }
    }
    if !d.stack_frames.is_empty() {
        out.push_str("\nStackFrames\n");
        for (id, f) in &d.stack_frames {
            let _ = writeln!(
                out,
                "{id} {{file_location_id={} parent_frame_id={}}}",
                f.file_location_id, f.parent_frame_id
            );
        }
    }
    if !d.is_empty() {
        out.push('\n');
    }
}

fn write_computation(out: &mut String, m: &Module, cid: ComputationId, names: &Names, full: bool) {
    let comp = m.computation(cid);
    if cid == m.entry {
        out.push_str("ENTRY ");
    }
    let _ = writeln!(out, "{} {{", names.computation(cid));
    let root = comp.has_root().then(|| comp.root());
    for id in comp.post_order() {
        out.push_str(if Some(id) == root { "  ROOT " } else { "  " });
        out.push_str(&instruction_line(m, cid, id, names, full));
        out.push('\n');
    }
    out.push_str("}\n");
}

/// `name = shape opcode(operands), attributes` (with metadata when `full`).
fn instruction_line(
    m: &Module,
    cid: ComputationId,
    id: InstrId,
    names: &Names,
    full: bool,
) -> String {
    let comp = m.computation(cid);
    let instr = comp.get(id);
    let mut s = format!(
        "{} = {} {}(",
        names.instruction(cid, id, comp),
        shape_to_text(&instr.shape),
        instr.op.opcode_name()
    );
    match &instr.op {
        Op::Parameter(n) => {
            let _ = write!(s, "{n}");
        }
        Op::Constant(l) => s.push_str(&literal_to_text(l)),
        _ => {
            let operands: Vec<String> = instr
                .operands()
                .iter()
                .map(|&o| names.instruction(cid, o, comp))
                .collect();
            s.push_str(&operands.join(", "));
        }
    }
    s.push(')');
    let mut attrs = op_attributes(comp, id, names);
    let mut backend_config = None;
    for (k, v) in &instr.extra_attrs {
        if matches!(instr.op, Op::Outfeed { .. }) && k == "outfeed_shape" {
            continue; // printed with the op's attributes
        }
        if k == "backend_config" {
            backend_config = Some(v.clone());
        } else {
            attrs.push(format!("{k}={v}"));
        }
    }
    if full && !instr.metadata.is_empty() {
        attrs.push(format!("metadata={}", metadata_to_text(&instr.metadata)));
    }
    if let Op::CustomCall {
        backend_config: Some(b),
        ..
    } = &instr.op
    {
        backend_config = Some(if b.starts_with('{') && b.ends_with('}') {
            b.clone()
        } else {
            quote(b)
        });
    }
    if let Some(b) = backend_config {
        attrs.push(format!("backend_config={b}"));
    }
    for a in attrs {
        s.push_str(", ");
        s.push_str(&a);
    }
    s
}

fn collective_attrs(out: &mut Vec<String>, c: &CollectiveAttrs) {
    if let Some(id) = c.channel_id {
        out.push(format!("channel_id={id}"));
    }
    out.push(format!(
        "replica_groups={}",
        int_list_list_to_text(&c.replica_groups)
    ));
}

/// The attributes an op carries, in XLA's order.
fn op_attributes(comp: &Computation, id: InstrId, names: &Names) -> Vec<String> {
    let instr = comp.get(id);
    let cname = |c: ComputationId| names.computation(c).to_string();
    let mut a = Vec::new();
    match &instr.op {
        Op::Parameter(_)
        | Op::Constant(_)
        | Op::Reshape
        | Op::Bitcast
        | Op::DynamicUpdateSlice
        | Op::Convert
        | Op::BitcastConvert
        | Op::Copy
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Select
        | Op::Clamp
        | Op::Tuple
        | Op::ReplicaId
        | Op::PartitionId
        | Op::AfterAll => {}
        Op::Iota { dimension } => a.push(format!("iota_dimension={dimension}")),
        Op::TopK { k, largest } => {
            a.push(format!("k={k}"));
            a.push(format!("largest={largest}"));
        }
        Op::Sort {
            dimension,
            is_stable,
            to_apply,
        } => {
            a.push(format!("dimensions={{{dimension}}}"));
            if *is_stable {
                a.push("is_stable=true".to_string());
            }
            a.push(format!("to_apply={}", cname(*to_apply)));
        }
        Op::Broadcast { dimensions } | Op::Reverse { dimensions } => {
            a.push(format!("dimensions={}", int_list_to_text(dimensions)))
        }
        Op::Transpose { permutation } => {
            a.push(format!("dimensions={}", int_list_to_text(permutation)))
        }
        Op::Slice { dims } => a.push(format!("slice={}", slice_to_text(dims))),
        Op::DynamicSlice { sizes } => {
            a.push(format!("dynamic_slice_sizes={}", int_list_to_text(sizes)))
        }
        Op::Concatenate { dimension } => a.push(format!("dimensions={{{dimension}}}")),
        Op::Pad { dims } => a.push(format!("padding={}", padding_to_text(dims))),
        Op::Compare {
            direction,
            comparison_type,
        } => {
            a.push(format!("direction={}", direction.name()));
            if let Some(t) = comparison_type {
                a.push(format!("type={}", t.name()));
            }
        }
        Op::Reduce {
            dimensions,
            to_apply,
        } => {
            a.push(format!("dimensions={}", int_list_to_text(dimensions)));
            a.push(format!("to_apply={}", cname(*to_apply)));
        }
        Op::ReduceWindow { window, to_apply } => {
            a.push(format!("window={}", window_to_text(window)));
            a.push(format!("to_apply={}", cname(*to_apply)));
        }
        Op::SelectAndScatter {
            window,
            select,
            scatter,
        } => {
            a.push(format!("window={}", window_to_text(window)));
            a.push(format!("select={}", cname(*select)));
            a.push(format!("scatter={}", cname(*scatter)));
        }
        Op::Dot(d) => {
            if !d.lhs_batch.is_empty() {
                a.push(format!("lhs_batch_dims={}", int_list_to_text(&d.lhs_batch)));
            }
            a.push(format!(
                "lhs_contracting_dims={}",
                int_list_to_text(&d.lhs_contracting)
            ));
            if !d.rhs_batch.is_empty() {
                a.push(format!("rhs_batch_dims={}", int_list_to_text(&d.rhs_batch)));
            }
            a.push(format!(
                "rhs_contracting_dims={}",
                int_list_to_text(&d.rhs_contracting)
            ));
        }
        Op::Convolution(conv) => {
            if !conv.window.dims.is_empty() {
                a.push(format!("window={}", window_to_text(&conv.window)));
            }
            a.push(format!("dim_labels={}", dim_labels_to_text(&conv.dims)));
            if conv.feature_group_count != 1 {
                a.push(format!("feature_group_count={}", conv.feature_group_count));
            }
            if conv.batch_group_count != 1 {
                a.push(format!("batch_group_count={}", conv.batch_group_count));
            }
        }
        Op::Gather {
            dims,
            slice_sizes,
            indices_are_sorted,
        } => {
            // XLA's order (as JAX 0.10 prints it): dimension numbers, slice_sizes, indices_are_sorted.
            a.push(format!(
                "offset_dims={}",
                int_list_to_text(&dims.offset_dims)
            ));
            a.push(format!(
                "collapsed_slice_dims={}",
                int_list_to_text(&dims.collapsed_slice_dims)
            ));
            a.push(format!(
                "start_index_map={}",
                int_list_to_text(&dims.start_index_map)
            ));
            if !dims.operand_batching_dims.is_empty() {
                a.push(format!(
                    "operand_batching_dims={}",
                    int_list_to_text(&dims.operand_batching_dims)
                ));
                a.push(format!(
                    "start_indices_batching_dims={}",
                    int_list_to_text(&dims.start_indices_batching_dims)
                ));
            }
            a.push(format!("index_vector_dim={}", dims.index_vector_dim));
            a.push(format!("slice_sizes={}", int_list_to_text(slice_sizes)));
            if *indices_are_sorted {
                a.push("indices_are_sorted=true".to_string());
            }
        }
        Op::Scatter {
            dims,
            to_apply,
            indices_are_sorted,
            unique_indices,
        } => {
            a.push(format!(
                "update_window_dims={}",
                int_list_to_text(&dims.update_window_dims)
            ));
            a.push(format!(
                "inserted_window_dims={}",
                int_list_to_text(&dims.inserted_window_dims)
            ));
            a.push(format!(
                "scatter_dims_to_operand_dims={}",
                int_list_to_text(&dims.scatter_dims_to_operand_dims)
            ));
            if !dims.input_batching_dims.is_empty() {
                a.push(format!(
                    "input_batching_dims={}",
                    int_list_to_text(&dims.input_batching_dims)
                ));
                a.push(format!(
                    "scatter_indices_batching_dims={}",
                    int_list_to_text(&dims.scatter_indices_batching_dims)
                ));
            }
            a.push(format!("index_vector_dim={}", dims.index_vector_dim));
            if *indices_are_sorted {
                a.push("indices_are_sorted=true".to_string());
            }
            if *unique_indices {
                a.push("unique_indices=true".to_string());
            }
            a.push(format!("to_apply={}", cname(*to_apply)));
        }
        Op::GetTupleElement { index } => a.push(format!("index={index}")),
        Op::Call { to_apply } => a.push(format!("to_apply={}", cname(*to_apply))),
        Op::While { condition, body } => {
            a.push(format!("condition={}", cname(*condition)));
            a.push(format!("body={}", cname(*body)));
        }
        Op::Conditional { branches } => {
            let pred_selector = instr
                .operands()
                .first()
                .map(|&o| comp.get(o).shape == Shape::scalar(crate::ir::ElementType::Pred))
                .unwrap_or(false);
            if pred_selector && branches.len() == 2 {
                a.push(format!("true_computation={}", cname(branches[0])));
                a.push(format!("false_computation={}", cname(branches[1])));
            } else {
                let list: Vec<String> = branches.iter().map(|&b| cname(b)).collect();
                a.push(format!("branch_computations={{{}}}", list.join(", ")));
            }
        }
        Op::AllReduce {
            collective,
            to_apply,
        } => {
            collective_attrs(&mut a, collective);
            if collective.use_global_device_ids {
                a.push("use_global_device_ids=true".to_string());
            }
            a.push(format!("to_apply={}", cname(*to_apply)));
        }
        Op::AllGather {
            collective,
            dimension,
        } => {
            collective_attrs(&mut a, collective);
            a.push(format!("dimensions={{{dimension}}}"));
            if collective.use_global_device_ids {
                a.push("use_global_device_ids=true".to_string());
            }
        }
        Op::ReduceScatter {
            collective,
            dimension,
            to_apply,
        } => {
            collective_attrs(&mut a, collective);
            a.push(format!("dimensions={{{dimension}}}"));
            if collective.use_global_device_ids {
                a.push("use_global_device_ids=true".to_string());
            }
            a.push(format!("to_apply={}", cname(*to_apply)));
        }
        Op::CollectivePermute {
            channel_id,
            source_target_pairs,
        } => {
            if let Some(id) = channel_id {
                a.push(format!("channel_id={id}"));
            }
            let pairs: Vec<String> = source_target_pairs
                .iter()
                .map(|(s, t)| format!("{{{s},{t}}}"))
                .collect();
            a.push(format!("source_target_pairs={{{}}}", pairs.join(",")));
        }
        Op::AllToAll {
            collective,
            dimension,
        } => {
            collective_attrs(&mut a, collective);
            if let Some(d) = dimension {
                a.push(format!("dimensions={{{d}}}"));
            }
        }
        Op::Infeed { config } => {
            if !config.is_empty() {
                a.push(format!("infeed_config={}", quote(config)));
            }
        }
        Op::Outfeed { config } => {
            // XLA writes the kept `outfeed_shape` before the config.
            if let Some(shape) = instr.extra_attr("outfeed_shape") {
                a.push(format!("outfeed_shape={shape}"));
            }
            if !config.is_empty() {
                a.push(format!("outfeed_config={}", quote(config)));
            }
        }
        Op::CustomCall {
            target,
            has_side_effect,
            called,
            ..
        } => {
            a.push(format!("custom_call_target={}", quote(target)));
            if *has_side_effect {
                a.push("custom_call_has_side_effect=true".to_string());
            }
            if !called.is_empty() {
                let list: Vec<String> = called.iter().map(|&c| cname(c)).collect();
                a.push(format!("called_computations={{{}}}", list.join(", ")));
            }
        }
        Op::Fusion { kind, calls } => {
            a.push(format!("kind={kind}"));
            a.push(format!("calls={}", cname(*calls)));
        }
    }
    a
}
