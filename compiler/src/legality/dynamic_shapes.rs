//! E0101: dynamic dimensions. The device compiles for static shapes only, so every value
//! whose shape has a dimension of unknown (`?`) or bounded (`<=N`) size is reported.

use super::{shape_text, Context, Finding, DYNAMIC_SHAPE};
use crate::ir::{ComputationId, InstrId, Op};
use hashbrown::HashSet;

/// `dimension 0` / `dimensions 0 and 2` with dynamic size, over all array leaves.
fn dynamic_dims(cx: &Context, c: ComputationId, id: InstrId) -> Vec<usize> {
    let shape = &cx.module.computation(c).get(id).shape;
    let mut out = Vec::new();
    for leaf in shape.leaves() {
        for d in 0..leaf.rank() {
            if leaf.is_dynamic_dim(d) && !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out.sort();
    out
}

pub(crate) fn check(cx: &Context) -> Vec<Finding> {
    let module = cx.module;
    let mut dynamic: HashSet<(ComputationId, InstrId)> = HashSet::new();
    for c in module.computation_ids() {
        for &id in module.computation(c).ids() {
            if !dynamic_dims(cx, c, id).is_empty() {
                dynamic.insert((c, id));
            }
        }
    }
    let mut findings = Vec::new();
    for c in module.computation_ids() {
        let comp = module.computation(c);
        for &id in comp.ids() {
            if !dynamic.contains(&(c, id)) {
                continue;
            }
            let instr = comp.get(id);
            let dims = dynamic_dims(cx, c, id);
            let listed: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            let message = format!(
                "dynamic shape {}: dimension{} {} {} no fixed size",
                shape_text(module, c, id),
                if dims.len() > 1 { "s" } else { "" },
                listed.join(" and "),
                if dims.len() > 1 { "have" } else { "has" }
            );
            let origin = match instr.op {
                Op::Parameter(_) if c != module.entry => cx.callers[c.0 as usize]
                    .iter()
                    .find(|k| dynamic.contains(*k))
                    .map(|&(cc, ci)| module.computation(cc).get(ci).name.clone()),
                _ => instr
                    .operands()
                    .iter()
                    .find(|&&o| dynamic.contains(&(c, o)))
                    .map(|&o| comp.get(o).name.clone()),
            };
            let hint = if origin.is_some() {
                String::new()
            } else {
                "batch with drop_remainder=True or give the dimension a fixed size".to_string()
            };
            findings.push(Finding {
                comp: c,
                id,
                code: DYNAMIC_SHAPE,
                message,
                hint,
                note: None,
                origin,
            });
        }
    }
    findings
}
