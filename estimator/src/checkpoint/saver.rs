//! Saving and restoring checkpoints in a model_dir (`Saver`), keeping at most N.

use super::state_file::CheckpointState;
use super::tf_bundle::{self, TfBundleError};
use crate::config::CheckpointFormat;
use std::path::{Path, PathBuf};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_runtime::host_io::{read_safetensors, write_safetensors, HostIoError};
use thiserror::Error;

/// TF's checkpoint basename: files are `model.ckpt-STEP.safetensors`.
pub const CHECKPOINT_BASENAME: &str = "model.ckpt";
const STATE_FILE: &str = "checkpoint";
const GLOBAL_STEP: &str = "global_step";
/// Tensors under this prefix hold the input pipeline's position, not variables.
pub const INPUT_PREFIX: &str = "input_pipeline/";

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
    #[error("{path}: {message}")]
    State { path: PathBuf, message: String },
    #[error("the checkpoint state file {state} names {prefix}, but {file} does not exist")]
    Missing {
        state: PathBuf,
        prefix: String,
        file: PathBuf,
    },
    #[error("{path} is not a tessel checkpoint: {message}")]
    Content { path: PathBuf, message: String },
    #[error(transparent)]
    TfBundle(#[from] TfBundleError),
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
    pub fn save_path(&self) -> PathBuf {
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

        let mut state = self.state()?.unwrap_or_default();
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

    /// The state file, or `None` when the model_dir has no checkpoint yet.
    pub fn state(&self) -> Result<Option<CheckpointState>, CheckpointError> {
        let path = self.model_dir.join(STATE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => CheckpointState::parse(&text)
                .map(Some)
                .map_err(|message| CheckpointError::State { path, message }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(CheckpointError::Io {
                what: "read",
                path,
                source,
            }),
        }
    }

    /// The file of the latest checkpoint, if any.
    pub fn latest_file(&self) -> Result<Option<PathBuf>, CheckpointError> {
        let Some(state) = self.state()? else {
            return Ok(None);
        };
        let Some(prefix) = state.model_checkpoint_path else {
            return Ok(None);
        };
        let file =
            tf_bundle::existing_checkpoint(&self.model_dir.join(&prefix), self.file_of(&prefix));
        if !file.exists() {
            return Err(CheckpointError::Missing {
                state: self.model_dir.join(STATE_FILE),
                prefix,
                file,
            });
        }
        Ok(Some(file))
    }

    /// The latest checkpoint, read whole, or `None` when there is none.
    pub fn restore_latest(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        match self.latest_file()? {
            Some(file) => read_checkpoint(&file).map(Some),
            None => Ok(None),
        }
    }

    fn file_of(&self, prefix: &str) -> PathBuf {
        self.model_dir.join(format!("{prefix}.safetensors"))
    }

    fn write_state(&self, state: &CheckpointState) -> Result<(), CheckpointError> {
        let path = self.model_dir.join(STATE_FILE);
        let tmp = self
            .model_dir
            .join(format!("{STATE_FILE}.tmp{}", std::process::id()));
        let io = |source| CheckpointError::Io {
            what: "write",
            path: path.clone(),
            source,
        };
        std::fs::write(&tmp, state.to_text()).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(|source| {
            std::fs::remove_file(&tmp).ok();
            io(source)
        })
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
