//! Saving and restoring checkpoints in a model_dir (`Saver`), keeping at most N.
//!
//! Every file is written durably (a synced temporary renamed into place, then the directory
//! synced), the checkpoint before the state file. A model_dir whose state is not what a save
//! leaves (an empty or unparsable state file, checkpoints without one, a corrupt latest
//! checkpoint) is an error that lists the checkpoints found and how to go on: training never
//! starts afresh over trained checkpoints by surprise.

use super::state_file::CheckpointState;
use super::tf_bundle::{self, TfBundleError};
use crate::config::CheckpointFormat;
use std::path::{Path, PathBuf};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_runtime::durable::write_durably;
use tessel_runtime::host_io::{read_safetensors, write_safetensors, HostIoError};
use thiserror::Error;

/// TF's checkpoint basename: files are `model.ckpt-STEP.safetensors`.
pub(crate) const CHECKPOINT_BASENAME: &str = "model.ckpt";
const STATE_FILE: &str = "checkpoint";
const GLOBAL_STEP: &str = "global_step";
/// Tensors under this prefix hold the input pipeline's position, not variables.
pub(crate) const INPUT_PREFIX: &str = "input_pipeline/";

/// What a checkpoint holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    pub global_step: i64,
    /// Every variable by name (model variables and optimizer slots), in the store's order.
    pub variables: Vec<(String, Array)>,
    /// The input pipeline's position (names without the `input_pipeline/` prefix), so a
    /// resumed run sees the batches an uninterrupted one would have (TF's
    /// `CheckpointInputPipelineHook`).
    pub input_state: Vec<(String, Array)>,
}

#[derive(Debug, Error)]
pub enum CheckpointError {
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] HostIoError),
    #[error("{path} is not a tessel checkpoint: {message}")]
    Content { path: PathBuf, message: String },
    /// The state file exists but names no checkpoint (empty, cut off, unparsable).
    #[error(
        "the checkpoint state file {path} {problem}. {}",
        how_to_proceed(found, path)
    )]
    UnusableState {
        path: PathBuf,
        problem: String,
        /// The checkpoints the model_dir holds (prefixes, oldest first).
        found: Vec<String>,
    },
    /// Trained checkpoints without a state file: another run's, or a deleted state file.
    #[error("{} holds checkpoints ({}) but no `checkpoint` state file, so they are no run this one can resume. {}", dir.display(), found.join(", "), how_to_proceed(found, &dir.join(STATE_FILE)))]
    Orphans { dir: PathBuf, found: Vec<String> },
    /// The latest checkpoint cannot be read back (a checksum mismatch, a truncated file).
    #[error("{source}. {}", intact_advice(intact))]
    Corrupt {
        source: Box<CheckpointError>,
        /// Older checkpoints of the state file that read back intact, newest first.
        intact: Vec<String>,
    },
    #[error(transparent)]
    TfBundle(#[from] TfBundleError),
}

/// What to do about an unusable state file or orphaned checkpoints.
fn how_to_proceed(found: &[String], state: &Path) -> String {
    match found.last() {
        Some(newest) => format!(
            "The model_dir holds {}. To resume from the newest, write `model_checkpoint_path: \"{newest}\"` into {}; to start afresh, use another model_dir. Nothing was overwritten.",
            found.join(", "),
            state.display()
        ),
        None => format!(
            "The model_dir holds no checkpoint: delete {} to start afresh.",
            state.display()
        ),
    }
}

fn intact_advice(intact: &[String]) -> String {
    if intact.is_empty() {
        return "No older checkpoint of the model_dir reads back intact either.".to_string();
    }
    format!(
        "These older checkpoints are intact: {}. Set RunConfig's `fall_back_to_intact_checkpoint` (the examples: --fall-back-to-intact-checkpoint) to resume from the newest of them.",
        intact.join(", ")
    )
}

/// A checkpoint read back, and the damaged newer ones passed over to reach it.
#[derive(Clone, Debug, PartialEq)]
pub struct Restored {
    pub checkpoint: Checkpoint,
    pub file: PathBuf,
    /// Newer checkpoints that did not read back (with why), when falling back.
    pub passed_over: Vec<String>,
}

/// Writes checkpoints into one model_dir and finds the latest.
#[derive(Clone, Debug)]
pub struct Saver {
    model_dir: PathBuf,
    /// At most this many checkpoints are kept; 0 keeps all (TF's `keep_checkpoint_max`).
    keep_max: usize,
    format: CheckpointFormat,
}

impl Saver {
    pub fn new(model_dir: impl Into<PathBuf>, keep_max: usize) -> Saver {
        Saver {
            model_dir: model_dir.into(),
            keep_max,
            format: CheckpointFormat::default(),
        }
    }

