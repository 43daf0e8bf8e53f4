//! The IR: HLO modules, computations, instructions, shapes and values.

pub mod computation;
pub mod element_type;
pub mod instruction;
pub mod literal;
pub mod metadata;
pub mod module;
pub mod op;
pub mod shape;

pub use computation::Computation;
pub use element_type::ElementType;
pub use instruction::{InstrId, Instruction};
pub use literal::{Array, ArrayData, ArrayError, Literal};
pub use metadata::{DebugInfo, FileLocation, Metadata, SourceLocation, StackFrame};
pub use module::{ComputationId, Module};
pub use op::*;
pub(crate) use shape::UNKNOWN_DIM;
pub use shape::{ArrayShape, Dims, Shape};
