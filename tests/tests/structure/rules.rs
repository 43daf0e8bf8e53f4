//! The layering rules the tree keeps, as functions over a file's text so that each can be
//! shown to fail on a planted violation.

/// Modules below the session API that the command line must not import: it reaches the
/// compiler and the runtime only through `tessel_runtime::session` and the public IR.
pub const CLI_FORBIDDEN: [(&str, &str); 6] = [
    ("tessel_runtime", "jit"),
    ("tessel_runtime", "replicas"),
    ("tessel_runtime", "threads"),
    ("tessel_compiler", "compile"),
    ("tessel_compiler", "passes"),
    ("tessel_compiler", "training_loop"),
];

/// The longest a source file may be.
pub const MAX_LINES: usize = 900;

/// Every `crate::module` path in `source` that [`CLI_FORBIDDEN`] names, as
/// `(line, "crate::module")`. Paths are found in `use` trees (`tessel_runtime::{jit::X, ..}`)
/// and in expressions alike; comments are skipped.
pub fn forbidden_paths(source: &str) -> Vec<(usize, String)> {
    let code = without_comments(source);
    let mut found = Vec::new();
    for (krate, module) in CLI_FORBIDDEN {
        let prefix = format!("{krate}::");
        let mut from = 0;
        while let Some(at) = code[from..].find(&prefix) {
            let start = from + at;
            from = start + prefix.len();
            let preceded_by_ident = code[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            if preceded_by_ident {
                continue;
            }
            let rest = &code[from..];
            let hit = match rest.trim_start().strip_prefix('{') {
                Some(group) => top_level_items(group)
                    .iter()
                    .any(|item| first_segment(item) == module),
                None => first_segment(rest) == module,
            };
            if hit {
                let line = code[..start].matches('\n').count() + 1;
                found.push((line, format!("{krate}::{module}")));
            }
        }
    }
    found.sort();
    found
}

/// Whether a file of `source`'s text is longer than [`MAX_LINES`]: its line count if so.
pub fn too_long(source: &str) -> Option<usize> {
    let lines = source.lines().count();
    (lines > MAX_LINES).then_some(lines)
}

/// `source` with comments and the contents of string literals blanked out (newlines kept, so
/// line numbers hold): a path in a comment or a message is not an import.
fn without_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            if c == '\\' {
                chars.next();
            } else if c == '"' {
                in_string = false;
                out.push(c);
            } else if c == '\n' {
                out.push(c);
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            // A character literal such as '"' or '\'': copied whole, so that its quote does
            // not open a string. A lifetime (`'a`) has no closing quote and goes on as code.
            ('\'', Some(&next)) => {
                out.push(c);
                let mut ahead = chars.clone();
                ahead.next();
                let closes = if next == '\\' {
                    ahead.next();
                    ahead.next() == Some('\'')
                } else {
                    ahead.next() == Some('\'')
                };
                if closes {
                    for _ in 0..if next == '\\' { 3 } else { 2 } {
                        out.extend(chars.next());
                    }
                }
            }
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// The comma-separated items of a `{ ... }` group whose opening brace is already consumed,
/// up to its closing brace; nested groups stay inside their item.
fn top_level_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// The first identifier of a path such as `jit::ConvAlgorithm` or `session`.
fn first_segment(path: &str) -> &str {
    let path = path.trim_start();
    let end = path
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(path.len());
    &path[..end]
}
