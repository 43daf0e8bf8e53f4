//! The first pass over HLO text: header, debug tables, computations and instructions as
//! spans of text. Names are resolved and ops built afterwards (see `assemble`), so that a
//! computation can be called before it is defined.

use super::attributes::parse_frontend_attributes;
use super::lexer::{Cursor, PResult};
use super::ops::check_opcode;
use super::shape_text::parse_shape;
use crate::ir::{DebugInfo, ElementType, FileLocation, Shape, StackFrame};

/// `HloModule name, key=value, ...`
pub(crate) struct Header {
    pub name: String,
    pub replica_count: Option<i64>,
    pub num_partitions: Option<i64>,
    pub frontend_attributes: Vec<(String, String)>,
    pub extra_attrs: Vec<(String, String)>,
}

/// `key=value` after an instruction; the value is kept as a span of the source.
#[derive(Clone, Copy)]
pub(crate) struct RawAttr<'a> {
    pub key: &'a str,
    pub value: (usize, usize),
}

pub(crate) enum RawOperands<'a> {
    /// Operand names with their positions.
    Names(Vec<(&'a str, usize)>),
    /// The text inside `constant(...)` or `parameter(...)`.
    Text(usize, usize),
}

pub(crate) struct RawInstr<'a> {
    pub name: &'a str,
    pub name_at: usize,
    pub is_root: bool,
    pub shape: Shape,
    pub opcode: &'a str,
    pub opcode_at: usize,
    pub operands: RawOperands<'a>,
    pub attrs: Vec<RawAttr<'a>>,
}

pub(crate) struct RawComputation<'a> {
    pub name: &'a str,
    pub name_at: usize,
    pub is_entry: bool,
    pub instrs: Vec<RawInstr<'a>>,
    /// Position of the closing `}` (for errors about the whole computation).
    pub close_at: usize,
}

pub(crate) struct RawModule<'a> {
    pub header: Header,
    pub debug_info: DebugInfo,
    pub computations: Vec<RawComputation<'a>>,
}

pub(crate) fn parse_raw<'a>(c: &mut Cursor<'a>) -> PResult<RawModule<'a>> {
    let header = parse_header(c)?;
    let debug_info = parse_debug_tables(c)?;
    let mut computations = Vec::new();
    loop {
        c.skip_ws();
        if c.at_end() {
            break;
        }
        computations.push(parse_computation(c)?);
    }
    Ok(RawModule {
        header,
        debug_info,
        computations,
    })
}

/// Consumes `keyword` if the next word is exactly it.
fn eat_keyword(c: &mut Cursor, keyword: &str) -> bool {
    c.skip_ws();
    let save = c.pos;
    if c.word() == keyword {
        true
    } else {
        c.pos = save;
        false
    }
}

