//! The `checkpoint` file: TF's `CheckpointState` proto in text format.
//!
//! ```text
//! model_checkpoint_path: "model.ckpt-2000"
//! all_model_checkpoint_paths: "model.ckpt-1000"
//! all_model_checkpoint_paths: "model.ckpt-2000"
//! ```
//! Paths are prefixes relative to the model_dir, as TF writes them; a prefix's files are
//! `PREFIX.safetensors`, or TF's `PREFIX.index` and `PREFIX.data-00000-of-00001`.
//! `tf.train.get_checkpoint_state` parses this file.

/// The parsed state: the latest checkpoint and every kept one, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointState {
    pub model_checkpoint_path: Option<String>,
    pub all_model_checkpoint_paths: Vec<String>,
}

impl CheckpointState {
    /// The text TF writes.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if let Some(p) = &self.model_checkpoint_path {
            out.push_str(&format!("model_checkpoint_path: {}\n", quote(p)));
        }
        for p in &self.all_model_checkpoint_paths {
            out.push_str(&format!("all_model_checkpoint_paths: {}\n", quote(p)));
        }
        out
    }

    /// Parses the text format; fields other than the two paths (TF 2 adds timestamps) are
    /// ignored. A line that is not `field: "value"` is an error naming the line.
    pub fn parse(text: &str) -> Result<CheckpointState, String> {
        let mut state = CheckpointState::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let Some((field, value)) = line.split_once(':') else {
                return Err(format!(
                    "line {}: expected `field: value`, got `{line}`",
                    n + 1
                ));
            };
            let value = value.trim();
            let unquoted = || {
                unquote(value).ok_or_else(|| {
                    format!("line {}: expected a quoted string, got `{value}`", n + 1)
                })
            };
            match field.trim() {
                "model_checkpoint_path" => state.model_checkpoint_path = Some(unquoted()?),
                "all_model_checkpoint_paths" => state.all_model_checkpoint_paths.push(unquoted()?),
                _ => {}
            }
        }
        Ok(state)
    }
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next()? {
                'n' => out.push('\n'),
                c => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_tf2_timestamps() {
        let state = CheckpointState {
            model_checkpoint_path: Some("model.ckpt-2000".into()),
            all_model_checkpoint_paths: vec!["model.ckpt-1000".into(), "model.ckpt-2000".into()],
        };
        let text = state.to_text();
        assert_eq!(
            text,
            "model_checkpoint_path: \"model.ckpt-2000\"\n\
             all_model_checkpoint_paths: \"model.ckpt-1000\"\n\
             all_model_checkpoint_paths: \"model.ckpt-2000\"\n"
        );
        assert_eq!(CheckpointState::parse(&text).unwrap(), state);
        let tf2 = format!(
            "{text}all_model_checkpoint_timestamps: 1700000000.5\nlast_preserved_timestamp: 1.0\n"
        );
        assert_eq!(CheckpointState::parse(&tf2).unwrap(), state);
    }

    #[test]
    fn bad_lines_are_errors() {
        assert!(CheckpointState::parse("model_checkpoint_path model.ckpt-1")
            .unwrap_err()
            .contains("line 1"));
        assert!(
            CheckpointState::parse("model_checkpoint_path: model.ckpt-1")
                .unwrap_err()
                .contains("quoted")
        );
    }
}
