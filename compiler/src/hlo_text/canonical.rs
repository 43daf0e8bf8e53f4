//! Names used when printing: as written, or canonical (stable names for golden files).
//!
//! Canonical names depend only on the module's structure and order: computations are
//! `computation.N` in print order (the entry is `main`); instructions are `opcode.N`, numbered
//! per opcode across the module in print order (callees first), so that they are unique in the
//! module as HLO requires. Renaming instructions or computations in the source leaves
//! canonical text unchanged.

use crate::ir::{Computation, ComputationId, InstrId, Module};
use hashbrown::HashMap;

pub(crate) struct Names {
    computations: Vec<String>,
    /// Per computation, the printed name of each instruction; `None` prints names as written.
    instructions: Option<Vec<HashMap<InstrId, String>>>,
}

impl Names {
    pub(crate) fn as_written(m: &Module) -> Names {
        Names {
            computations: m.computations.iter().map(|c| c.name.clone()).collect(),
            instructions: None,
        }
    }

    pub(super) fn canonical(m: &Module) -> Names {
        let mut computations = vec![String::new(); m.computations.len()];
        let mut instructions = vec![HashMap::new(); m.computations.len()];
        let mut n = 0;
        let mut counters: HashMap<&'static str, usize> = HashMap::new();
        for cid in m.computation_post_order() {
            let i = cid.0 as usize;
            computations[i] = if cid == m.entry {
                "main".to_string()
            } else {
                n += 1;
                format!("computation.{}", n - 1)
            };
            let comp = m.computation(cid);
            for id in comp.post_order() {
                let opcode = comp.get(id).op.opcode_name();
                let k = counters.entry(opcode).or_insert(0);
                instructions[i].insert(id, format!("{opcode}.{k}"));
                *k += 1;
            }
        }
        Names {
            computations,
            instructions: Some(instructions),
        }
    }

    pub(super) fn computation(&self, c: ComputationId) -> &str {
        &self.computations[c.0 as usize]
    }

    pub(super) fn instruction(&self, c: ComputationId, id: InstrId, comp: &Computation) -> String {
        match &self.instructions {
            Some(maps) => maps[c.0 as usize]
                .get(&id)
                .cloned()
                .unwrap_or_else(|| comp.get(id).name.clone()),
            None => comp.get(id).name.clone(),
        }
    }
}
