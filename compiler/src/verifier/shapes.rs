//! Shapes: every instruction's recorded shape is what shape inference accepts for its op and
//! operands (inferred where inferable, validated where HLO states it), and its byte size fits
//! in an `i64` (`f32[4294967296,4294967296]` wrapped to zero elements before).

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
        if let Some(leaf) = instr
            .shape
            .leaves()
            .into_iter()
            .find(|a| a.checked_byte_size().is_none())
        {
            report.instruction(
                c,
                id,
                format!("shape {leaf} has more bytes than a 64-bit size can count"),
            );
            continue;
        }
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
