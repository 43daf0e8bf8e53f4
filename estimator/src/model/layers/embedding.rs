//! An embedding: integer ids to rows of a learned table, as TF's
//! `tf.nn.embedding_lookup(embeddings, ids)` on a `[input_dim, output_dim]` variable (Keras's
//! `Embedding` layer, with its variable name `embedding/embeddings` and its default uniform
//! initializer in [-0.05, 0.05]).
//!
//! The lookup is one HLO `gather` of rows (built with [`Tracer::with_module`], as the tracing
//! API has no gather method), so its gradient is a scatter-add of the output's gradient into
//! the rows read, as TF's `IndexedSlices` gradient is, not a dense product with a one-hot
//! matrix (which would cost `ids x input_dim x output_dim` multiply-adds).
//!
//! [`Tracer::with_module`]: tessel_compiler::trace::Tracer::with_module

use super::{layer_name, rank_error, LayerError};
use crate::model::get_variable::{get_variable, variable_scope, Reuse};
use crate::model::graph::Graph;
use crate::model::variables::Initializer;
use std::panic::Location;
use tessel_compiler::ir::{
    GatherDimensionNumbers, Instruction, Metadata, Op, Shape, SourceLocation,
};
use tessel_compiler::trace::Tensor;

/// `embedding`'s optional arguments, with Keras's defaults.
#[derive(Clone, Debug)]
pub struct Embedding {
    pub embeddings_initializer: Initializer,
    /// The layer's name (default: `embedding`, `embedding_1`, ...).
    pub name: Option<String>,
}

impl Default for Embedding {
    fn default() -> Embedding {
        Embedding {
            embeddings_initializer: Initializer::RandomUniform {
                min: -0.05,
                max: 0.05,
            },
            name: None,
        }
    }
}

/// Rows of the variable `embedding/embeddings` `[input_dim, output_dim]` (f32) for the
/// integer `ids` of any fixed shape: the result has the ids' shape plus `output_dim`.
///
/// Ids must lie in `[0, input_dim)`. As XLA's gather does, an id outside is clamped to the
/// nearest row (TF on a CPU raises instead), and its gradient is dropped.
#[track_caller]
pub fn embedding(
    g: &mut Graph,
    ids: &Tensor,
    input_dim: i64,
    output_dim: i64,
    options: Embedding,
) -> Result<Tensor, LayerError> {
    if !ids.is_ok() {
        return Ok(ids.clone());
    }
    let location = Location::caller();
    let name = layer_name(g, &options.name, "embedding");
    let error = |message: String| LayerError::Input {
        layer: "embedding",
        name: name.clone(),
        message,
    };
    if input_dim < 1 || output_dim < 1 {
        return Err(error(format!(
            "input_dim {input_dim} and output_dim {output_dim} must be at least 1"
        )));
    }
    match ids.element_type() {
        Some(t) if t.is_integer() => {}
        other => {
            return Err(error(format!(
                "needs integer ids, got {}",
                other.map_or("a failed tensor".to_string(), |t| t.to_string())
            )))
        }
    }
    let Some(id_dims) = ids
        .dims()
        .iter()
        .map(|d| d.fixed())
        .collect::<Option<Vec<i64>>>()
    else {
        return Err(rank_error("embedding", &name, "ids of fixed shape", ids));
    };
    let table = variable_scope(g, &name, Reuse::Inherit, |g| {
        get_variable(
            g,
            "embeddings",
            &[input_dim, output_dim],
            tessel_compiler::ir::ElementType::F32,
            options.embeddings_initializer,
            true,
        )
    })?;
    let rank = id_dims.len() as i64;
    // Each id is a one-element index vector (the implicit trailing dimension) that starts a
    // slice of one row; the row's dimension is kept as the output's last.
    let op = Op::Gather {
        dims: GatherDimensionNumbers {
            offset_dims: vec![rank],
            collapsed_slice_dims: vec![0],
            start_index_map: vec![0],
            index_vector_dim: rank,
            operand_batching_dims: vec![],
            start_indices_batching_dims: vec![],
        },
        slice_sizes: vec![1, output_dim],
        indices_are_sorted: false,
    };
    let mut out_dims = id_dims;
    out_dims.push(output_dim);
    let operands = [
        table.id().expect("a variable traces"),
        ids.id().expect("checked above"),
    ];
    let id = g.tracer.with_module(|m, entry| {
        let comp = m.computation_mut(entry);
        let mut instr = Instruction::new(
            format!("{name}_lookup.{}", comp.len()),
            op,
            Shape::array(tessel_compiler::ir::ElementType::F32, &out_dims),
        );
        instr.metadata = Metadata {
            op_type: Some("ResourceGather".into()),
            op_name: Some(format!("{name}/embedding_lookup")),
            source: Some(SourceLocation {
                file: location.file().to_string(),
                line: location.line(),
                column: location.column(),
            }),
            ..Metadata::default()
        };
        comp.add(instr, &operands)
    });
    Ok(g.tracer.tensor(id))
}
