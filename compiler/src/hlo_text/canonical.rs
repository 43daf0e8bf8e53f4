//! Names used when printing: as written, or canonical (stable names for golden files).
//!
//! Canonical names depend only on the module's structure and order: computations are
//! `computation.N` in print order (the entry is `main`); instructions are `opcode.N`, numbered
//! per opcode within their computation in print order, and parameters are `parameter.N` by
//! number. Renaming instructions or computations in the source leaves canonical text unchanged.

use crate::ir::{Computation, ComputationId, InstrId, Module, Op};
use hashbrown::HashMap;

pub(crate) struct Names {
    computations: Vec<String>,
    /// Per computation, the printed name of each instruction; `None` prints names as written.
    instructions: Option<Vec<HashMap<InstrId, String>>>,
}

impl Names {
    pub fn as_written(m: &Module) -> Names {
        Names {
            computations: m.computations.iter().map(|c| c.name.clone()).collect(),
            instructions: None,
        }
    }

    pub fn canonical(m: &Module) -> Names {
        let mut computations = vec![String::new(); m.computations.len()];
        let mut instructions = vec![HashMap::new(); m.computations.len()];
        let mut n = 0;
        for cid in m.computation_post_order() {
            let i = cid.0 as usize;
            computations[i] = if cid == m.entry {
                "main".to_string()
            } else {
                n += 1;
                format!("computation.{}", n - 1)
            };
            let comp = m.computation(cid);
            let mut counters: HashMap<&'static str, usize> = HashMap::new();
            for id in comp.post_order() {
                let op = &comp.get(id).op;
                let name = match op {
                    // Parameters are unique by number, which reads better than print order.
                    Op::Parameter(n) => format!("parameter.{n}"),
                    _ => {
                        let opcode = op.opcode_name();
                        let k = counters.entry(opcode).or_insert(0);
                        *k += 1;
                        format!("{opcode}.{}", *k - 1)
                    }
                };
                instructions[i].insert(id, name);
            }
        }
        Names {
            computations,
            instructions: Some(instructions),
        }
    }

    pub fn computation(&self, c: ComputationId) -> &str {
        &self.computations[c.0 as usize]
    }

    pub fn instruction(&self, c: ComputationId, id: InstrId, comp: &Computation) -> String {
        match &self.instructions {
            Some(maps) => maps[c.0 as usize]
                .get(&id)
                .cloned()
                .unwrap_or_else(|| comp.get(id).name.clone()),
            None => comp.get(id).name.clone(),
        }
    }
}
