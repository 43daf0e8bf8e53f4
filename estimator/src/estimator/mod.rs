//! `TpuEstimator`: TPUEstimator's train / evaluate on tessel's session API
//! (`docs/estimator.md`).
//!
//! | module | holds |
//! | --- | --- |
//! | `tpu_estimator` | `TpuEstimator::new` and what every mode shares: batch sizes, params, model_dir, device |
//! | `params` | `Params`, TPUEstimator's `params` dict |
//! | `spec` | `TpuEstimatorSpec`, `Features`, `EvalMetrics` |
//! | `input_fn` | `InputFn`, `Input`: what an input_fn returns, and its batches for the device |
//! | `trace_step` | a model_fn traced for one mode as a loop step |
//! | `spec_check` | the spec's checks before compiling: each mode's needs, shapes, the metric_fn run once |
//! | `variables_state` | the variables' first values: restored from a checkpoint or initialized |
//! | `hosts` | the shards split over the hosts of an MPI job; what the chief sends the others |
//! | `dealer` | one input pipeline's batches dealt to the shards in a fixed order |
//! | `loop_runner` | compiled loops of `iterations_per_loop` steps |
//! | `train` | `train(input_fn, steps, max_steps)` and `train_with_hooks`: setup and the hook list |
//! | `train_loop` | training's loop: compiled loops with the hooks called around each |
//! | `evaluate` | `evaluate(input_fn, steps)`: streaming metrics on the host |
//! | `eval_progress` | `Evaluation [k/N]` at TF's cadence |
//! | `eval_input` | evaluation's batches: the short last batch padded, a per-example mask |
//! | `train_and_evaluate` | `train_and_evaluate(train_spec, eval_spec)`: train in chunks, evaluate after each; a TF_CONFIG task's part |
//! | `evaluator` | the evaluator task: each new checkpoint evaluated until `max_steps` |
//! | `tf_config` | TF's `TF_CONFIG`: the cluster, this process's task, the check against the MPI job |
//! | `padding` | predict's batches: a short last batch padded to the static shape |
//! | `predict` | `predict(input_fn, predict_keys)`: an iterator fed by a producer thread running loops ahead |
//! | `export` | `export(dir, serving_input)`: the PREDICT module and its signature |
//! | `exported_model` | `ExportedModel`: an export loaded, checked and run on any number of rows (`tessel predict`) |
//! | `dump` | `XLA_FLAGS=--xla_dump_to=DIR`: the traced step programs as HLO text |
//! | `log` | TF's log lines and the progress bar |

mod dealer;
mod disabled_passes;
mod dump;
mod eval_input;
mod eval_progress;
mod evaluate;
mod evaluator;
mod export;
mod exported_model;
pub(crate) mod hosts;
pub mod infeed;
mod input_fn;
pub(crate) mod log;
pub(crate) mod loop_runner;
mod padding;
mod params;
mod predict;
mod spec;
mod spec_check;
pub mod tf_config;
mod tpu_estimator;
mod trace_step;
mod train;
mod train_and_evaluate;
mod train_loop;
pub(crate) mod variables_state;

pub use evaluate::EvalResult;
pub use evaluator::{ContinuousEval, EvaluatorEnd, EvaluatorRun};
pub use export::{ServingInput, Signature, SignatureOutput, SignatureParameter};
pub use exported_model::ExportedModel;
pub use input_fn::{Input, InputFn};
pub use log::{Progress, ProgressFn};
pub use params::{Param, Params};
pub use predict::{PredictIter, Prediction};
pub use spec::{require_labels, EvalMetrics, Features, HostTensors, MetricFn, TpuEstimatorSpec};
pub use tpu_estimator::TpuEstimator;
pub use trace_step::ModelFn;
pub(crate) use train::summary_err;
pub use train::TrainResult;
pub use train_and_evaluate::{EvalSpec, TrainSpec};
