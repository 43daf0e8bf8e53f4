//! `topk` in compiled code: a host routine that reads the operand's buffer, runs the
//! interpreter's TopK (so both backends agree on ties, NaN and signed zeros) and writes the
//! values and s32 indices to the instruction's two buffers. Correct first: it copies each
//! buffer once; a CLIF selection loop can replace it if top-k shows up in profiles.

use crate::jit::buffer::{Buffer, Loc};
use crate::jit::host::routine_abi::{guarded, resolve, Status};
use tessel_compiler::interpreter;
use tessel_compiler::ir::{Array, ArrayData, Literal};

/// The buffers and attributes of one `topk` instruction.
pub struct TopKPlan {
    name: String,
    operand: Buffer,
    values: Buffer,
    indices: Buffer,
    k: i64,
    largest: bool,
}

impl TopKPlan {
    /// `out` is the instruction's `(values, indices)` location.
    pub fn new(
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
pub unsafe extern "C" fn topk_routine(plan: *const TopKPlan, arena: *mut u8) -> Status {
    let plan = &*plan;
    guarded(&plan.name, || {
        let b = &plan.operand;
        let n = b.byte_size();
        // SAFETY: the operand is an arena (or constant) buffer of `n` bytes of this program.
        let bytes = std::slice::from_raw_parts(resolve(b.addr, arena) as *const u8, n);
        let data = ArrayData::from_le_bytes(b.shape.element_type, bytes)
            .ok_or_else(|| format!("a {} buffer of {n} bytes", b.shape))?;
        let result = interpreter::topk(&Array::new(b.shape.clone(), data), plan.k, plan.largest)
            .map_err(|e| e.message)?;
        let Literal::Tuple(items) = result else {
            return Err("topk gave no tuple".into());
        };
        for (item, out) in items.iter().zip([&plan.values, &plan.indices]) {
            let a = item.as_array().ok_or("topk gave a non-array")?;
            let bytes = a.data.to_le_bytes();
            if bytes.len() != out.byte_size() {
                return Err(format!("{} bytes for a {} buffer", bytes.len(), out.shape));
            }
            // SAFETY: `out` is an arena buffer of this program of exactly that many bytes,
            // distinct from the operand (topk never writes in place).
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), resolve(out.addr, arena), bytes.len());
        }
        Ok(())
    })
}
