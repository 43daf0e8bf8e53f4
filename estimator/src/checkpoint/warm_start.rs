//! Warm start (TF's `WarmStartSettings`): a new model_dir's variables take their first values
//! from another checkpoint — tessel's own or TensorFlow's — instead of their initializers.
//!
//! Which variables: the trainable ones whose name matches `vars_to_warm_start` from its start
//! (TF's `re.match` on the collection; default `.*`), or every variable with
//! [`WarmStart::all_variables`]. A variable's name in the source is its own unless
//! `var_name_to_prev_var_name` maps it. Optimizer slots (`VAR/Momentum`, ... — the names TF
//! uses too) follow their variable only with [`WarmStart::with_slots`], the global step only
//! with [`WarmStart::with_global_step`]. Any name missing from the source, shape or dtype
//! that differs, or unused name-map entry is an error listing every one: never a partial load.

use super::saver::read_checkpoint;
use super::state_file::CheckpointState;
use super::tf_bundle::{self, TfBundle, TfBundleError};
use super::CheckpointError;
use crate::model::variables::Variable;
use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tessel_compiler::ir::{Array, ArrayData, ElementType};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum WarmStartError {
    #[error("cannot warm-start from {path}: {message}")]
    Source { path: PathBuf, message: String },
    #[error("vars_to_warm_start `{pattern}` is not a valid regex: {message}")]
    Regex { pattern: String, message: String },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    TfBundle(#[from] TfBundleError),
    #[error("cannot warm-start from {source_path}: {} mismatch(es), nothing was loaded:\n  {}", .mismatches.len(), .mismatches.join("\n  "))]
    Mismatch {
        source_path: PathBuf,
        mismatches: Vec<String>,
    },
}

/// TF's `tf.estimator.WarmStartSettings`.
#[derive(Clone, Debug)]
pub struct WarmStart {
    /// A checkpoint (tessel's `.safetensors` file or prefix, TF's prefix, `.index` or
    /// `.data-*` file) or a model_dir whose `checkpoint` state file names the latest.
    pub from: PathBuf,
    pub vars_to_warm_start: Regex,
    /// tessel's name → the name in the source.
    pub var_name_to_prev_var_name: BTreeMap<String, String>,
    pub all_variables: bool,
    pub slots: bool,
    pub global_step: bool,
}

/// What a warm start gives a traced step.
#[derive(Clone, Debug, PartialEq)]
pub struct WarmValues {
    /// The checkpoint read (a file for tessel, a prefix for TF).
    pub source: PathBuf,
    /// One entry per variable, in the step's order: `Some` for the warm-started ones.
    pub values: Vec<Option<Array>>,
    /// The source's global step, when asked for.
    pub global_step: Option<i64>,
    /// Non-trainable variables the regex matches but that were not taken (TF's default
    /// leaves them, e.g. batch normalization's moving statistics, at their initial values).
    pub non_trainable_left: Vec<String>,
    /// Optimizer slots of warm-started variables that were not taken (without `with_slots`).
    pub slots_left: Vec<String>,
}

impl WarmValues {
    /// The log line naming what the warm start left at its initial values, and the option
    /// that takes it too; `None` when it left nothing.
    pub(crate) fn left_behind_note(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.non_trainable_left.is_empty() {
            parts.push(format!(
                "{} non-trainable variable(s) keep their initial values: {} (WarmStart::all_variables() takes them too, as TF's vars_to_warm_start listing every variable does)",
                self.non_trainable_left.len(),
                self.non_trainable_left.join(", ")
            ));
        }
        // Slots are many (two per variable for Adam) and expected to restart: counted only.
        if let Some(first) = self.slots_left.first() {
            parts.push(format!(
                "{} optimizer slot(s) of the warm-started variables, such as {first}, keep their initial values (WarmStart::with_slots() takes them too)",
                self.slots_left.len()
            ));
        }
        (!parts.is_empty()).then(|| {
            format!(
                "Warm-starting only trainable variables: {}",
                parts.join("; ")
            )
        })
    }
}

/// A source checkpoint, opened.
enum Source {
    Tessel {
        file: PathBuf,
        global_step: i64,
        variables: Vec<(String, Array)>,
    },
    Tf(TfBundle),
}

impl WarmStart {
    /// Warm-starts every trainable variable from `from` (TF's defaults).
    pub fn new(from: impl Into<PathBuf>) -> WarmStart {
        WarmStart {
            from: from.into(),
            vars_to_warm_start: match_everything(),
            var_name_to_prev_var_name: BTreeMap::new(),
            all_variables: false,
            slots: false,
            global_step: false,
        }
    }

    /// Only variables whose name matches `pattern` from its start (TF's `re.match`).
    pub fn vars_to_warm_start(mut self, pattern: &str) -> Result<WarmStart, WarmStartError> {
        self.vars_to_warm_start =
            Regex::new(&format!("^(?:{pattern})")).map_err(|e| WarmStartError::Regex {
                pattern: pattern.to_string(),
                message: e.to_string(),
            })?;
        Ok(self)
    }

    /// The variable `name` is `prev_name` in the source.
    pub fn rename(mut self, name: &str, prev_name: &str) -> WarmStart {
        self.var_name_to_prev_var_name
            .insert(name.to_string(), prev_name.to_string());
        self
    }

    /// The regex applies to every variable, trainable or not (TF's list-of-names form).
    pub fn all_variables(mut self) -> WarmStart {
        self.all_variables = true;
        self
    }

    /// Also takes the optimizer slots (`VAR/Momentum`, ...) of warm-started variables.
    pub fn with_slots(mut self) -> WarmStart {
        self.slots = true;
        self
    }

    /// Also takes the source's global step.
    pub fn with_global_step(mut self) -> WarmStart {
        self.global_step = true;
        self
    }

    /// The same source read as a restore: every variable of the graph and the global step
    /// (the name map kept), as `evaluate`, `predict` and `export` take a checkpoint path.
    pub(crate) fn restore_all(&self) -> WarmStart {
        WarmStart {
            from: self.from.clone(),
            vars_to_warm_start: match_everything(),
            var_name_to_prev_var_name: self.var_name_to_prev_var_name.clone(),
            all_variables: true,
            slots: true,
            global_step: true,
        }
    }

    /// Reads the values for `variables` from the source, checking every name and shape first.
    pub fn load(&self, variables: &[Variable]) -> Result<WarmValues, WarmStartError> {
        let source = self.open()?;
        let source_path = match &source {
            Source::Tessel { file, .. } => file.clone(),
            Source::Tf(b) => b.prefix().to_path_buf(),
        };
        // Which variables, and under which name in the source.
        let chosen: Vec<bool> = variables
            .iter()
            .map(|v| {
                (v.trainable || self.all_variables) && self.vars_to_warm_start.is_match(&v.name)
            })
            .collect();
        let slot_of_chosen = |v: &Variable| {
            !v.trainable
                && variables.iter().zip(&chosen).any(|(w, &c)| {
                    c && w.trainable
                        && v.name.len() > w.name.len()
                        && v.name.starts_with(&w.name)
                        && v.name.as_bytes()[w.name.len()] == b'/'
                        && !v.name[w.name.len() + 1..].contains('/')
                })
        };
        let mut mismatches = Vec::new();
        let mut wanted: Vec<Option<String>> = Vec::with_capacity(variables.len());
        let mut used = std::collections::BTreeSet::new();
        let (mut non_trainable_left, mut slots_left) = (Vec::new(), Vec::new());
        for (v, &c) in variables.iter().zip(&chosen) {
            let take = c || (self.slots && slot_of_chosen(v));
            if !take {
                if slot_of_chosen(v) {
                    slots_left.push(v.name.clone());
                } else if !v.trainable && self.vars_to_warm_start.is_match(&v.name) {
                    non_trainable_left.push(v.name.clone());
                }
                wanted.push(None);
                continue;
            }
            let prev = match self.var_name_to_prev_var_name.get(&v.name) {
                Some(p) => {
                    used.insert(v.name.clone());
                    p.clone()
                }
                None => v.name.clone(),
            };
            let shown = if prev == v.name {
                format!("`{}`", v.name)
            } else {
                format!("`{}` (as `{prev}`)", v.name)
            };
            match source.info(&prev) {
                None => mismatches.push(format!("{shown}: not in the checkpoint")),
                Some((ty, dims, dtype)) => {
                    if ty != Some(v.element_type) || dims != v.dims {
                        mismatches.push(format!(
                            "{shown}: {dtype}{dims:?} in the checkpoint, {}{:?} in the model",
                            v.element_type, v.dims
                        ));
                    }
                }
            }
            wanted.push(Some(prev));
        }
        for name in self.var_name_to_prev_var_name.keys() {
            if !used.contains(name) {
                mismatches.push(format!(
                    "var_name_to_prev_var_name names `{name}`, which is not a variable being warm-started"
                ));
            }
        }
        let step = if self.global_step {
            match source.global_step() {
                Ok(s) => Some(s),
                Err(m) => {
                    mismatches.push(m);
                    None
                }
            }
        } else {
            None
        };
        if !mismatches.is_empty() {
            return Err(WarmStartError::Mismatch {
                source_path,
                mismatches,
            });
        }
        let values = wanted
            .iter()
            .map(|w| w.as_ref().map(|name| source.read(name)).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(WarmValues {
            source: source_path,
            values,
            global_step: step,
            non_trainable_left,
            slots_left,
        })
    }

    fn open(&self) -> Result<Source, WarmStartError> {
        let prefix = resolve(&self.from)?;
        let tessel_file = if prefix.extension().is_some_and(|e| e == "safetensors") {
            Some(prefix.clone())
        } else {
            let mut s = prefix.as_os_str().to_owned();
            s.push(".safetensors");
            Some(PathBuf::from(s)).filter(|f| f.is_file())
        };
        if let Some(file) = tessel_file.filter(|f| f.is_file()) {
            let c = read_checkpoint(&file)?;
            return Ok(Source::Tessel {
                file,
                global_step: c.global_step,
                variables: c.variables,
            });
        }
        if tf_bundle::index_path(&prefix).is_file() {
            return Ok(Source::Tf(TfBundle::open(prefix)?));
        }
        Err(WarmStartError::Source {
            path: self.from.clone(),
            message: format!(
                "neither {}.safetensors (tessel) nor {}.index (TensorFlow) exists",
                prefix.display(),
                prefix.display()
            ),
        })
    }
}

/// `.*` (every name).
fn match_everything() -> Regex {
    Regex::new(".*").expect("`.*` is a valid regex")
}

/// The checkpoint prefix (or tessel file) that `from` designates.
fn resolve(from: &Path) -> Result<PathBuf, WarmStartError> {
    let err = |message: String| WarmStartError::Source {
        path: from.to_path_buf(),
        message,
    };
    if from.is_dir() {
        let state_path = from.join("checkpoint");
        let text = std::fs::read_to_string(&state_path).map_err(|e| {
            err(format!(
                "it is a directory without a readable `checkpoint` state file ({e})"
            ))
        })?;
        let state = CheckpointState::parse(&text)
            .map_err(|m| err(format!("{}: {m}", state_path.display())))?;
        let latest = state
            .model_checkpoint_path
            .ok_or_else(|| err(format!("{} names no checkpoint", state_path.display())))?;
        // TF writes the prefix relative to the model_dir, or absolute.
        return Ok(from.join(latest));
    }
    let s = from.to_string_lossy();
    if let Some(p) = s.strip_suffix(".index") {
        return Ok(PathBuf::from(p));
    }
    if let Some(i) = s.rfind(".data-") {
        let tail = &s[i + ".data-".len()..];
        let shard = tail.len() == 14
            && tail.as_bytes()[5..9] == *b"-of-"
            && tail[..5]
                .bytes()
                .chain(tail[9..].bytes())
                .all(|b| b.is_ascii_digit());
        if shard {
            return Ok(PathBuf::from(&s[..i]));
        }
    }
    Ok(from.to_path_buf())
}

impl Source {
    /// (element type if tessel reads it, dims, dtype name) of `name`.
    fn info(&self, name: &str) -> Option<(Option<ElementType>, Vec<i64>, String)> {
        match self {
            Source::Tessel { variables, .. } => {
                variables.iter().find(|(n, _)| n == name).map(|(_, a)| {
                    (
                        Some(a.element_type()),
                        a.shape.dims.to_vec(),
                        a.element_type().to_string(),
                    )
                })
            }
            Source::Tf(b) => b.info(name).map(|i| (i.element_type, i.dims, i.dtype)),
        }
    }

    fn read(&self, name: &str) -> Result<Array, WarmStartError> {
        match self {
            Source::Tessel {
                file, variables, ..
            } => variables
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, a)| a.clone())
                .ok_or_else(|| WarmStartError::Source {
                    path: file.clone(),
                    message: format!("it has no variable `{name}`"),
                }),
            Source::Tf(b) => Ok(b.read(name)?),
        }
    }

    fn global_step(&self) -> Result<i64, String> {
        match self {
            Source::Tessel { global_step, .. } => Ok(*global_step),
            Source::Tf(b) => match b.read("global_step") {
                Ok(a) if a.shape.dims.is_empty() => match &a.data {
                    ArrayData::S64(v) => Ok(v[0]),
                    ArrayData::S32(v) => Ok(i64::from(v[0])),
                    _ => Err("`global_step` is not an integer scalar".into()),
                },
                Ok(a) => Err(format!("`global_step` is {}, not a scalar", a.shape)),
                Err(e) => Err(format!("`global_step`: {e}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_names_what_stays_behind_and_the_options() {
        let mut w = WarmValues {
            source: PathBuf::from("ckpt"),
            values: vec![],
            global_step: None,
            non_trainable_left: vec![],
            slots_left: vec![],
        };
        assert_eq!(w.left_behind_note(), None);
        w.non_trainable_left = vec!["bn/moving_mean".into(), "bn/moving_variance".into()];
        w.slots_left = vec!["dense/kernel/Adam".into(), "dense/kernel/Adam_1".into()];
        let note = w.left_behind_note().unwrap();
        assert!(note.starts_with("Warm-starting only trainable variables: 2 non-trainable variable(s) keep their initial values: bn/moving_mean, bn/moving_variance (WarmStart::all_variables() takes them too"), "{note}");
        assert!(note.ends_with("; 2 optimizer slot(s) of the warm-started variables, such as dense/kernel/Adam, keep their initial values (WarmStart::with_slots() takes them too)"), "{note}");
    }
}
