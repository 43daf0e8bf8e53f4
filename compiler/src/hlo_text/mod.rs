//! HLO text: the syntax XLA and JAX write (`HloModule ...`), parsed into the IR and printed
//! back, either in full (metadata and debug tables kept) or in canonical form for golden
//! files (stable names, no metadata).
//!
//! ```text
//! HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}
//!
//! ENTRY main {
//!   x = f32[4]{0} parameter(0)
//!   ROOT y = f32[4]{0} sine(x), metadata={op_name="sin"}
//! }
//! ```

mod assemble;
mod attributes;
mod canonical;
mod compare;
mod error;
mod lexer;
mod literal_text;
mod name_uniquer;
mod ops;
mod parser;
mod printer;
mod shape_text;

pub use compare::module_difference;
pub use error::ParseError;
pub use printer::{print_module, PrintOptions};

use crate::ir::Module;
use lexer::Cursor;

/// Parses HLO module text. `file_name` is used in error messages.
pub fn parse_module(text: &str, file_name: Option<&str>) -> Result<Module, ParseError> {
    let mut cursor = Cursor::new(text, file_name);
    if text.starts_with('\u{feff}') {
        cursor.pos = '\u{feff}'.len_utf8(); // a byte-order mark some editors write
    }
    let raw = parser::parse_raw(&mut cursor)?;
    assemble::assemble(&cursor, raw)
}

/// Reads and parses an HLO file; sets [`Module::source_file`].
pub fn parse_module_file(path: &std::path::Path) -> Result<Module, ParseError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| ParseError::without_position(Some(&name), format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        // Point at the first bad byte: the text before it is valid and locates it.
        let valid = e.as_bytes().len().min(e.utf8_error().valid_up_to());
        let before = std::str::from_utf8(&e.as_bytes()[..valid]).unwrap_or_default();
        ParseError::at(
            before,
            valid,
            Some(&name),
            format!("invalid UTF-8 (byte 0x{:02x})", e.as_bytes()[valid]),
        )
    })?;
    let mut module = parse_module(&text, Some(&name))?;
    module.source_file = Some(name);
    Ok(module)
}

/// Parses `frontend_attributes={k="v",...}` text (as kept in `Instruction::extra_attrs`)
/// into `(key, value)` pairs with quoted values unescaped.
pub(crate) fn parse_frontend_attributes(text: &str) -> Result<Vec<(String, String)>, ParseError> {
    let mut c = Cursor::new(text, None);
    let pairs = attributes::parse_frontend_attributes(&mut c)?;
    c.expect_end("frontend attributes")?;
    pairs
        .into_iter()
        .map(|(k, v)| {
            if v.starts_with('"') {
                let mut vc = Cursor::new(&v, None);
                let s = vc.string()?;
                vc.expect_end("a string")?;
                Ok((k, s))
            } else {
                Ok((k, v))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod round_trip_props;
