//! Structure of one computation: a root that exists, operands that exist, no cycles, and
//! parameters numbered 0..n-1.

use super::Report;
use crate::ir::{ComputationId, InstrId, Op};
use hashbrown::{HashMap, HashSet};

pub(super) fn check(report: &mut Report, c: ComputationId) {
    let comp = report.module.computation(c);
    if !comp.has_root() {
        report.computation(
            c,
            "the computation has no instructions, so no root".to_string(),
        );
    } else if !comp.contains(comp.root()) {
        report.computation(
            c,
            "the root instruction was removed from the computation".to_string(),
        );
    }
    check_order(report, c);
    check_operands(report, c);
    check_cycles(report, c);
    check_parameters(report, c);
}

/// The stored instruction order lists every instruction of the graph exactly once.
fn check_order(report: &mut Report, c: ComputationId) {
    let comp = report.module.computation(c);
    let mut listed = HashSet::with_capacity(comp.ids().len());
    for &id in comp.ids() {
        if !comp.contains(id) {
            report.computation(
                c,
                format!(
                    "the instruction order lists removed instruction #{}",
                    id.index()
                ),
            );
        } else if !listed.insert(id) {
            report.instruction(c, id, "the instruction order lists it twice".to_string());
        }
    }
    for id in comp.graph().node_indices() {
        if !listed.contains(&id) {
            report.instruction(
                c,
                id,
                "it is in the computation's graph but missing from its instruction order"
                    .to_string(),
            );
        }
    }
}

fn check_operands(report: &mut Report, c: ComputationId) {
    let comp = report.module.computation(c);
    for id in comp.graph().node_indices() {
        for (k, &o) in comp.get(id).operands().iter().enumerate() {
            if !comp.contains(o) {
                report.instruction(
                    c,
                    id,
                    format!(
                        "operand {k} refers to instruction #{}, which is not in this computation",
                        o.index()
                    ),
                );
            }
        }
    }
}

/// Depth-first search over operands with three colours; reaching a grey node closes a cycle,
/// reported once with its path.
fn check_cycles(report: &mut Report, c: ComputationId) {
    let comp = report.module.computation(c);
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        Grey,
        Black,
    }
    let mut colour: HashMap<InstrId, Colour> = HashMap::with_capacity(comp.len());
    let mut cycles = Vec::new();
    for start in comp.graph().node_indices() {
        if colour.contains_key(&start) {
            continue;
        }
        colour.insert(start, Colour::Grey);
        let mut stack: Vec<(InstrId, usize)> = vec![(start, 0)];
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let operands = comp.get(node).operands();
            if *next < operands.len() {
                let o = operands[*next];
                *next += 1;
                if !comp.contains(o) {
                    continue;
                }
                match colour.get(&o) {
                    None => {
                        colour.insert(o, Colour::Grey);
                        stack.push((o, 0));
                    }
                    Some(Colour::Grey) => {
                        let from = stack.iter().position(|&(x, _)| x == o).unwrap_or(0);
                        let mut path: Vec<String> = stack[from..]
                            .iter()
                            .rev()
                            .map(|&(x, _)| comp.get(x).name.clone())
                            .collect();
                        path.insert(0, comp.get(o).name.clone());
                        cycles.push((o, path));
                    }
                    Some(Colour::Black) => {}
                }
            } else {
                colour.insert(node, Colour::Black);
                stack.pop();
            }
        }
    }
    for (id, path) in cycles {
        report.instruction(
            c,
            id,
            format!(
                "it depends on itself: {} (operands must come before their users)",
                path.join(" uses ")
            ),
        );
    }
}

/// Parameter numbers are exactly 0..n-1, each used once.
fn check_parameters(report: &mut Report, c: ComputationId) {
    let comp = report.module.computation(c);
    let mut by_number: Vec<(u32, InstrId)> = comp
        .graph()
        .node_indices()
        .filter_map(|id| match comp.get(id).op {
            Op::Parameter(n) => Some((n, id)),
            _ => None,
        })
        .collect();
    by_number.sort_by_key(|&(n, id)| (n, id.index()));
    let count = by_number.len();
    for w in by_number.windows(2) {
        if w[0].0 == w[1].0 {
            report.instruction(
                c,
                w[1].1,
                format!(
                    "parameter number {} is also used by {}",
                    w[1].0,
                    comp.get(w[0].1).name
                ),
            );
        }
    }
    for &(n, id) in &by_number {
        if n as usize >= count {
            report.instruction(
                c,
                id,
                format!(
                    "parameter({n}) in a computation with {count} parameters; parameters must \
                     be numbered 0..{} without gaps",
                    count as i64 - 1
                ),
            );
        }
    }
}
