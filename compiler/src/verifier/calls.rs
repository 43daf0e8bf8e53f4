//! The call graph: called computations exist, and no computation reaches itself through
//! calls (HLO has no recursion).

use super::Report;
use crate::ir::{ComputationId, InstrId, Module};
use hashbrown::HashSet;

/// The computations each computation calls (existing ones only), in first-call order.
fn callees(module: &Module, c: ComputationId) -> Vec<ComputationId> {
    let comp = module.computation(c);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for &i in comp.ids() {
        if !comp.contains(i) {
            continue;
        }
        for callee in comp.get(i).op.called_computations() {
            if (callee.0 as usize) < module.computations.len() && seen.insert(callee) {
                out.push(callee);
            }
        }
    }
    out
}

/// Reports calls to missing computations and call cycles. Returns the instructions that
/// call a missing computation (their shapes cannot be checked).
pub(super) fn check(report: &mut Report) -> HashSet<(ComputationId, InstrId)> {
    let module = report.module;
    let mut bad = HashSet::new();
    for c in module.computation_ids() {
        let comp = module.computation(c);
        for &i in comp.ids() {
            if !comp.contains(i) {
                continue;
            }
            for callee in comp.get(i).op.called_computations() {
                if callee.0 as usize >= module.computations.len() {
                    report.instruction(
                        c,
                        i,
                        format!(
                            "{} calls {callee}, but the module has only {} computations",
                            comp.get(i).op.opcode_name(),
                            module.computations.len()
                        ),
                    );
                    bad.insert((c, i));
                }
            }
        }
    }
    report_cycles(report);
    bad
}

/// Depth-first search over the call graph with three colours; a grey callee closes a cycle.
fn report_cycles(report: &mut Report) {
    let module = report.module;
    let n = module.computations.len();
    let graph: Vec<Vec<ComputationId>> = module
        .computation_ids()
        .map(|c| callees(module, c))
        .collect();
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        White,
        Grey,
        Black,
    }
    let mut colour = vec![Colour::White; n];
    for start in 0..n {
        if colour[start] != Colour::White {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        colour[start] = Colour::Grey;
        while let Some(&mut (c, ref mut next)) = stack.last_mut() {
            if let Some(&callee) = graph[c].get(*next) {
                *next += 1;
                let k = callee.0 as usize;
                match colour[k] {
                    Colour::White => {
                        colour[k] = Colour::Grey;
                        stack.push((k, 0));
                    }
                    Colour::Grey => {
                        let from = stack.iter().position(|&(x, _)| x == k).unwrap_or(0);
                        let mut path: Vec<&str> = stack[from..]
                            .iter()
                            .map(|&(x, _)| module.computations[x].name.as_str())
                            .collect();
                        path.push(&module.computations[k].name);
                        report.computation(
                            callee,
                            format!(
                                "computation {} calls itself through {} (HLO has no recursion)",
                                module.computations[k].name,
                                path.join(" -> ")
                            ),
                        );
                    }
                    Colour::Black => {}
                }
            } else {
                colour[c] = Colour::Black;
                stack.pop();
            }
        }
    }
}
