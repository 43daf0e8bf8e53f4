//! `EstimatorError`: everything `train`, `evaluate` and `predict` can fail with, worded for
//! the user (TF's own message where TF has one).

use crate::checkpoint::CheckpointError;
use crate::config::ConfigError;
use tessel_compiler::trace::TraceError;
use tessel_runtime::session::SessionError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EstimatorError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    TfConfig(#[from] crate::estimator::tf_config::TfConfigError),
    /// A call TF would refuse with a `ValueError` (TF's message).
    #[error("{0}")]
    Value(String),
    #[error("the input_fn failed: {0}")]
    Input(String),
    #[error("the model_fn failed: {0}")]
    ModelFn(String),
    /// A metric the metric_fn asked for could not be computed (its tensors' shapes or types).
    #[error("the metric_fn failed: {0}")]
    MetricFn(String),
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Lock(#[from] crate::checkpoint::LockError),
    #[error("cannot restore {file}: {message}")]
    Restore { file: String, message: String },
    /// The NaN check after a loop: the first variable with a NaN or an infinity.
    #[error("the model diverged: variable `{variable}` holds {what} after steps {first_step}..={last_step} (the last checkpoint, from before these steps, is intact)")]
    Diverged {
        variable: String,
        what: &'static str,
        first_step: i64,
        last_step: i64,
    },
    /// A loss that is NaN or infinite (checked with the variables).
    #[error(
        "the loss is {what} at step {step} (the last checkpoint, from before this loop, is intact)"
    )]
    LossDiverged { what: &'static str, step: i64 },
    /// The stop flag (Ctrl-C or SIGTERM in the examples): training stopped after the loop
    /// that was running, its checkpoint saved.
    #[error("interrupted at step {step}; the checkpoint for step {step} is saved and the next train() resumes from it")]
    Interrupted { step: i64 },
    /// The stop flag was raised during evaluation or prediction, which stopped between loops.
    #[error("{what} interrupted: stopped after {done} of its steps")]
    Stopped { what: &'static str, done: u64 },
    #[error(transparent)]
    Layer(#[from] crate::model::layers::LayerError),
    #[error(transparent)]
    Variable(#[from] crate::model::VariableError),
    #[error(transparent)]
    Optimizer(#[from] crate::model::OptimizerError),
    #[error(transparent)]
    Schedule(#[from] crate::model::schedules::ScheduleError),
    #[error(transparent)]
    CrossShard(#[from] crate::model::CrossShardError),
    #[error(transparent)]
    Dataset(#[from] crate::input::DatasetError),
    #[error(transparent)]
    InputFile(#[from] crate::input::InputError),
    /// Exporting or loading an export (`export`, `tessel predict`).
    #[error("export: {0}")]
    Export(String),
    /// `predict`'s threads failed in a way that is no input or model_fn error (a panic).
    #[error("predict failed: {0}")]
    Predict(String),
    #[error(transparent)]
    WarmStart(#[from] crate::checkpoint::WarmStartError),
    #[error("cannot write {what}: {message}")]
    Write { what: String, message: String },
}

impl EstimatorError {
    pub(crate) fn value(message: impl Into<String>) -> EstimatorError {
        EstimatorError::Value(message.into())
    }
}