    /// Writes checkpoints in `format` (restoring reads every format).
    pub fn with_format(mut self, format: CheckpointFormat) -> Saver {
        self.format = format;
        self
    }

    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }

    /// `DIR/model.ckpt`, as TF's log line names it.
    pub(crate) fn save_path(&self) -> PathBuf {
        self.model_dir.join(CHECKPOINT_BASENAME)
    }

    /// Writes `checkpoint` as `model.ckpt-STEP.safetensors` and/or TF's `model.ckpt-STEP.index`
    /// and `.data-00000-of-00001` (the saver's format), then the state file naming it latest,
    /// then deletes the oldest checkpoints beyond `keep_max`. Returns the file written (the
    /// `.index` when only TF's format is written).
    pub fn save(&self, checkpoint: &Checkpoint) -> Result<PathBuf, CheckpointError> {
        std::fs::create_dir_all(&self.model_dir).map_err(|source| CheckpointError::Io {
            what: "create",
            path: self.model_dir.clone(),
            source,
        })?;
        // The state before this save's own file exists (which it would take for an orphan).
        let mut state = self.state()?.unwrap_or_default();
        let prefix = format!("{CHECKPOINT_BASENAME}-{}", checkpoint.global_step);
        let file = self.file_of(&prefix);
        let mut tensors = checkpoint.variables.clone();
        tensors.push((GLOBAL_STEP.to_string(), scalar_s64(checkpoint.global_step)));
        for (name, value) in &checkpoint.input_state {
            tensors.push((format!("{INPUT_PREFIX}{name}"), value.clone()));
        }
        if self.format.writes_safetensors() {
            write_safetensors(&file, &tensors)?;
        }
        if self.format.writes_tf() {
            tf_bundle::write_bundle(&self.model_dir.join(&prefix), &tensors)?;
        }
        let file = if self.format.writes_safetensors() {
            file
        } else {
            tf_bundle::index_path(&self.model_dir.join(&prefix))
        };

        state.all_model_checkpoint_paths.retain(|p| p != &prefix);
        state.all_model_checkpoint_paths.push(prefix.clone());
        state.model_checkpoint_path = Some(prefix);
        let mut removed = Vec::new();
        if self.keep_max > 0 {
            while state.all_model_checkpoint_paths.len() > self.keep_max {
                removed.push(state.all_model_checkpoint_paths.remove(0));
            }
        }
        self.write_state(&state)?;
        for old in removed {
            // A checkpoint already gone is not an error: the state file no longer names it.
            std::fs::remove_file(self.file_of(&old)).ok();
            tf_bundle::remove_bundle(&self.model_dir.join(&old)).ok();
        }
        Ok(file)
    }

    /// The state file, or `None` when the model_dir has no checkpoint yet. A state file that
    /// names no checkpoint (empty, cut off, unparsable), and trained checkpoints without a
    /// state file, are errors: TF refuses an empty state file too ("Invalid checkpoint
    /// state"), and starting afresh would overwrite them.
    pub fn state(&self) -> Result<Option<CheckpointState>, CheckpointError> {
        let path = self.model_dir.join(STATE_FILE);
        let unusable = |problem: String| CheckpointError::UnusableState {
            path: path.clone(),
            problem,
            found: self.checkpoints_on_disk(),
        };
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A first save cut off between its checkpoint and its state file leaves only
                // step 0, which holds nothing trained: that is no other run's work.
                let found = self.checkpoints_on_disk();
                if found
                    .iter()
                    .any(|p| p != &format!("{CHECKPOINT_BASENAME}-0"))
                {
                    return Err(CheckpointError::Orphans {
                        dir: self.model_dir.clone(),
                        found,
                    });
                }
                return Ok(None);
            }
            Err(source) => {
                return Err(CheckpointError::Io {
                    what: "read",
                    path,
                    source,
                })
            }
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| unusable("is not text (it was damaged)".to_string()))?;
        if text.trim().is_empty() {
            return Err(unusable(
                "is empty (a save cut off by a crash or a power loss leaves it so)".to_string(),
            ));
        }
        let state = CheckpointState::parse(&text)
            .map_err(|message| unusable(format!("cannot be parsed ({message})")))?;
        if state.model_checkpoint_path.is_none() {
            return Err(unusable(
                "names no checkpoint (it has no `model_checkpoint_path`)".to_string(),
            ));
        }
        Ok(Some(state))
    }

    /// The file of the latest checkpoint, if any.
    pub(crate) fn latest_file(&self) -> Result<Option<PathBuf>, CheckpointError> {
        let Some(state) = self.state()? else {
            return Ok(None);
        };
        let Some(prefix) = state.model_checkpoint_path else {
            return Ok(None);
        };
        let file =
            tf_bundle::existing_checkpoint(&self.model_dir.join(&prefix), self.file_of(&prefix));
        if !file.exists() {
            return Err(CheckpointError::UnusableState {
                path: self.model_dir.join(STATE_FILE),
                problem: format!(
                    "names {prefix}, but neither {prefix}.safetensors nor {prefix}.index is in {}",
                    self.model_dir.display()
                ),
                found: self.checkpoints_on_disk(),
            });
        }
        Ok(Some(file))
    }

    /// The latest checkpoint, read whole, or `None` when there is none.
    pub fn restore_latest(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        Ok(self.restore(false)?.map(|r| r.checkpoint))
    }

    fn file_of(&self, prefix: &str) -> PathBuf {
        self.model_dir.join(format!("{prefix}.safetensors"))
    }

    fn write_state(&self, state: &CheckpointState) -> Result<(), CheckpointError> {
        let path = self.model_dir.join(STATE_FILE);
        write_durably(&path, state.to_text().as_bytes()).map_err(|source| CheckpointError::Io {
            what: "write",
            path,
            source,
        })
    }

    /// The checkpoints in the model_dir by their files (`model.ckpt-N.safetensors`, or a TF
    /// bundle's `model.ckpt-N.index`), as prefixes, oldest step first.
    pub(crate) fn checkpoints_on_disk(&self) -> Vec<String> {
        let mut found: Vec<(i64, String)> = std::fs::read_dir(&self.model_dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let prefix = name
                    .strip_suffix(".safetensors")
                    .or_else(|| name.strip_suffix(".index"))?;
                let step = prefix
                    .strip_prefix(CHECKPOINT_BASENAME)?
                    .strip_prefix('-')?
                    .parse::<i64>()
                    .ok()?;
                Some((step, prefix.to_string()))
            })
            .collect();
        found.sort();
        found.dedup();
        found.into_iter().map(|(_, prefix)| prefix).collect()
    }

    /// The latest checkpoint read back whole, or `None` for a model_dir with none. When it
    /// does not read back (a checksum mismatch, a truncated file), the error lists the older
    /// checkpoints of the state file that do; with `fall_back`, the newest of those is
    /// restored instead and the damaged ones are named in [`Restored::passed_over`].
    pub fn restore(&self, fall_back: bool) -> Result<Option<Restored>, CheckpointError> {
        let Some(file) = self.latest_file()? else {
            return Ok(None);
        };
        let error = match read_checkpoint(&file) {
            Ok(checkpoint) => {
                return Ok(Some(Restored {
                    checkpoint,
                    file,
                    passed_over: Vec::new(),
                }))
            }
            Err(e) => e,
        };
        let state = self.state()?.unwrap_or_default();
        let latest = state.model_checkpoint_path.clone().unwrap_or_default();
        let mut intact = Vec::new();
        let mut first_intact = None;
        for prefix in state.all_model_checkpoint_paths.iter().rev() {
            if *prefix == latest {
                continue;
            }
            let older =
                tf_bundle::existing_checkpoint(&self.model_dir.join(prefix), self.file_of(prefix));
            if let Ok(checkpoint) = read_checkpoint(&older) {
                if first_intact.is_none() {
                    first_intact = Some((checkpoint, older));
                }
                intact.push(prefix.clone());
            }
        }
        match first_intact {
            Some((checkpoint, file)) if fall_back => Ok(Some(Restored {
                checkpoint,
                file,
                passed_over: vec![format!("{latest}: {error}")],
            })),
            _ => Err(CheckpointError::Corrupt {
                source: Box::new(error),
                intact,
            }),
        }
    }
}