fn parse_header(c: &mut Cursor) -> PResult<Header> {
    if !eat_keyword(c, "HloModule") {
        return Err(c.error(format!("expected `HloModule`, found {}", c.describe_next())));
    }
    let (name, _) = c.name("a module name")?;
    let mut header = Header {
        name: name.to_string(),
        replica_count: None,
        num_partitions: None,
        frontend_attributes: Vec::new(),
        extra_attrs: Vec::new(),
    };
    loop {
        c.skip_inline_ws();
        if c.peek() != Some(b',') {
            break;
        }
        c.pos += 1;
        let (key, key_at) = c.name("an attribute name")?;
        c.expect("=")?;
        let (s, e) = c.balanced_value()?;
        let mut v = c.span(s, e);
        match key {
            "entry_computation_layout" => {
                // Checked for syntax; the printer rebuilds it from the entry's signature.
                v.expect("{")?;
                v.skip_ws();
                if v.peek() == Some(b'(') {
                    v.pos += 1;
                    if !v.eat(")") {
                        loop {
                            parse_shape(&mut v)?;
                            if v.eat(")") {
                                break;
                            }
                            v.expect(",")?;
                        }
                    }
                } else {
                    return Err(v.error("expected `(` in entry_computation_layout"));
                }
                v.expect("->")?;
                parse_shape(&mut v)?;
                v.expect("}")?;
            }
            "replica_count" => header.replica_count = Some(v.int()?),
            "num_partitions" => header.num_partitions = Some(v.int()?),
            "frontend_attributes" => {
                header.frontend_attributes = parse_frontend_attributes(&mut v)?
            }
            _ => {
                if header.extra_attrs.iter().any(|(k, _)| k == key) {
                    return Err(c.error_at(key_at, format!("attribute `{key}` given twice")));
                }
                header
                    .extra_attrs
                    .push((key.to_string(), c.text[s..e].to_string()));
                v.pos = v.end;
            }
        }
        v.expect_end(&format!("`{key}`"))?;
    }
    c.skip_inline_ws();
    if !(c.at_end() || c.peek() == Some(b'\n') || c.starts_with("//")) {
        return Err(c.error(format!(
            "unexpected {} in the module header",
            c.describe_next()
        )));
    }
    Ok(header)
}

/// JAX's `FileNames`, `FunctionNames`, `FileLocations` and `StackFrames` tables.
fn parse_debug_tables(c: &mut Cursor) -> PResult<DebugInfo> {
    let mut info = DebugInfo::default();
    loop {
        c.skip_ws();
        let save = c.pos;
        let table = c.word();
        let is_table = matches!(
            table,
            "FileNames" | "FunctionNames" | "FileLocations" | "StackFrames"
        );
        if !is_table || !next_line_is_row(c) {
            c.pos = save;
            return Ok(info);
        }
        loop {
            c.skip_ws();
            if !matches!(c.peek(), Some(b'0'..=b'9')) {
                break;
            }
            let id = c.u32()?;
            match table {
                "FileNames" => info.file_names.push((id, c.string()?)),
                "FunctionNames" => info.function_names.push((id, c.string()?)),
                "FileLocations" => {
                    let f = parse_fields(
                        c,
                        &[
                            "file_name_id",
                            "function_name_id",
                            "line",
                            "end_line",
                            "column",
                            "end_column",
                        ],
                    )?;
                    info.file_locations.push((
                        id,
                        FileLocation {
                            file_name_id: f[0],
                            function_name_id: f[1],
                            line: f[2],
                            end_line: f[3],
                            column: f[4],
                            end_column: f[5],
                        },
                    ));
                }
                _ => {
                    let f = parse_fields(c, &["file_location_id", "parent_frame_id"])?;
                    info.stack_frames.push((
                        id,
                        StackFrame {
                            file_location_id: f[0],
                            parent_frame_id: f[1],
                        },
                    ));
                }
            }
        }
    }
}

/// A table title is followed by rows on the next lines; a computation named like a table
/// (`FileNames {`) is not a table.
fn next_line_is_row(c: &Cursor) -> bool {
    let mut probe = c.clone();
    probe.skip_ws();
    matches!(probe.peek(), Some(b'0'..=b'9'))
}

/// `{a=1 b=2}` with the given field names (missing fields are 0).
fn parse_fields(c: &mut Cursor, names: &[&str]) -> PResult<Vec<u32>> {
    let mut out = vec![0u32; names.len()];
    c.expect("{")?;
    loop {
        if c.eat("}") {
            return Ok(out);
        }
        let (key, at) = c.name("a field name")?;
        c.expect("=")?;
        let v = c.u32()?;
        match names.iter().position(|&n| n == key) {
            Some(i) => out[i] = v,
            None => return Err(c.error_at(at, format!("unknown field `{key}`"))),
        }
    }
}

