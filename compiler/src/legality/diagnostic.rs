//! Diagnostics of the legality check and their rustc-like rendering.

use crate::ir::{Computation, InstrId, Module, Op, SourceLocation};
use std::fmt::Write;

/// A dimension whose size is not fixed at compile time.
pub const DYNAMIC_SHAPE: &str = "E0101";
/// A 64-bit value the device cannot hold.
pub const SIXTY_FOUR_BIT: &str = "E0201";
/// An op the device has no implementation of.
pub(crate) const UNSUPPORTED_OP: &str = "E0301";

/// Every code with its stable name, for documentation and `--explain`-style listings.
pub(crate) const CODES: [(&str, &str); 3] = [
    (DYNAMIC_SHAPE, "dynamic-shape"),
    (SIXTY_FOUR_BIT, "64-bit-type"),
    (UNSUPPORTED_OP, "unsupported-op"),
];

#[cfg(test)]
/// The stable name of a code (`E0201` -> `64-bit-type`).
pub(crate) fn code_name(code: &str) -> &'static str {
    CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, n)| *n)
        .unwrap_or("unknown")
}

/// One reason an instruction cannot run on the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// `E0101`, `E0201`, `E0301` (see [`CODES`]).
    pub code: &'static str,
    /// The headline: `f64 value is not supported by the device`.
    pub message: String,
    /// The instruction in short HLO text: `mul.1 = f64[4,3] multiply(x.1, broadcast.1)`.
    pub instruction: String,
    /// The computation holding the instruction.
    pub computation: String,
    /// The user's source line: Rust for traces, Python for JAX modules (through the debug
    /// tables). An instruction without one of its own (JAX leaves it off parameters and
    /// constants) gets that of its nearest user, or caller, named in `location_via`.
    /// `None` when the module says nothing.
    pub location: Option<SourceLocation>,
    /// The instruction whose source line `location` is, when it is not this one's.
    pub location_via: Option<String>,
    /// The line of the HLO text the instruction was read from.
    pub hlo_line: Option<u32>,
    /// What to do about it; empty for a diagnostic that only follows from another.
    pub hint: String,
    /// Why, when it is not obvious (e.g. what makes a 64-bit integer a run-time value).
    pub note: Option<String>,
    /// The already reported operand (or caller) this problem is inherited from; such
    /// diagnostics are rendered briefly, since fixing the origin fixes them.
    pub origin: Option<String>,
}

impl Diagnostic {
    /// `file:line:col` of the user's source, else `hlo-file:line`, else nothing.
    pub fn position(&self, module: &Module) -> Option<String> {
        if let Some(loc) = &self.location {
            return Some(loc.to_string());
        }
        let line = self.hlo_line?;
        let file = module.source_file.as_deref().unwrap_or("<hlo>");
        Some(format!("{file}:{line}"))
    }
}

/// Renders diagnostics like rustc, followed by a one-line summary. Empty input gives "".
pub fn render(diags: &[Diagnostic], module: &Module) -> String {
    let mut out = String::new();
    for d in diags {
        render_one(&mut out, d, module);
        out.push('\n');
    }
    if !diags.is_empty() {
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for (code, name) in CODES {
            let n = diags.iter().filter(|d| d.code == code).count();
            if n > 0 {
                counts.push((name, n));
            }
        }
        let parts: Vec<String> = counts.iter().map(|(n, c)| format!("{c} {n}")).collect();
        let _ = writeln!(
            out,
            "error: module `{}` cannot run on the device: {} problem{} ({})",
            module.name,
            diags.len(),
            if diags.len() == 1 { "" } else { "s" },
            parts.join(", ")
        );
    }
    out
}

fn render_one(out: &mut String, d: &Diagnostic, module: &Module) {
    let _ = writeln!(out, "error[{}]: {}", d.code, d.message);
    if let Some(pos) = d.position(module) {
        match &d.location_via {
            Some(via) => {
                let _ = writeln!(out, "  --> {pos} (line of `{via}`)");
            }
            None => {
                let _ = writeln!(out, "  --> {pos}");
            }
        }
    }
    let gutter = d.hlo_line.map(|l| l.to_string()).unwrap_or_default();
    let width = gutter.len().max(2);
    let blank = " ".repeat(width);
    let _ = writeln!(out, "{blank} |");
    let _ = writeln!(out, "{gutter:>width$} | {}", d.instruction);
    let _ = writeln!(out, "{blank} |");
    match (d.hlo_line, &module.source_file) {
        (Some(line), Some(file)) if d.location.is_some() => {
            let _ = writeln!(
                out,
                "{blank} = note: in computation `{}`, {file}:{line}",
                d.computation
            );
        }
        _ => {
            let _ = writeln!(out, "{blank} = note: in computation `{}`", d.computation);
        }
    }
    if let Some(origin) = &d.origin {
        let _ = writeln!(
            out,
            "{blank} = note: follows from `{origin}`, reported on its own; fixing it fixes this"
        );
    }
    if let Some(note) = &d.note {
        let _ = writeln!(out, "{blank} = note: {note}");
    }
    if !d.hint.is_empty() {
        let _ = writeln!(out, "{blank} = hint: {}", d.hint);
    }
}

/// Short HLO text of an instruction: `name = shape opcode(operands)`, plus the custom-call
/// target when there is one (layouts and metadata left out).
pub(crate) fn instruction_text(comp: &Computation, id: InstrId) -> String {
    let instr = comp.get(id);
    let operands: Vec<&str> = instr
        .operands()
        .iter()
        .map(|&o| comp.get(o).name.as_str())
        .collect();
    let mut s = format!(
        "{} = {} {}({})",
        instr.name,
        instr.shape.to_text(false),
        instr.op.opcode_name(),
        operands.join(", ")
    );
    match &instr.op {
        Op::Parameter(n) => {
            s = format!(
                "{} = {} parameter({n})",
                instr.name,
                instr.shape.to_text(false)
            )
        }
        Op::Constant(crate::ir::Literal::Array(a)) if a.len() == 1 => {
            s = format!(
                "{} = {} constant({})",
                instr.name,
                instr.shape.to_text(false),
                a.data.get_f64(0)
            );
        }
        Op::CustomCall { target, .. } => {
            let _ = write!(s, ", custom_call_target=\"{target}\"");
        }
        _ => {}
    }
    s
}
