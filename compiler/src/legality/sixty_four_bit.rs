//! E0201: 64-bit values.
//!
//! The device has no 64-bit types. f64 values are never legal. s64/u64 values are legal
//! only when they are compile-time constants: values whose whole dataflow cone consists of
//! constants, iota and pure ops on them ([`folds_at_compile_time`]), which the compiler folds
//! to 32-bit results before code generation (JAX's threefry computes `u64` iota values and
//! converts them to `u32` this way). A 64-bit integer that depends on a parameter, an infeed,
//! loop state, a call result, a reduction or any other run-time op is illegal.

use super::{Context, Finding, SIXTY_FOUR_BIT};
use crate::ir::{ComputationId, ElementType, InstrId, Op};
use hashbrown::HashSet;

/// Ops that the compiler evaluates at compile time when all their operands are constant.
/// Parameters, reductions, calls, loops, collectives and side effects are run-time values.
pub(crate) fn folds_at_compile_time(op: &Op) -> bool {
    op.is_elementwise()
        || matches!(
            op,
            Op::Constant(_)
                | Op::Iota { .. }
                | Op::Broadcast { .. }
                | Op::Reshape
                | Op::Bitcast
                | Op::Transpose { .. }
                | Op::Slice { .. }
                | Op::Concatenate { .. }
                | Op::Reverse { .. }
                | Op::Pad { .. }
                | Op::Tuple
                | Op::GetTupleElement { .. }
        )
}

/// The illegal 64-bit element types of an instruction's value (`runtime`: whether it
/// depends on run-time data, which makes 64-bit integers illegal too).
fn illegal_types(cx: &Context, c: ComputationId, id: InstrId, runtime: bool) -> Vec<ElementType> {
    let mut types: Vec<ElementType> = cx
        .module
        .computation(c)
        .get(id)
        .shape
        .leaves()
        .iter()
        .map(|a| a.element_type)
        .filter(|t| *t == ElementType::F64 || (runtime && t.is_64_bit()))
        .collect();
    types.sort();
    types.dedup();
    types
}

/// Instructions of computation `c` whose value depends on run-time data.
fn runtime_values(cx: &Context, c: ComputationId) -> HashSet<InstrId> {
    let comp = cx.module.computation(c);
    let mut runtime = HashSet::new();
    for id in comp.post_order() {
        let instr = comp.get(id);
        if !folds_at_compile_time(&instr.op) || instr.operands().iter().any(|o| runtime.contains(o))
        {
            runtime.insert(id);
        }
    }
    runtime
}

/// Why a run-time 64-bit integer is one: the first run-time op in its cone.
fn runtime_cause(
    cx: &Context,
    c: ComputationId,
    id: InstrId,
    runtime: &HashSet<InstrId>,
) -> String {
    let comp = cx.module.computation(c);
    let mut at = id;
    loop {
        let instr = comp.get(at);
        if !folds_at_compile_time(&instr.op) {
            let what = match instr.op {
                Op::Parameter(_) => "a parameter".to_string(),
                ref op => format!("`{}`", op.opcode_name()),
            };
            return if at == id {
                format!("it is not a compile-time constant: {what} is evaluated at run time")
            } else {
                format!(
                    "it is not a compile-time constant: it depends on `{}` ({what}), known only at run time",
                    instr.name
                )
            };
        }
        match instr.operands().iter().find(|o| runtime.contains(*o)) {
            Some(&o) => at = o,
            None => return "it depends on run-time data".to_string(),
        }
    }
}

pub(crate) fn check(cx: &Context) -> Vec<Finding> {
    let module = cx.module;
    // Pass 1: which instructions hold illegal 64-bit values.
    let mut illegal: HashSet<(ComputationId, InstrId)> = HashSet::new();
    let mut runtime_by_comp = Vec::new();
    for c in module.computation_ids() {
        let runtime = runtime_values(cx, c);
        for &id in module.computation(c).ids() {
            if !illegal_types(cx, c, id, runtime.contains(&id)).is_empty() {
                illegal.insert((c, id));
            }
        }
        runtime_by_comp.push(runtime);
    }
    // Pass 2: a finding each; those inheriting from a reported operand or caller are brief.
    let mut findings = Vec::new();
    for c in module.computation_ids() {
        let comp = module.computation(c);
        let runtime = &runtime_by_comp[c.0 as usize];
        for &id in comp.ids() {
            if !illegal.contains(&(c, id)) {
                continue;
            }
            let instr = comp.get(id);
            let types = illegal_types(cx, c, id, runtime.contains(&id));
            let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
            let origin = match instr.op {
                Op::Parameter(_) if c != module.entry => cx.callers[c.0 as usize]
                    .iter()
                    .find(|k| illegal.contains(*k))
                    .map(|&(cc, ci)| module.computation(cc).get(ci).name.clone()),
                _ => instr
                    .operands()
                    .iter()
                    .find(|&&o| illegal.contains(&(c, o)))
                    .map(|&o| comp.get(o).name.clone()),
            };
            let has_int = types.iter().any(|t| t.is_integer());
            let (hint, note) = if origin.is_some() {
                (String::new(), None)
            } else {
                let hint = if types.contains(&ElementType::F64) {
                    "cast to f32 (with JAX, keep jax_enable_x64 off)"
                } else {
                    "cast to s32 (u32 for unsigned values), or compute it from constants only"
                };
                let note = has_int.then(|| runtime_cause(cx, c, id, runtime));
                (hint.to_string(), note)
            };
            findings.push(Finding {
                comp: c,
                id,
                code: SIXTY_FOUR_BIT,
                message: format!(
                    "{} value{} not supported by the device",
                    names.join(" and "),
                    if types.len() > 1 { "s are" } else { " is" }
                ),
                hint,
                note,
                origin,
            });
        }
    }
    findings
}
