//! A cursor over HLO text: whitespace and comments, names, integers, strings, balanced spans.
//!
//! HLO's attribute syntax is irregular (`2_2x2_2`, `b01f_01io->b01f`, `[2,2]<=[4]`), so the
//! parser reads characters directly through this cursor instead of a fixed token stream.

use super::error::ParseError;

pub(crate) type PResult<T> = Result<T, ParseError>;

#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    /// The whole source text (positions are byte offsets into it).
    pub text: &'a str,
    pub pos: usize,
    /// Reading stops here (a sub-cursor over an attribute value ends before the whole text).
    pub end: usize,
    pub file: Option<&'a str>,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(text: &'a str, file: Option<&'a str>) -> Self {
        Cursor {
            text,
            pos: 0,
            end: text.len(),
            file,
        }
    }

    /// A cursor over `start..end` of the same text, so that errors keep their true position.
    pub(super) fn span(&self, start: usize, end: usize) -> Cursor<'a> {
        Cursor {
            text: self.text,
            pos: start,
            end,
            file: self.file,
        }
    }

    pub(crate) fn error_at(&self, offset: usize, message: impl Into<String>) -> ParseError {
        ParseError::at(self.text, offset, self.file, message)
    }

    pub(super) fn error(&self, message: impl Into<String>) -> ParseError {
        self.error_at(self.pos, message)
    }

    pub(super) fn rest(&self) -> &'a str {
        &self.text[self.pos..self.end]
    }

    pub(super) fn peek(&self) -> Option<u8> {
        self.peek_at(0)
    }

    pub(crate) fn peek_at(&self, n: usize) -> Option<u8> {
        let i = self.pos + n;
        if i < self.end {
            Some(self.text.as_bytes()[i])
        } else {
            None
        }
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    pub(super) fn starts_with(&self, s: &str) -> bool {
        self.rest().starts_with(s)
    }

    /// Advances over one character (never splitting a UTF-8 sequence).
    pub(crate) fn bump(&mut self) {
        if let Some(c) = self.rest().chars().next() {
            self.pos += c.len_utf8();
        }
    }

    /// Skips spaces, tabs, newlines and comments (`/* ... */`, `// ...`).
    pub(crate) fn skip_ws(&mut self) {
        self.skip(true);
    }

    /// Skips spaces, tabs and `/* ... */` comments on the current line.
    pub(crate) fn skip_inline_ws(&mut self) {
        self.skip(false);
    }

    fn skip(&mut self, newlines: bool) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r') => self.pos += 1,
                Some(b'\n') if newlines => self.pos += 1,
                Some(b'/') if self.peek_at(1) == Some(b'*') => {
                    match self.rest()[2..].find("*/") {
                        Some(i) => self.pos += i + 4,
                        // An unterminated comment: stop before it so the caller reports it.
                        None => return,
                    }
                }
                Some(b'/') if newlines && self.peek_at(1) == Some(b'/') => {
                    match self.rest().find('\n') {
                        Some(i) => self.pos += i,
                        None => self.pos = self.end,
                    }
                }
                _ => return,
            }
        }
    }

    /// Skips whitespace, then consumes `s` if it comes next.
    pub(crate) fn eat(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    /// Skips whitespace, then consumes `s` or fails saying what was expected.
    pub(super) fn expect(&mut self, s: &str) -> PResult<()> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{s}`, found {}", self.describe_next())))
        }
    }

    /// A short description of what comes next, for "expected X, found Y".
    pub(crate) fn describe_next(&self) -> String {
        let mut c = self.clone();
        c.skip_ws();
        if c.at_end() {
            return "end of input".to_string();
        }
        if c.starts_with("/*") {
            return "an unterminated comment".to_string();
        }
        let word: String = c
            .rest()
            .chars()
            .take_while(|&ch| is_name_char(ch))
            .take(40)
            .collect();
        if word.is_empty() {
            let ch = c.rest().chars().next().unwrap_or(' ');
            format!("`{ch}`")
        } else {
            format!("`{word}`")
        }
    }

    /// An identifier-like word: letters, digits, `_`, `.`, and `-` (but not the `-` of `->`).
    pub(super) fn word(&mut self) -> &'a str {
        let start = self.pos;
        while let Some(c) = self.peek() {
            let ok = c.is_ascii_alphanumeric()
                || c == b'_'
                || c == b'.'
                || (c == b'-' && self.peek_at(1) != Some(b'>'));
            if !ok {
                break;
            }
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    /// A name with an optional `%` sigil, after whitespace: `%add.1` or `add.1` -> `add.1`.
    pub(super) fn name(&mut self, what: &str) -> PResult<(&'a str, usize)> {
        self.skip_ws();
        let start = self.pos;
        if self.peek() == Some(b'%') {
            self.pos += 1;
        }
        let w = self.word();
        if w.is_empty() || w.starts_with('-') {
            self.pos = start;
            return Err(self.error(format!("expected {what}, found {}", self.describe_next())));
        }
        Ok((w, start))
    }

    /// A signed decimal integer (after whitespace).
    pub(super) fn int(&mut self) -> PResult<i64> {
        self.skip_ws();
        let start = self.pos;
        if matches!(self.peek(), Some(b'-' | b'+')) {
            self.pos += 1;
        }
        let digits_start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        if self.pos == digits_start {
            self.pos = start;
            return Err(self.error(format!(
                "expected an integer, found {}",
                self.describe_next()
            )));
        }
        self.text[start..self.pos]
            .parse::<i64>()
            .map_err(|_| self.error_at(start, "integer out of range"))
    }

    /// A non-negative integer that fits in `u32`.
    pub(super) fn u32(&mut self) -> PResult<u32> {
        self.skip_ws();
        let start = self.pos;
        let v = self.int()?;
        u32::try_from(v)
            .map_err(|_| self.error_at(start, format!("expected a number in 0..2^32, found {v}")))
    }

    /// `true` or `false`.
    pub(super) fn bool(&mut self) -> PResult<bool> {
        self.skip_ws();
        let start = self.pos;
        match self.word() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => {
                self.pos = start;
                Err(self.error(format!(
                    "expected `true` or `false`, found {}",
                    self.describe_next()
                )))
            }
        }
    }

    /// A double-quoted string with C escapes, returned unescaped.
    pub(super) fn string(&mut self) -> PResult<String> {
        self.skip_ws();
        let start = self.pos;
        if self.peek() != Some(b'"') {
            return Err(self.error(format!("expected a string, found {}", self.describe_next())));
        }
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error_at(start, "unterminated string"));
            };
            self.pos += 1;
            match c {
                b'"' => break,
                b'\n' => return Err(self.error_at(start, "unterminated string")),
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.error_at(start, "unterminated string"));
                    };
                    self.pos += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'0'..=b'7' => {
                            let mut v = (e - b'0') as u32;
                            for _ in 0..2 {
                                match self.peek() {
                                    Some(d @ b'0'..=b'7') => {
                                        v = v * 8 + (d - b'0') as u32;
                                        self.pos += 1;
                                    }
                                    _ => break,
                                }
                            }
                            out.push(v as u8);
                        }
                        b'x' => {
                            let mut v = 0u32;
                            let mut n = 0;
                            while let Some(d) = self.peek().and_then(|d| (d as char).to_digit(16)) {
                                v = (v * 16 + d) & 0xff;
                                self.pos += 1;
                                n += 1;
                            }
                            if n == 0 {
                                return Err(self.error_at(self.pos - 2, "bad `\\x` escape"));
                            }
                            out.push(v as u8);
                        }
                        other => out.push(other),
                    }
                }
                other => out.push(other),
            }
        }
        String::from_utf8(out).map_err(|_| self.error_at(start, "string is not valid UTF-8"))
    }

    /// The raw text of an attribute value: everything up to a `,` outside brackets, braces,
    /// parentheses and strings, a newline, or an unmatched closing bracket. Returns `(start, end)`
    /// with surrounding spaces trimmed.
    pub(crate) fn balanced_value(&mut self) -> PResult<(usize, usize)> {
        self.skip_inline_ws();
        let start = self.pos;
        let mut stack: Vec<(u8, usize)> = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' | b'[' | b'(' => stack.push((c, self.pos)),
                b'}' | b']' | b')' => {
                    let open = match c {
                        b'}' => b'{',
                        b']' => b'[',
                        _ => b'(',
                    };
                    match stack.last() {
                        Some(&(o, _)) if o == open => {
                            stack.pop();
                        }
                        Some(&(o, at)) => {
                            return Err(self.error_at(
                                at,
                                format!("`{}` is closed by `{}`", o as char, c as char),
                            ))
                        }
                        None => break,
                    }
                }
                b',' if stack.is_empty() => break,
                // Attribute values are written on one line; a newline inside brackets means
                // one was never closed.
                b'\n' => break,
                _ => {}
            }
            self.bump();
        }
        if let Some(&(o, at)) = stack.last() {
            return Err(self.error_at(at, format!("unterminated `{}`", o as char)));
        }
        let end = start + self.text[start..self.pos].trim_end().len();
        Ok((start, end))
    }

    /// At an opening `(`, `[` or `{`: skips to just after its matching closer (nested groups
    /// and strings included) and returns the span inside.
    pub(super) fn group(&mut self) -> PResult<(usize, usize)> {
        let start = self.pos;
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' | b'[' | b'(' => depth += 1,
                b'}' | b']' | b')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        self.pos += 1;
                        return Ok((start + 1, self.pos - 1));
                    }
                }
                _ => {}
            }
            self.bump();
        }
        let open = self.text.as_bytes().get(start).map_or('(', |&b| b as char);
        Err(self.error_at(start, format!("unterminated `{open}`")))
    }

    /// `{1,2,3}` (possibly empty) as integers.
    pub(crate) fn int_list_braced(&mut self) -> PResult<Vec<i64>> {
        self.expect("{")?;
        let mut out = Vec::new();
        if self.eat("}") {
            return Ok(out);
        }
        loop {
            out.push(self.int()?);
            if self.eat("}") {
                return Ok(out);
            }
            self.expect(",")?;
        }
    }

    /// Fails unless only whitespace is left.
    pub(crate) fn expect_end(&mut self, what: &str) -> PResult<()> {
        self.skip_ws();
        if self.at_end() {
            Ok(())
        } else {
            Err(self.error(format!("unexpected {} after {what}", self.describe_next())))
        }
    }
}

pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '%')
}

/// Byte offsets of line starts, to turn an offset into a 1-based line number quickly.
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(super) fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    pub(crate) fn line_of(&self, offset: usize) -> u32 {
        match self.starts.binary_search(&offset) {
            Ok(i) => i as u32 + 1,
            Err(i) => i as u32,
        }
    }
}
