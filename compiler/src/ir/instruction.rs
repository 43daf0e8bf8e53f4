//! One instruction: an op, its operands, its static shape, its name and metadata.

use super::metadata::Metadata;
use super::op::Op;
use super::shape::Shape;
use petgraph::stable_graph::NodeIndex;
use smallvec::SmallVec;

/// Identifies an instruction inside its computation (a node of the computation's graph).
pub type InstrId = NodeIndex<u32>;

pub type Operands = SmallVec<[InstrId; 3]>;

#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    /// Unique within the module, e.g. `add.3`.
    pub name: String,
    pub op: Op,
    pub shape: Shape,
    /// Operands in order. Changed only through [`super::Computation`] so that the graph's
    /// use edges stay in step.
    pub(crate) operands: Operands,
    pub metadata: Metadata,
    /// Attributes the compiler does not interpret, kept verbatim (name, text) so that
    /// printing reproduces them: `frontend_attributes`, `sharding`, `backend_config`, ...
    pub extra_attrs: Vec<(String, String)>,
    /// 1-based line of the HLO text this instruction was parsed from.
    pub text_line: Option<u32>,
}

impl Instruction {
    pub fn new(name: impl Into<String>, op: Op, shape: Shape) -> Instruction {
        Instruction {
            name: name.into(),
            op,
            shape,
            operands: SmallVec::new(),
            metadata: Metadata::default(),
            extra_attrs: Vec::new(),
            text_line: None,
        }
    }

    pub fn operands(&self) -> &[InstrId] {
        &self.operands
    }

    pub fn operand(&self, i: usize) -> InstrId {
        self.operands[i]
    }

    pub(crate) fn extra_attr(&self, name: &str) -> Option<&str> {
        self.extra_attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}
