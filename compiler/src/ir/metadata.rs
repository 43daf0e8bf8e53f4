//! Where an instruction came from: op name scope, source location, and JAX's debug tables.

use std::fmt;

/// A position in a user's source file (Rust for traces, Python for JAX modules).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceLocation {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.column > 0 {
            write!(f, "{}:{}:{}", self.file, self.line, self.column)
        } else {
            write!(f, "{}:{}", self.file, self.line)
        }
    }
}

/// `metadata={op_type=".." op_name=".." source_file=".." source_line=N stack_frame_id=N}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Metadata {
    pub op_type: Option<String>,
    /// The name scope path, e.g. `jit(step)/conv1/conv_general_dilated`.
    pub op_name: Option<String>,
    pub source: Option<SourceLocation>,
    /// Index into the module's [`DebugInfo::stack_frames`] (JAX's `debug_info=True`).
    pub stack_frame_id: Option<u32>,
}

impl Metadata {
    pub fn is_empty(&self) -> bool {
        self.op_type.is_none()
            && self.op_name.is_none()
            && self.source.is_none()
            && self.stack_frame_id.is_none()
    }
}

/// One row of JAX's `FileLocations` table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileLocation {
    pub file_name_id: u32,
    pub function_name_id: u32,
    pub line: u32,
    pub end_line: u32,
    pub column: u32,
    pub end_column: u32,
}

/// One row of JAX's `StackFrames` table; `parent_frame_id` 0 means none... in XLA's numbering
/// ids start at 1 and a frame may name itself as parent when it is outermost.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StackFrame {
    pub file_location_id: u32,
    pub parent_frame_id: u32,
}

/// The debug tables JAX writes between the module header and the first computation.
/// Each table is kept as `(id, row)` in text order so that printing reproduces it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DebugInfo {
    pub file_names: Vec<(u32, String)>,
    pub function_names: Vec<(u32, String)>,
    pub file_locations: Vec<(u32, FileLocation)>,
    pub stack_frames: Vec<(u32, StackFrame)>,
}

impl DebugInfo {
    pub fn is_empty(&self) -> bool {
        self.file_names.is_empty()
            && self.function_names.is_empty()
            && self.file_locations.is_empty()
            && self.stack_frames.is_empty()
    }

    fn file_name(&self, id: u32) -> Option<&str> {
        self.file_names
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, s)| s.as_str())
    }

    fn file_location(&self, id: u32) -> Option<&FileLocation> {
        self.file_locations
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, l)| l)
    }

    fn stack_frame(&self, id: u32) -> Option<&StackFrame> {
        self.stack_frames
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, f)| f)
    }

    /// The innermost source location of a stack frame: the user's line.
    pub fn resolve(&self, stack_frame_id: u32) -> Option<SourceLocation> {
        let frame = self.stack_frame(stack_frame_id)?;
        let loc = self.file_location(frame.file_location_id)?;
        Some(SourceLocation {
            file: self.file_name(loc.file_name_id)?.to_string(),
            line: loc.line,
            column: loc.column,
        })
    }
}
