//! The second pass: resolves names, orders instructions, builds ops and the module.

use super::attributes::parse_metadata;
use super::lexer::{Cursor, LineIndex, PResult};
use super::name_uniquer::NameUniquer;
use super::ops::{AttrBag, OpBuilder};
use super::parser::{RawComputation, RawModule, RawOperands};
use crate::ir::{Computation, ComputationId, InstrId, Instruction, Module, Op};
use hashbrown::HashMap;

pub(crate) fn assemble<'a>(c: &Cursor<'a>, raw: RawModule<'a>) -> PResult<Module> {
    if raw.computations.is_empty() {
        return Err(c.error_at(c.text.len(), "the module has no computations"));
    }
    let mut ids: HashMap<&'a str, ComputationId> = HashMap::new();
    for (i, comp) in raw.computations.iter().enumerate() {
        if ids.insert(comp.name, ComputationId(i as u32)).is_some() {
            return Err(c.error_at(
                comp.name_at,
                format!("computation `{}` is defined twice", comp.name),
            ));
        }
    }
    let mut entries = raw
        .computations
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_entry);
    let entry = match (entries.next(), entries.next()) {
        (_, Some((_, second))) => {
            return Err(c.error_at(second.name_at, "a module has only one ENTRY computation"))
        }
        (Some((i, _)), None) => i,
        // Without ENTRY, XLA takes the last computation.
        (None, None) => raw.computations.len() - 1,
    };
    let lines = LineIndex::new(c.text);
    let mut module = Module::new(raw.header.name.clone());
    let builder = OpBuilder {
        cursor: c,
        computations: &ids,
    };
    let mut computations = Vec::with_capacity(raw.computations.len());
    let mut names = NameUniquer::default();
    for comp in &raw.computations {
        computations.push(build_computation(
            &builder,
            &lines,
            comp,
            &mut module,
            &mut names,
        )?);
    }
    module.computations = computations;
    module.entry = ComputationId(entry as u32);
    module.replica_count = raw.header.replica_count;
    module.num_partitions = raw.header.num_partitions;
    module.frontend_attributes = raw.header.frontend_attributes;
    module.extra_attrs = raw.header.extra_attrs;
    module.debug_info = raw.debug_info;
    Ok(module)
}

fn build_computation<'a>(
    b: &OpBuilder<'a, '_>,
    lines: &LineIndex,
    raw: &RawComputation<'a>,
    module: &mut Module,
    names: &mut NameUniquer,
) -> PResult<Computation> {
    let c = b.cursor;
    if raw.instrs.is_empty() {
        return Err(c.error_at(
            raw.close_at,
            format!("computation `{}` has no instructions", raw.name),
        ));
    }
    let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(raw.instrs.len());
    for (i, instr) in raw.instrs.iter().enumerate() {
        if by_name.insert(instr.name, i).is_some() {
            return Err(c.error_at(
                instr.name_at,
                format!(
                    "instruction `{}` is defined twice in computation `{}`",
                    instr.name, raw.name
                ),
            ));
        }
    }
    // Operand indices, checking every name is defined in this computation.
    let mut operands: Vec<Vec<usize>> = Vec::with_capacity(raw.instrs.len());
    for instr in &raw.instrs {
        let mut ops = Vec::new();
        if let RawOperands::Names(names) = &instr.operands {
            for &(name, at) in names {
                match by_name.get(name) {
                    Some(&i) => ops.push(i),
                    None => {
                        return Err(c.error_at(
                            at,
                            format!(
                                "undefined operand `{name}` (no instruction of that name in computation `{}`)",
                                raw.name
                            ),
                        ))
                    }
                }
            }
        }
        operands.push(ops);
    }
    let order = topological_order(&operands).map_err(|i| {
        c.error_at(
            raw.instrs[i].name_at,
            format!("instruction `{}` depends on itself", raw.instrs[i].name),
        )
    })?;

    let mut comp = Computation::new(raw.name);
    let mut ids: Vec<Option<InstrId>> = vec![None; raw.instrs.len()];
    let mut root: Option<usize> = None;
    let mut parameters: HashMap<u32, usize> = HashMap::new();
    for i in order {
        let r = &raw.instrs[i];
        let mut bag = AttrBag::new(c, &r.attrs);
        let op = b.build(r, &mut bag)?;
        if let Op::Parameter(n) = op {
            if parameters.insert(n, i).is_some() {
                return Err(c.error_at(
                    r.opcode_at,
                    format!("parameter number {n} is used twice in `{}`", raw.name),
                ));
            }
        }
        let metadata = match bag.take("metadata") {
            Some(mut v) => {
                let m = parse_metadata(&mut v)?;
                v.expect_end("metadata")?;
                m
            }
            None => Default::default(),
        };
        let mut instr = Instruction::new(r.name, op, r.shape.clone());
        instr.metadata = metadata;
        instr.extra_attrs = bag.leftovers();
        instr.text_line = Some(lines.line_of(r.name_at));
        let operand_ids: Vec<InstrId> = operands[i]
            .iter()
            .map(|&o| ids[o].expect("operands come first in topological order"))
            .collect();
        ids[i] = Some(comp.add(instr, &operand_ids));
        if r.is_root {
            if let Some(prev) = root {
                return Err(c.error_at(
                    r.name_at,
                    format!(
                        "computation `{}` has two ROOT instructions (`{}` and `{}`)",
                        raw.name, raw.instrs[prev].name, r.name
                    ),
                ));
            }
            root = Some(i);
        }
    }
    for n in 0..parameters.len() as u32 {
        if !parameters.contains_key(&n) {
            let (_, &any) = parameters
                .iter()
                .max_by_key(|(k, _)| **k)
                .expect("nonempty");
            return Err(c.error_at(
                raw.instrs[any].opcode_at,
                format!(
                    "computation `{}` has {} parameter(s) but no parameter({n})",
                    raw.name,
                    parameters.len()
                ),
            ));
        }
    }
    // Without ROOT, XLA takes the last instruction in the text.
    let root = root.unwrap_or(raw.instrs.len() - 1);
    comp.set_root(ids[root].expect("every instruction was added"));
    // Names unique in the module, as XLA renames them (in text order).
    for (i, r) in raw.instrs.iter().enumerate() {
        let name = names.unique(r.name);
        module.note_name(&name);
        if name != r.name {
            let id = ids[i].expect("every instruction was added");
            comp.get_mut(id).name = name;
        }
    }
    Ok(comp)
}

/// A topological order of instructions given operand indices, following text order where
/// it can. `Err(i)` names an instruction on a cycle.
fn topological_order(operands: &[Vec<usize>]) -> Result<Vec<usize>, usize> {
    const NEW: u8 = 0;
    const ACTIVE: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; operands.len()];
    let mut out = Vec::with_capacity(operands.len());
    for start in 0..operands.len() {
        if state[start] != NEW {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = ACTIVE;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&o) = operands[node].get(*next) {
                *next += 1;
                match state[o] {
                    NEW => {
                        state[o] = ACTIVE;
                        stack.push((o, 0));
                    }
                    ACTIVE => return Err(o),
                    _ => {}
                }
            } else {
                state[node] = DONE;
                out.push(node);
                stack.pop();
            }
        }
    }
    Ok(out)
}
