//! A module: computations (one entry), module attributes and debug tables.

use super::computation::Computation;
use super::instruction::{InstrId, Instruction};
use super::metadata::{DebugInfo, SourceLocation};
use super::shape::Shape;
use std::fmt;

/// Index of a computation in [`Module::computations`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComputationId(pub u32);

impl fmt::Display for ComputationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "computation#{}", self.0)
    }
}

#[derive(Clone, Debug)]
pub struct Module {
    pub name: String,
    /// Computations in text order; called computations come before their callers.
    pub computations: Vec<Computation>,
    pub entry: ComputationId,
    pub replica_count: Option<i64>,
    pub num_partitions: Option<i64>,
    /// `frontend_attributes={k=v,...}` of the module header, verbatim `(key, value)`.
    pub frontend_attributes: Vec<(String, String)>,
    /// Other header attributes kept verbatim, in text order.
    pub extra_attrs: Vec<(String, String)>,
    pub debug_info: DebugInfo,
    /// The file this module was read from, for diagnostics.
    pub source_file: Option<String>,
    /// Next suffix for [`Module::unique_name`]; kept above every numeric suffix in use.
    pub next_name_suffix: u64,
}

impl Module {
    /// A module with an empty entry computation named `name`.
    pub fn new(name: impl Into<String>) -> Module {
        let name = name.into();
        Module {
            computations: vec![Computation::new(format!("main.{name}"))],
            name,
            entry: ComputationId(0),
            replica_count: None,
            num_partitions: None,
            frontend_attributes: Vec::new(),
            extra_attrs: Vec::new(),
            debug_info: DebugInfo::default(),
            source_file: None,
            next_name_suffix: 1,
        }
    }

    /// A fresh instruction name `base.N`, unique in the module as long as every name with a
    /// numeric suffix was registered through [`Module::note_name`] or made here.
    pub fn unique_name(&mut self, base: &str) -> String {
        let n = self.next_name_suffix;
        self.next_name_suffix += 1;
        format!("{base}.{n}")
    }

    /// Records a name made elsewhere (the parser) so that [`Module::unique_name`] avoids it.
    pub(crate) fn note_name(&mut self, name: &str) {
        if let Some((_, suffix)) = name.rsplit_once('.') {
            if let Ok(n) = suffix.parse::<u64>() {
                self.next_name_suffix = self.next_name_suffix.max(n + 1);
            }
        }
    }

    pub fn computation(&self, id: ComputationId) -> &Computation {
        &self.computations[id.0 as usize]
    }

    pub fn computation_mut(&mut self, id: ComputationId) -> &mut Computation {
        &mut self.computations[id.0 as usize]
    }

    pub fn entry(&self) -> &Computation {
        self.computation(self.entry)
    }

    pub fn entry_mut(&mut self) -> &mut Computation {
        let e = self.entry;
        self.computation_mut(e)
    }

    /// Adds a computation (before the entry in text order is up to the printer).
    pub fn add_computation(&mut self, c: Computation) -> ComputationId {
        self.computations.push(c);
        ComputationId(self.computations.len() as u32 - 1)
    }

    pub fn computation_ids(&self) -> impl Iterator<Item = ComputationId> {
        (0..self.computations.len() as u32).map(ComputationId)
    }

    pub(crate) fn find_computation(&self, name: &str) -> Option<ComputationId> {
        self.computations
            .iter()
            .position(|c| c.name == name)
            .map(|i| ComputationId(i as u32))
    }

    /// The entry's parameter shapes and result shape.
    pub fn entry_signature(&self) -> (Vec<Shape>, Shape) {
        let e = self.entry();
        let params = e
            .parameters()
            .into_iter()
            .map(|p| e.get(p).shape.clone())
            .collect();
        (params, e.get(e.root()).shape.clone())
    }

    /// The best source location for an instruction: its own `source_file`/`source_line`,
    /// else JAX's stack frame resolved through the debug tables.
    pub fn source_location(&self, instr: &Instruction) -> Option<SourceLocation> {
        if let Some(s) = &instr.metadata.source {
            return Some(s.clone());
        }
        instr
            .metadata
            .stack_frame_id
            .and_then(|id| self.debug_info.resolve(id))
    }

    /// A name for an instruction that is unique in the module: `computation/instruction`.
    pub fn describe(&self, comp: ComputationId, id: InstrId) -> String {
        format!(
            "{} in {}",
            self.computation(comp).get(id).name,
            self.computation(comp).name
        )
    }

    /// Computations in post-order of the call graph (callees before callers), entry last;
    /// computations that nothing reaches come first in stored order.
    pub(crate) fn computation_post_order(&self) -> Vec<ComputationId> {
        let mut visited = vec![false; self.computations.len()];
        let mut out = Vec::new();
        fn visit(
            m: &Module,
            c: ComputationId,
            visited: &mut Vec<bool>,
            out: &mut Vec<ComputationId>,
        ) {
            if visited[c.0 as usize] {
                return;
            }
            visited[c.0 as usize] = true;
            let comp = m.computation(c);
            for id in comp.post_order() {
                for callee in comp.get(id).op.called_computations() {
                    visit(m, callee, visited, out);
                }
            }
            out.push(c);
        }
        let mut reached = vec![false; self.computations.len()];
        {
            let mut order = Vec::new();
            let mut v = vec![false; self.computations.len()];
            visit(self, self.entry, &mut v, &mut order);
            for c in order {
                reached[c.0 as usize] = true;
            }
        }
        for c in self.computation_ids() {
            if !reached[c.0 as usize] {
                visit(self, c, &mut visited, &mut out);
            }
        }
        visit(self, self.entry, &mut visited, &mut out);
        out
    }

    /// Total instruction count over all computations.
    pub fn instruction_count(&self) -> usize {
        self.computations.iter().map(|c| c.len()).sum()
    }
}
