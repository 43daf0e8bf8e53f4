//! Parse errors that point at the offending text, rustc style.

use std::fmt;

/// A parse error at a 1-based line and column, with the source line it points into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The file the text came from, when known.
    pub file: Option<String>,
    /// 1-based line of the error.
    pub line: u32,
    /// 1-based column (in characters) of the error.
    pub column: u32,
    pub message: String,
    /// The full text of the line the error is on (without its newline).
    pub source_line: String,
}

impl ParseError {
    /// An error at byte offset `offset` of `text`.
    pub fn at(text: &str, offset: usize, file: Option<&str>, message: impl Into<String>) -> Self {
        let offset = floor_char_boundary(text, offset.min(text.len()));
        let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
        let line = text[..line_start].matches('\n').count() as u32 + 1;
        let column = text[line_start..offset].chars().count() as u32 + 1;
        ParseError {
            file: file.map(str::to_string),
            line,
            column,
            message: message.into(),
            source_line: text[line_start..line_end]
                .trim_end_matches('\r')
                .to_string(),
        }
    }

    /// An error that is not tied to a position (e.g. a file that cannot be read).
    pub(crate) fn without_position(file: Option<&str>, message: impl Into<String>) -> Self {
        ParseError {
            file: file.map(str::to_string),
            line: 0,
            column: 0,
            message: message.into(),
            source_line: String::new(),
        }
    }
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            return match &self.file {
                Some(file) => write!(f, "{file}: {}", self.message),
                None => f.write_str(&self.message),
            };
        }
        if let Some(file) = &self.file {
            write!(f, "{file}:")?;
        }
        writeln!(f, "{}:{}: {}", self.line, self.column, self.message)?;
        writeln!(f, "{}", self.source_line)?;
        // Keep tabs so that the caret lines up under the same column in a terminal.
        let pad: String = self
            .source_line
            .chars()
            .take(self.column.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "{pad}^")
    }
}

impl std::error::Error for ParseError {}
