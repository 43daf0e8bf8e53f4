//! The variables' values before the first loop: restored from the latest checkpoint in the
//! model_dir, or made by their initializers.

use crate::checkpoint::{Checkpoint, Saver, WarmStart};
use crate::error::EstimatorError;
use crate::model::initializers::initial_value;
use crate::model::random::resolve_seed;
use crate::model::variables::Variable;
use std::path::PathBuf;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

/// Host copy of what the device carries, plus the input position.
pub(crate) struct HostState {
    pub global_step: i64,
    /// One value per variable, in the traced step's order.
    pub values: Vec<Array>,
    /// The input pipeline's position saved with the checkpoint (batches consumed).
    pub input_batches: u64,
    /// The checkpoint restored, if any.
    pub restored_from: Option<PathBuf>,
    /// The warm start's source, when one gave the first values.
    pub warm_started_from: Option<PathBuf>,
    /// What a warm start left at its initial values, as a log line (see
    /// [`crate::checkpoint::WarmValues::left_behind_note`]).
    pub warm_start_note: Option<String>,
}

const INPUT_BATCHES: &str = "batches";

impl HostState {
    /// Restores the latest checkpoint of `saver`'s model_dir, or initializes every variable
    /// (global step 0) when there is none. Variables the checkpoint has but the step does not
    /// use (an optimizer's slots, seen from EVAL) are ignored; a variable the step has but the
    /// checkpoint lacks, or one of another shape, is an error naming it.
    pub(crate) fn restore_or_init(
        variables: &[Variable],
        saver: &Saver,
        config: &crate::RunConfig,
        warm_start: Option<&WarmStart>,
        log: &mut super::log::Log,
    ) -> Result<HostState, EstimatorError> {
        let seed = config.tf_random_seed;
        let restored = saver.restore(config.fall_back_to_intact_checkpoint)?;
        let Some(restored) = restored else {
            // TF's warm start: matched variables take the source's values, the rest initialize.
            let warm = warm_start.map(|w| w.load(variables)).transpose()?;
            let values = variables
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    if let Some(a) = warm.as_ref().and_then(|w| w.values[i].clone()) {
                        return Ok(a);
                    }
                    initial_value(
                        &v.initializer,
                        &v.name,
                        &v.dims,
                        v.element_type,
                        resolve_seed(seed),
                    )
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| EstimatorError::ModelFn(e.to_string()))?;
            return Ok(HostState {
                global_step: warm.as_ref().and_then(|w| w.global_step).unwrap_or(0),
                values,
                input_batches: 0,
                restored_from: None,
                warm_start_note: warm.as_ref().and_then(|w| w.left_behind_note()),
                warm_started_from: warm.map(|w| w.source),
            });
        };
        for damaged in &restored.passed_over {
            log.warn(format!(
                "Passing over a damaged checkpoint, as fall_back_to_intact_checkpoint asks: {damaged}"
            ));
        }
        HostState::from_checkpoint(variables, restored.checkpoint, restored.file)
    }

    /// The step's variables taken from `checkpoint` (read from `file`), by name. Variables
    /// the checkpoint has but the step does not use are ignored; a variable the step has but
    /// the checkpoint lacks, or one of another shape, is an error naming it.
    pub(crate) fn from_checkpoint(
        variables: &[Variable],
        checkpoint: Checkpoint,
        file: PathBuf,
    ) -> Result<HostState, EstimatorError> {
        let restore_err = |message: String| EstimatorError::Restore {
            file: file.display().to_string(),
            message,
        };
        let mut values = Vec::with_capacity(variables.len());
        for v in variables {
            let Some((_, a)) = checkpoint.variables.iter().find(|(n, _)| n == &v.name) else {
                return Err(restore_err(format!(
                    "it has no variable `{}` (the model_fn makes it; was the model changed since the checkpoint?)",
                    v.name
                )));
            };
            if a.shape.dims.as_slice() != v.dims.as_slice() || a.element_type() != v.element_type {
                return Err(restore_err(format!(
                    "variable `{}` is {} in the checkpoint but {} in the model_fn (was the model changed since the checkpoint?)",
                    v.name,
                    type_and_dims(a.element_type(), &a.shape.dims),
                    type_and_dims(v.element_type, &v.dims)
                )));
            }
            values.push(a.clone());
        }
        let input_batches = checkpoint
            .input_state
            .iter()
            .find(|(n, _)| n == INPUT_BATCHES)
            .map(|(_, a)| a.data.get_f64(0) as u64)
            .unwrap_or(0);
        Ok(HostState {
            global_step: checkpoint.global_step,
            values,
            input_batches,
            restored_from: Some(file),
            warm_started_from: None,
            warm_start_note: None,
        })
    }

    /// The variables of evaluate, predict or export: the latest checkpoint of the model_dir;
    /// with none, `source` (the estimator's warm-start path) read as a restore, every
    /// variable of the graph and the global step (TF's `checkpoint_path`), so batch
    /// normalization's moving statistics come too; with neither, the initial values.
    pub(crate) fn restore_or_load(
        variables: &[Variable],
        saver: &Saver,
        config: &crate::RunConfig,
        source: Option<&WarmStart>,
        log: &mut super::log::Log,
    ) -> Result<HostState, EstimatorError> {
        let restore = source.filter(|_| matches!(saver.latest_file(), Ok(None)));
        let full = restore.map(WarmStart::restore_all);
        let mut state = HostState::restore_or_init(variables, saver, config, full.as_ref(), log)?;
        // Read as a restore: it is reported as one, at the checkpoint's step.
        if let Some(from) = state.warm_started_from.take() {
            state.restored_from = Some(from);
        }
        Ok(state)
    }

    /// The checkpoint of this state; `names`: the variables' names, in the step's order.
    pub(crate) fn checkpoint(&self, names: &[String]) -> Checkpoint {
        Checkpoint {
            global_step: self.global_step,
            variables: names
                .iter()
                .zip(&self.values)
                .map(|(n, a)| (n.clone(), a.clone()))
                .collect(),
            input_state: vec![(
                INPUT_BATCHES.to_string(),
                Array::new(
                    ArrayShape::new(ElementType::S64, &[]),
                    ArrayData::S64(vec![self.input_batches as i64]),
                ),
            )],
        }
    }

    /// The carried state of one shard: the global step (s32 on the device) then the values.
    pub(super) fn carried(&self) -> Result<Vec<Array>, EstimatorError> {
        let step = i32::try_from(self.global_step).map_err(|_| {
            EstimatorError::value(format!(
                "global step {} does not fit the device's s32 step counter (TPUs have no 64-bit values)",
                self.global_step
            ))
        })?;
        let mut carried = vec![Array::new(
            ArrayShape::new(ElementType::S32, &[]),
            ArrayData::S32(vec![step]),
        )];
        carried.extend(self.values.iter().cloned());
        Ok(carried)
    }
}

