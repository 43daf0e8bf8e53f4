//! `KerasError`: why a Keras model cannot become a `TpuEstimator`.

use crate::error::EstimatorError;

/// Where to go when tessel cannot run a part of a Keras model.
pub const ESCAPE_HATCH: &str = "see docs/keras.md, \"Escape hatch\": export the Keras 3 (JAX) training step as HLO text and train it with `tessel run --loop`";

#[derive(Debug, thiserror::Error)]
pub enum KerasError {
    /// The saved architecture is not one tessel reads (a missing key, a wrong type).
    #[error("the model config is malformed: {0}")]
    Config(String),
    /// A layer class tessel does not build.
    #[error("layer `{layer}`: class {class} is not supported ({ESCAPE_HATCH})")]
    UnsupportedLayer { layer: String, class: String },
    /// An option of a layer that tessel does not honour.
    #[error("layer `{layer}` ({class}): option `{option}` = {value} is not supported: {why} ({ESCAPE_HATCH})")]
    UnsupportedOption {
        layer: String,
        class: String,
        option: String,
        value: String,
        why: String,
    },
    /// A part of the compile config (optimizer, loss, metric, schedule) tessel does not run.
    #[error("{what} `{name}` is not supported: {why} ({ESCAPE_HATCH})")]
    UnsupportedCompile {
        what: &'static str,
        name: String,
        why: String,
    },
    /// The saved weights do not fit the architecture.
    #[error("layer `{layer}`: {message}")]
    Weights { layer: String, message: String },
    /// A model with no compile config and no loss given in the options.
    #[error("the model has no compile config (it was saved before compile() or with include_optimizer=False): give the loss and optimizer in KerasOptions")]
    NotCompiled,
    /// Building the graph failed (shapes that do not fit, a trace error).
    #[error("building the model: {0}")]
    Build(String),
    /// Reading the model file.
    #[error("{0}")]
    File(String),
    #[error(transparent)]
    Estimator(#[from] EstimatorError),
}

impl From<KerasError> for EstimatorError {
    fn from(e: KerasError) -> EstimatorError {
        match e {
            KerasError::Estimator(e) => e,
            other => EstimatorError::ModelFn(other.to_string()),
        }
    }
}