fn parse_computation<'a>(c: &mut Cursor<'a>) -> PResult<RawComputation<'a>> {
    let is_entry = eat_keyword(c, "ENTRY");
    let (name, name_at) = c.name("a computation name")?;
    c.skip_ws();
    if c.peek() == Some(b'(') {
        // XLA's long form `name (p: f32[]) -> f32[] {`: the signature repeats the
        // parameters' shapes, so it is checked for syntax and dropped.
        c.group()?;
        c.expect("->")?;
        parse_shape(c)?;
    }
    c.skip_ws();
    let open_at = c.pos;
    c.expect("{")?;
    let mut instrs = Vec::new();
    loop {
        c.skip_ws();
        if c.at_end() {
            return Err(c.error_at(
                open_at,
                format!("unterminated `{{`: computation `{name}` has no closing `}}`"),
            ));
        }
        if c.peek() == Some(b'}') {
            let close_at = c.pos;
            c.pos += 1;
            return Ok(RawComputation {
                name,
                name_at,
                is_entry,
                instrs,
                close_at,
            });
        }
        instrs.push(parse_instruction(c)?);
    }
}

fn parse_instruction<'a>(c: &mut Cursor<'a>) -> PResult<RawInstr<'a>> {
    let is_root = eat_keyword(c, "ROOT");
    let (name, name_at) = c.name("an instruction name")?;
    c.expect("=")?;
    let shape = parse_shape(c)?;
    c.skip_ws();
    let opcode_at = c.pos;
    let opcode = c.word();
    if opcode.is_empty() {
        return Err(c.error(format!("expected an opcode, found {}", c.describe_next())));
    }
    check_opcode(opcode).map_err(|m| c.error_at(opcode_at, m))?;
    c.skip_ws();
    if c.peek() != Some(b'(') {
        return Err(c.error(format!(
            "expected `(` after `{opcode}`, found {}",
            c.describe_next()
        )));
    }
    let operands = if opcode == "constant" || opcode == "parameter" {
        let (s, e) = c.group()?;
        RawOperands::Text(s, e)
    } else {
        c.pos += 1;
        RawOperands::Names(parse_operand_names(c)?)
    };
    let mut attrs: Vec<RawAttr> = Vec::new();
    loop {
        c.skip_inline_ws();
        match c.peek() {
            Some(b',') => c.pos += 1,
            None | Some(b'\n' | b'}') => break,
            _ if c.starts_with("//") => break,
            _ => {
                return Err(c.error(format!(
                    "expected `,` or the end of the instruction, found {}",
                    c.describe_next()
                )))
            }
        }
        let (key, key_at) = c.name("an attribute name")?;
        c.expect("=")?;
        let value = c.balanced_value()?;
        if attrs.iter().any(|a| a.key == key) {
            return Err(c.error_at(key_at, format!("attribute `{key}` given twice")));
        }
        attrs.push(RawAttr { key, value });
    }
    Ok(RawInstr {
        name,
        name_at,
        is_root,
        shape,
        opcode,
        opcode_at,
        operands,
        attrs,
    })
}

/// `a, b)` or XLA's long form `f32[2]{0} %a, f32[2]{0} %b)`; the shapes are dropped.
fn parse_operand_names<'a>(c: &mut Cursor<'a>) -> PResult<Vec<(&'a str, usize)>> {
    let mut out = Vec::new();
    if c.eat(")") {
        return Ok(out);
    }
    loop {
        c.skip_ws();
        if c.peek() == Some(b'(') || starts_with_array_shape(c) {
            parse_shape(c)?;
        }
        out.push(c.name("an operand name")?);
        if c.eat(")") {
            return Ok(out);
        }
        if !c.eat(",") {
            return Err(c.error(format!(
                "expected `,` or `)` after an operand, found {}",
                c.describe_next()
            )));
        }
    }
}

fn starts_with_array_shape(c: &Cursor) -> bool {
    let mut probe = c.clone();
    let w = probe.word();
    (w == "token" || ElementType::from_name(w).is_some()) && probe.peek() == Some(b'[')
}
