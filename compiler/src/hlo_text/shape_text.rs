//! Shapes in HLO text: `f32[2,3]{1,0}`, `(s32[], f32[4])`, `token[]`, `f32[?,10]`, `f32[<=10]`.

use super::lexer::{Cursor, PResult};
use crate::ir::{ArrayShape, ElementType, Shape, UNKNOWN_DIM};
use smallvec::SmallVec;
use std::fmt::Write;

/// How deeply tuple shapes may nest. Real modules nest a few levels (a while loop's state in a
/// tuple of tuples); the limit turns a pathological input into an error instead of a stack
/// overflow in the recursive descent below.
pub(crate) const MAX_TUPLE_NESTING: usize = 256;

/// Parses a shape. Layouts (`{1,0}`, `{0,1:T(8,128)}`) are checked for balance and dropped.
pub(crate) fn parse_shape(c: &mut Cursor) -> PResult<Shape> {
    parse_shape_nested(c, 0)
}

fn parse_shape_nested(c: &mut Cursor, depth: usize) -> PResult<Shape> {
    c.skip_ws();
    if c.peek() == Some(b'(') {
        if depth >= MAX_TUPLE_NESTING {
            return Err(c.error(format!(
                "tuple shapes nest more than {MAX_TUPLE_NESTING} levels deep here"
            )));
        }
        c.pos += 1;
        let mut elems = Vec::new();
        if c.eat(")") {
            return Ok(Shape::Tuple(elems));
        }
        loop {
            elems.push(parse_shape_nested(c, depth + 1)?);
            if c.eat(")") {
                return Ok(Shape::Tuple(elems));
            }
            if !c.eat(",") {
                return Err(c.error(format!(
                    "expected `,` or `)` in a tuple shape, found {}",
                    c.describe_next()
                )));
            }
        }
    }
    let start = c.pos;
    let word = c.word();
    if word.is_empty() {
        return Err(c.error(format!("expected a shape, found {}", c.describe_next())));
    }
    let element_type = if word == "token" {
        None
    } else {
        match ElementType::from_name(word) {
            Some(t) => Some(t),
            None => {
                return Err(c.error_at(
                    start,
                    format!("malformed shape: unknown element type `{word}`"),
                ))
            }
        }
    };
    if c.peek() != Some(b'[') {
        return Err(c.error(format!(
            "malformed shape: expected `[` after `{word}`, found {}",
            c.describe_next()
        )));
    }
    c.pos += 1;
    let mut dims: SmallVec<[i64; 4]> = SmallVec::new();
    let mut dynamic: SmallVec<[bool; 4]> = SmallVec::new();
    c.skip_inline_ws();
    if c.peek() != Some(b']') {
        loop {
            c.skip_inline_ws();
            if c.peek() == Some(b'?') {
                c.pos += 1;
                dims.push(UNKNOWN_DIM);
                dynamic.push(true);
            } else if c.starts_with("<=") {
                c.pos += 2;
                let at = c.pos;
                let n = c.int()?;
                if n < 0 {
                    return Err(c.error_at(at, "malformed shape: negative dimension bound"));
                }
                dims.push(n);
                dynamic.push(true);
            } else {
                let at = c.pos;
                if !matches!(c.peek(), Some(b'0'..=b'9')) {
                    return Err(c.error(format!(
                        "malformed shape: expected a dimension size, found {}",
                        c.describe_next()
                    )));
                }
                let n = c.int()?;
                if n < 0 {
                    return Err(c.error_at(at, "malformed shape: negative dimension"));
                }
                dims.push(n);
                dynamic.push(false);
            }
            c.skip_inline_ws();
            match c.peek() {
                Some(b',') => c.pos += 1,
                Some(b']') => break,
                _ => {
                    return Err(c.error(format!(
                        "malformed shape: expected `,` or `]`, found {}",
                        c.describe_next()
                    )))
                }
            }
        }
    }
    c.pos += 1; // `]`
    let Some(element_type) = element_type else {
        if !dims.is_empty() {
            return Err(c.error_at(start, "malformed shape: `token` has no dimensions"));
        }
        return Ok(Shape::Token);
    };
    if c.peek() == Some(b'{') {
        let at = c.pos;
        skip_layout(c)?;
        check_minor_to_major(c, at, dims.len())?;
    }
    if !dynamic.iter().any(|&d| d) {
        dynamic.clear();
    }
    Ok(Shape::Array(ArrayShape {
        element_type,
        dims,
        dynamic,
    }))
}

/// Skips `{...}` (with nested parentheses for tiles) after an array shape.
fn skip_layout(c: &mut Cursor) -> PResult<()> {
    let start = c.pos;
    let mut depth = 0i32;
    while let Some(ch) = c.peek() {
        match ch {
            b'{' | b'(' => depth += 1,
            b'}' | b')' => {
                depth -= 1;
                if depth == 0 {
                    c.pos += 1;
                    return Ok(());
                }
            }
            b'\n' => break,
            _ => {}
        }
        c.bump();
    }
    Err(c.error_at(start, "malformed shape: unterminated layout `{`"))
}

/// The layout's minor-to-major list (before any `:` tiling or memory space) must be empty or a
/// permutation of the dimensions: `f32[2,2]{5,0}` is an error, not silently dropped.
fn check_minor_to_major(c: &Cursor, at: usize, rank: usize) -> PResult<()> {
    let inner = &c.text[at + 1..c.pos - 1];
    let list = inner.split(':').next().unwrap_or("").trim();
    if list.is_empty() {
        return Ok(());
    }
    let mut seen = vec![false; rank];
    let mut count = 0;
    for item in list.split(',') {
        let dim = item.trim().parse::<usize>().ok().filter(|&d| d < rank);
        match dim {
            Some(d) if !seen[d] => {
                seen[d] = true;
                count += 1;
            }
            _ => break,
        }
    }
    if count != rank || list.split(',').count() != rank {
        return Err(c.error_at(
            at,
            format!(
                "malformed shape: layout {{{list}}} is not a permutation of the {rank} dimensions"
            ),
        ));
    }
    Ok(())
}

/// Shape text with the default row-major layout; tuples get XLA's `/*index=N*/` markers
/// before every fifth element.
pub(crate) fn shape_to_text(shape: &Shape) -> String {
    let mut out = String::new();
    write_shape(&mut out, shape);
    out
}

fn write_shape(out: &mut String, shape: &Shape) {
    match shape {
        Shape::Tuple(elems) => {
            out.push('(');
            for (i, e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                    if i % 5 == 0 {
                        let _ = write!(out, "/*index={i}*/");
                    }
                }
                write_shape(out, e);
            }
            out.push(')');
        }
        other => out.push_str(&other.to_text(true)),
    }
}
