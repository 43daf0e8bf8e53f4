//! Shapes: every instruction's recorded shape is what shape inference accepts for its op and
//! operands (inferred where inferable, validated where HLO states it).

use super::Report;
use crate::ir::{ComputationId, InstrId, Shape};
use crate::shape_inference::check_given_shape;
use hashbrown::HashSet;

/// Checks every instruction of computation `c` whose operands exist and whose callees exist
/// (`bad_calls`: instructions already reported for calling a missing computation).
pub(super) fn check(
    report: &mut Report,
    c: ComputationId,
    bad_calls: &HashSet<(ComputationId, InstrId)>,
) {
    let module = report.module;
    let comp = module.computation(c);
    for &id in comp.ids() {
        if !comp.contains(id) || bad_calls.contains(&(c, id)) {
            continue;
        }
        let instr = comp.get(id);
        if instr.operands().iter().any(|&o| !comp.contains(o)) {
            continue;
        }
        let operands: Vec<&Shape> = instr
            .operands()
            .iter()
            .map(|&o| &comp.get(o).shape)
            .collect();
        if let Err(e) = check_given_shape(module, &instr.op, &operands, &instr.shape) {
            report.instruction(c, id, e.message);
        }
    }
}
