//! The call graph: called computations exist, no computation reaches itself through calls
//! (HLO has no recursion), and chains of calls are at most [`MAX_CALL_DEPTH`] deep (every
//! later stage walks calls recursively; a generated module nesting thousands of calls would
//! overflow their stacks instead of getting an error).

use super::Report;
use crate::ir::{ComputationId, InstrId, Module};
use hashbrown::HashSet;

/// How deeply computations may call each other (`call`, `while`, `conditional`, reducers,
/// fusions, ...). Real programs nest a few levels per loop or function; JAX's deepest modules
/// stay far below this.
pub(crate) const MAX_CALL_DEPTH: usize = 256;

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
    if let Some(finished) = report_cycles(report) {
        report_depth(report, &finished);
    }
    bad
}

/// Reports a chain of calls deeper than [`MAX_CALL_DEPTH`]. `finished` lists the computations
/// callees first (the call graph has no cycle).
fn report_depth(report: &mut Report, finished: &[usize]) {
    let module = report.module;
    let mut depth = vec![0usize; module.computations.len()];
    for &c in finished {
        let below = callees(module, ComputationId(c as u32))
            .iter()
            .map(|k| depth[k.0 as usize])
            .max()
            .unwrap_or(0);
        depth[c] = below + 1;
    }
    if let Some((c, &d)) = depth.iter().enumerate().max_by_key(|&(_, d)| *d) {
        if d > MAX_CALL_DEPTH {
            report.computation(
                ComputationId(c as u32),
                format!(
                    "computation {} starts a chain of {d} nested calls; at most {MAX_CALL_DEPTH} \
                     are supported",
                    module.computations[c].name
                ),
            );
        }
    }
}

/// Depth-first search over the call graph with three colours; a grey callee closes a cycle.
/// Returns the computations in the order they finished (callees first) when there is no cycle.
fn report_cycles(report: &mut Report) -> Option<Vec<usize>> {
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
    let mut finished = Vec::with_capacity(n);
    let mut cyclic = false;
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
                        cyclic = true;
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
                finished.push(c);
                stack.pop();
            }
        }
    }
    (!cyclic).then_some(finished)
}
