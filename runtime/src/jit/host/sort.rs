//! `sort` in compiled code: a host routine that reads the operands' buffers, runs the
//! interpreter's sort (the comparator evaluated on scalars, a stable order; so both backends
//! agree on ties, NaN and signed zeros) and writes each sorted operand to its buffer. Correct
//! first, like `topk.rs`: each buffer is copied once and every comparison evaluates the
//! comparator, which is slow for large sorts; a comparator recognized as a plain order could
//! take a native sort.

use crate::jit::buffer::{Buffer, Loc};
use crate::jit::host::routine_abi::{guarded, read_array, write_array, Status};
use std::sync::Arc;
use tessel_compiler::interpreter;
use tessel_compiler::ir::{Array, ComputationId, Literal, Module};

/// The buffers and attributes of one `sort` instruction.
pub(crate) struct SortPlan {
    name: String,
    module: Arc<Module>,
    to_apply: ComputationId,
    dimension: i64,
    operands: Vec<Buffer>,
    outputs: Vec<Buffer>,
}

impl SortPlan {
    /// `out` is the instruction's location: one array, or a tuple of one per operand.
    pub(crate) fn new(
        name: &str,
        module: Arc<Module>,
        to_apply: ComputationId,
        dimension: i64,
        operands: Vec<Buffer>,
        out: &Loc,
    ) -> Result<SortPlan, String> {
        let outputs: Vec<Buffer> = match out {
            Loc::Array(b) => vec![b.clone()],
            Loc::Tuple(t) => t
                .iter()
                .map(|l| l.as_array().cloned())
                .collect::<Option<_>>()
                .ok_or_else(|| format!("{name}: sort gives arrays"))?,
            Loc::Token => return Err(format!("{name}: sort gives arrays")),
        };
        if outputs.len() != operands.len() {
            return Err(format!(
                "{name}: {} outputs for {} operands",
                outputs.len(),
                operands.len()
            ));
        }
        Ok(SortPlan {
            name: name.to_string(),
            module,
            to_apply,
            dimension,
            operands,
            outputs,
        })
    }
}

/// # Safety
/// Called by compiled code with its own plan and arena.
pub(crate) unsafe extern "C" fn sort_routine(plan: *const SortPlan, arena: *mut u8) -> Status {
    let plan = &*plan;
    guarded(&plan.name, || {
        // SAFETY: the operands are buffers of this program.
        let arrays: Vec<Array> = plan
            .operands
            .iter()
            .map(|b| read_array(b, arena))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&Array> = arrays.iter().collect();
        let sorted = interpreter::sort_arrays(&plan.module, &refs, plan.dimension, plan.to_apply)
            .map_err(|e| e.message)?;
        let items = match sorted {
            Literal::Tuple(items) => items,
            one => vec![one],
        };
        for (item, out) in items.iter().zip(&plan.outputs) {
            let a = item.as_array().ok_or("sort gave a non-array")?;
            // SAFETY: `out` is a buffer of this program; the operands were copied out above,
            // so it may be one of them.
            write_array(a, out, arena)?;
        }
        Ok(())
    })
}
