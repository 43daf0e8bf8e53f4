//! Call inlining: `call(args), to_apply=C` is replaced by a copy of C's instructions with C's
//! parameters bound to `args`. Callees are inlined before their callers, so a nest of calls
//! flattens in one run. Computations left uncalled are removed by DCE.
//!
//! Calls marked `frontend_attributes={inlineable="false"}` stay: JAX marks the body of a
//! `shard_map` that way, and the runtime finds the per-replica computation through it.

use super::util::{name_base, pin_roots};
use super::{Pass, PassError};
use crate::hlo_text::parse_frontend_attributes;
use crate::ir::{ComputationId, InstrId, Instruction, Module, Op};
use hashbrown::HashMap;

#[derive(Default)]
pub struct CallInliner;

impl Pass for CallInliner {
    fn name(&self) -> &'static str {
        "call-inliner"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for cid in m.computation_post_order() {
            let calls: Vec<InstrId> = m
                .computation(cid)
                .post_order()
                .into_iter()
                .filter(|&id| {
                    let instr = m.computation(cid).get(id);
                    matches!(instr.op, Op::Call { .. }) && inlineable(instr)
                })
                .collect();
            for call in calls {
                inline_call(m, cid, call)?;
                changed = true;
            }
        }
        Ok(changed)
    }
}

/// Whether a call may be inlined: not marked `inlineable="false"`.
pub(crate) fn inlineable(call: &Instruction) -> bool {
    let Some(text) = call.extra_attr("frontend_attributes") else {
        return true;
    };
    match parse_frontend_attributes(text) {
        Ok(pairs) => !pairs.iter().any(|(k, v)| k == "inlineable" && v == "false"),
        // Attributes we cannot read: keep the call as it is.
        Err(_) => false,
    }
}

/// Replaces `call` in computation `caller` by the body of the computation it calls.
pub(crate) fn inline_call(
    m: &mut Module,
    caller: ComputationId,
    call: InstrId,
) -> Result<(), PassError> {
    let Op::Call { to_apply } = m.computation(caller).get(call).op else {
        return Err(PassError::new("call-inliner", "not a call"));
    };
    if to_apply == caller {
        return Err(PassError::new(
            "call-inliner",
            format!("{} calls itself", m.computation(caller).name),
        ));
    }
    let args: Vec<InstrId> = m.computation(caller).get(call).operands().to_vec();
    let callee = m.computation(to_apply).clone();
    let mut map: HashMap<InstrId, InstrId> = HashMap::new();
    for (id, instr) in callee.instructions() {
        let new = match instr.op {
            Op::Parameter(n) => *args.get(n as usize).ok_or_else(|| {
                PassError::new(
                    "call-inliner",
                    format!(
                        "{} passes {} arguments but {} reads parameter {n}",
                        m.computation(caller).get(call).name,
                        args.len(),
                        callee.name
                    ),
                )
            })?,
            _ => {
                let operands: Vec<InstrId> = instr.operands().iter().map(|o| map[o]).collect();
                let mut copy = Instruction::new(
                    m.unique_name(name_base(&instr.name)),
                    instr.op.clone(),
                    instr.shape.clone(),
                );
                copy.metadata = instr.metadata.clone();
                copy.extra_attrs = instr.extra_attrs.clone();
                m.computation_mut(caller).add(copy, &operands)
            }
        };
        map.insert(id, new);
    }
    let result = map[&callee.root()];
    let c = m.computation_mut(caller);
    c.replace_all_uses(call, result);
    c.remove(call);
    Ok(())
}
