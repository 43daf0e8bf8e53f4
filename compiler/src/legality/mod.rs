//! Device legality: what a TPU-like device cannot run, reported all at once.
//!
//! The device has static shapes only, no 64-bit types, and a fixed set of ops. Each rule
//! ([`dynamic_shapes`], [`sixty_four_bit`], [`unsupported_ops`]) reports every offending
//! instruction with a stable code, the instruction, the user's source line and a hint;
//! [`check_legality`] returns them in source order and [`render`] prints them like rustc.
//! See `docs/legality.md` for the rules, in particular when 64-bit integers are allowed.

pub mod diagnostic;
pub(crate) mod dynamic_shapes;
pub(crate) mod sixty_four_bit;
pub(crate) mod unsupported_ops;

pub(crate) use diagnostic::{instruction_text, UNSUPPORTED_OP};
pub use diagnostic::{render, Diagnostic, DYNAMIC_SHAPE, SIXTY_FOUR_BIT};

use crate::ir::{ComputationId, InstrId, Module, SourceLocation};
use hashbrown::HashMap;

/// What a rule found: an instruction and what is wrong with it.
pub(crate) struct Finding {
    pub comp: ComputationId,
    pub id: InstrId,
    pub code: &'static str,
    pub message: String,
    pub hint: String,
    pub note: Option<String>,
    pub origin: Option<String>,
}

/// Facts about a module shared by the rules.
pub(crate) struct Context<'m> {
    pub module: &'m Module,
    /// For each computation, the instructions that call it.
    pub callers: Vec<Vec<(ComputationId, InstrId)>>,
}

impl<'m> Context<'m> {
    fn new(module: &'m Module) -> Context<'m> {
        let mut callers = vec![Vec::new(); module.computations.len()];
        for c in module.computation_ids() {
            let comp = module.computation(c);
            for &id in comp.ids() {
                for callee in comp.get(id).op.called_computations() {
                    if let Some(list) = callers.get_mut(callee.0 as usize) {
                        list.push((c, id));
                    }
                }
            }
        }
        Context { module, callers }
    }

    /// Every instruction, computation by computation, operands before users (following
    /// the stored text order where it can).
    pub(crate) fn instructions(&self) -> impl Iterator<Item = (ComputationId, InstrId)> + '_ {
        self.module.computation_ids().flat_map(move |c| {
            let comp = self.module.computation(c);
            comp.post_order().into_iter().map(move |id| (c, id))
        })
    }
}

/// Every reason `module` cannot run on the device, in source order.
pub fn check_legality(module: &Module) -> Vec<Diagnostic> {
    let cx = Context::new(module);
    let mut findings = Vec::new();
    findings.extend(dynamic_shapes::check(&cx));
    findings.extend(sixty_four_bit::check(&cx));
    findings.extend(unsupported_ops::check(&cx));
    order(&cx, findings)
}

/// File rank, line, column, module order, code.
type SortKey = (usize, u32, u32, usize, &'static str);

/// Builds diagnostics and sorts them by source position. An instruction without a source
/// location of its own (JAX leaves them off parameters and constants) takes that of its
/// nearest user with one, else of its caller (and says so); ties keep the module's order.
fn order(cx: &Context, findings: Vec<Finding>) -> Vec<Diagnostic> {
    let module = cx.module;
    let mut ordinal: HashMap<(ComputationId, InstrId), usize> = HashMap::new();
    for (i, key) in cx.instructions().enumerate() {
        ordinal.insert(key, i);
    }
    // Files ranked by first appearance, so that sorting never depends on file names.
    let mut file_rank: HashMap<String, usize> = HashMap::new();
    for (c, id) in cx.instructions() {
        if let Some(loc) = module.source_location(module.computation(c).get(id)) {
            let n = file_rank.len();
            file_rank.entry(loc.file).or_insert(n);
        }
    }
    let mut keyed: Vec<(SortKey, Diagnostic)> = findings
        .into_iter()
        .map(|f| {
            let comp = module.computation(f.comp);
            let instr = comp.get(f.id);
            let (location, location_via) = match module.source_location(instr) {
                Some(own) => (Some(own), None),
                None => match anchor_location(cx, f.comp, f.id) {
                    Some((loc, via)) => (Some(loc), Some(via)),
                    None => (None, None),
                },
            };
            let anchor = location.clone();
            let ord = ordinal.get(&(f.comp, f.id)).copied().unwrap_or(usize::MAX);
            let key = match &anchor {
                Some(l) => (file_rank[&l.file], l.line, l.column, ord, f.code),
                None => (usize::MAX, 0, 0, ord, f.code),
            };
            let d = Diagnostic {
                code: f.code,
                message: f.message,
                instruction: instruction_text(comp, f.id),
                computation: comp.name.clone(),
                location,
                location_via,
                hlo_line: instr.text_line,
                hint: f.hint,
                note: f.note,
                origin: f.origin,
            };
            (key, d)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().map(|(_, d)| d).collect()
}

/// A location for an unlocated instruction: that of the nearest user (breadth first) with
/// one, else that of an instruction calling its computation; with that instruction's name.
fn anchor_location(
    cx: &Context,
    comp: ComputationId,
    id: InstrId,
) -> Option<(SourceLocation, String)> {
    let module = cx.module;
    let mut seen = hashbrown::HashSet::new();
    let mut frontier = vec![(comp, id)];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for (c, i) in frontier {
            if !seen.insert((c, i)) {
                continue;
            }
            let computation = module.computation(c);
            if let Some(loc) = module.source_location(computation.get(i)) {
                return Some((loc, computation.get(i).name.clone()));
            }
            next.extend(computation.users(i).into_iter().map(|u| (c, u)));
            if computation.users(i).is_empty() {
                next.extend(cx.callers[c.0 as usize].iter().copied());
            }
        }
        frontier = next;
    }
    None
}

/// The array leaves of an instruction's shape, for messages: `f32[?,784]`.
pub(crate) fn shape_text(module: &Module, comp: ComputationId, id: InstrId) -> String {
    module.computation(comp).get(id).shape.to_text(false)
}

#[cfg(test)]
mod tests;
