//! Copying a called computation's instructions into another computation.
//!
//! The gradient of a `call` (and of one loop iteration) is taken on such a copy: the copy's
//! values are the callee's, computed where the rules can see them.

use super::emit::{Emitter, R};
use super::AutodiffError;
use crate::ir::{ComputationId, InstrId, Instruction, Op};
use hashbrown::HashMap;

/// Adds a copy of `callee` to the emitter's computation with parameter `k` replaced by
/// `args[k]`; returns the copy of the callee's root.
pub(crate) fn inline(em: &mut Emitter, callee: ComputationId, args: &[InstrId]) -> R<InstrId> {
    let src = em.module.computation(callee);
    if !src.has_root() {
        return Err(AutodiffError::new(format!(
            "computation {} has no instructions",
            src.name
        )));
    }
    let order = src.post_order();
    let root = src.root();
    let copies: Vec<Instruction> = order.iter().map(|&id| src.get(id).clone()).collect();
    let name = src.name.clone();
    let mut map: HashMap<InstrId, InstrId> = HashMap::with_capacity(order.len());
    for (old, instr) in order.into_iter().zip(copies) {
        let new = match instr.op {
            Op::Parameter(k) => *args.get(k as usize).ok_or_else(|| {
                AutodiffError::new(format!(
                    "computation {name} reads parameter {k} but is called with {} arguments",
                    args.len()
                ))
            })?,
            _ => {
                let operands: Vec<InstrId> = instr.operands().iter().map(|o| map[o]).collect();
                let fresh = em.module.unique_name(instr.op.opcode_name());
                let mut copy = Instruction::new(fresh, instr.op, instr.shape);
                copy.metadata = instr.metadata;
                copy.text_line = instr.text_line;
                em.module.computation_mut(em.comp).add(copy, &operands)
            }
        };
        map.insert(old, new);
    }
    Ok(map[&root])
}
