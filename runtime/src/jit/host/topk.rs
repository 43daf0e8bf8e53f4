//! `topk` in compiled code: a host routine that reads the operand's buffer, runs the
//! interpreter's TopK (so both backends agree on ties, NaN and signed zeros) and writes the
//! values and s32 indices to the instruction's two buffers. Correct first: it copies each
//! buffer once; a CLIF selection loop can replace it if top-k shows up in profiles.

use crate::jit::buffer::{Buffer, Loc};
use crate::jit::host::routine_abi::{guarded, read_array, write_array, Status};
use tessel_compiler::interpreter;
use tessel_compiler::ir::Literal;

/// The buffers and attributes of one `topk` instruction.
pub(crate) struct TopKPlan {
    name: String,
    operand: Buffer,
    values: Buffer,
    indices: Buffer,
    k: i64,
    largest: bool,
}

impl TopKPlan {
    /// `out` is the instruction's `(values, indices)` location.
    pub(crate) fn new(
        name: &str,
        operand: Buffer,
        out: &Loc,
        k: i64,
        largest: bool,
    ) -> Result<TopKPlan, String> {
        let (values, indices) = match out {
            Loc::Tuple(t) => match t.as_slice() {
                [Loc::Array(v), Loc::Array(i)] => (v.clone(), i.clone()),
                _ => return Err(format!("{name}: topk must give (values, indices)")),
            },
            _ => return Err(format!("{name}: topk must give (values, indices)")),
        };
        Ok(TopKPlan {
            name: name.to_string(),
            operand,
            values,
            indices,
            k,
            largest,
        })
    }
}

/// # Safety
/// Called by compiled code with its own plan and arena.
pub(crate) unsafe extern "C" fn topk_routine(plan: *const TopKPlan, arena: *mut u8) -> Status {
    let plan = &*plan;
    guarded(&plan.name, || {
        // SAFETY: the operand is a buffer of this program.
        let operand = read_array(&plan.operand, arena)?;
        let result = interpreter::topk(&operand, plan.k, plan.largest).map_err(|e| e.message)?;
        let Literal::Tuple(items) = result else {
            return Err("topk gave no tuple".into());
        };
        for (item, out) in items.iter().zip([&plan.values, &plan.indices]) {
            let a = item.as_array().ok_or("topk gave a non-array")?;
            // SAFETY: `out` is a buffer of this program; the operand was copied out above.
            write_array(a, out, arena)?;
        }
        Ok(())
    })
}