/// Reads one checkpoint file: tessel's `.safetensors`, or a TF checkpoint's `.index`.
pub fn read_checkpoint(file: &Path) -> Result<Checkpoint, CheckpointError> {
    let content = |message: String| CheckpointError::Content {
        path: file.to_path_buf(),
        message,
    };
    let mut global_step = None;
    let mut variables = Vec::new();
    let mut input_state = Vec::new();
    let tensors = match tf_bundle::prefix_of_index(file) {
        Some(prefix) => tf_bundle::TfBundle::open(prefix)?.read_all()?,
        None => read_safetensors(file)?,
    };
    for (name, value) in tensors {
        if name == GLOBAL_STEP {
            global_step = match (&value.data, value.shape.dims.is_empty()) {
                (ArrayData::S64(v), true) => Some(v[0]),
                _ => {
                    return Err(content(format!(
                        "global_step is {}, not s64[]",
                        value.shape
                    )))
                }
            };
        } else if let Some(rest) = name.strip_prefix(INPUT_PREFIX) {
            input_state.push((rest.to_string(), value));
        } else {
            variables.push((name, value));
        }
    }
    let global_step = global_step.ok_or_else(|| content("it has no global_step".into()))?;
    Ok(Checkpoint {
        global_step,
        variables,
        input_state,
    })
}

fn scalar_s64(v: i64) -> Array {
    Array::new(
        ArrayShape::new(ElementType::S64, &[]),
        ArrayData::S64(vec![v]),
    )
}