/// `f32[8,16]`: one spelling for both sides of a mismatch (the shape's own display adds
/// its layout).
fn type_and_dims(ty: ElementType, dims: &[i64]) -> String {
    let dims: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("{ty}[{}]", dims.join(","))
}

/// The variables for evaluate or predict: the latest checkpoint, else the warm-start path
/// restored whole ([`HostState::restore_or_load`]), else the initial values with TF's warning
/// (`purpose`: "evaluate", "predict"), logged as TF logs them.
pub(crate) fn restore_for(
    estimator: &super::tpu_estimator::TpuEstimator,
    variables: &[Variable],
    purpose: &str,
    log: &mut super::log::Log,
) -> Result<HostState, EstimatorError> {
    let saver = Saver::new(&estimator.model_dir, estimator.config.keep_checkpoint_max);
    let state = HostState::restore_or_load(
        variables,
        &saver,
        &estimator.config,
        estimator.warm_start.as_ref(),
        log,
    )?;
    match (&state.restored_from, &state.warm_started_from) {
        (Some(file), _) => log.info(format!("Restoring parameters from {}", file.display())),
        (None, Some(from)) => log.info(format!("Warm-starting from: {}", from.display())),
        (None, None) => log.warn(format!(
            "Could not find trained model in model_dir: {}, running initialization to {purpose}.",
            estimator.model_dir.display()
        )),
    }
    Ok(state)
}

/// Whether the first value of `d` that is not finite is a NaN (`None`: all are finite). The
/// values are looked at in blocks without an early exit, which the compiler vectorizes: the
/// check runs after every training loop over every variable and optimizer slot (22 MB for the
/// MLP with Adam), on the thread that then waits for nothing else.
fn first_non_finite_in<T: Copy>(
    d: &[T],
    finite: impl Fn(T) -> bool,
    nan: impl Fn(T) -> bool,
) -> Option<bool> {
    const BLOCK: usize = 512;
    d.chunks(BLOCK)
        .find(|block| block.iter().fold(false, |bad, &x| bad | !finite(x)))
        .and_then(|block| block.iter().find(|&&x| !finite(x)).map(|&x| nan(x)))
}

/// The first variable holding a NaN or an infinity, with which.
pub(crate) fn first_non_finite<'v>(
    names: &'v [String],
    values: &[Array],
) -> Option<(&'v str, &'static str)> {
    for (name, a) in names.iter().zip(values) {
        let found = match &a.data {
            ArrayData::F32(d) => first_non_finite_in(d, |x| x.is_finite(), |x| x.is_nan()),
            ArrayData::F64(d) => first_non_finite_in(d, |x| x.is_finite(), |x| x.is_nan()),
            _ => None,
        };
        if let Some(is_nan) = found {
            return Some((name, if is_nan { "NaN" } else { "an infinity" }));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(values: Vec<f32>) -> Array {
        Array::new(
            ArrayShape::new(ElementType::F32, &[values.len() as i64]),
            ArrayData::F32(values),
        )
    }

    #[test]
    fn the_first_non_finite_value_is_found_in_any_block() {
        let names = vec!["a".to_string(), "b".to_string()];
        let clean = f32s(vec![1.0; 2000]);
        assert_eq!(
            first_non_finite(&names, &[clean.clone(), clean.clone()]),
            None
        );
        // The last element of a block, the first of the next, the array's last (a short block).
        for at in [0, 511, 512, 1999] {
            let mut bad = vec![1.0; 2000];
            bad[at] = f32::NAN;
            assert_eq!(
                first_non_finite(&names, &[clean.clone(), f32s(bad)]),
                Some(("b", "NaN")),
                "NaN at {at}"
            );
        }
        // The first of several counts: an infinity before a NaN in the same block.
        let mut both = vec![1.0; 2000];
        both[700] = f32::NEG_INFINITY;
        both[701] = f32::NAN;
        assert_eq!(
            first_non_finite(&names, &[f32s(both), clean]),
            Some(("a", "an infinity"))
        );
        let f64s = Array::new(
            ArrayShape::new(ElementType::F64, &[3]),
            ArrayData::F64(vec![0.0, f64::INFINITY, f64::NAN]),
        );
        assert_eq!(
            first_non_finite(&names[..1], &[f64s]),
            Some(("a", "an infinity"))
        );
    }
}
