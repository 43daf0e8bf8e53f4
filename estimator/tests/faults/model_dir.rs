//! A model_dir damaged between runs: the state file empty, cut off or naming a missing
//! checkpoint; checkpoints without a state file; a flipped byte in a checkpoint and in an
//! export; temporaries of an interrupted save; a second trainer, and a stale lock; step
//! counts the device cannot run. Nothing trained is ever overwritten, and each error names
//! the file and how to go on.

use super::{assert_clean, serial};
use crate::support::tiny::{self, checkpoint_steps, ckpt_bytes, config, estimator, temp_dir};
use std::path::Path;
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::Tensor;
use tessel_estimator::checkpoint::{CheckpointError, ModelDirLock};
use tessel_estimator::estimator::{ExportedModel, Features, ServingInput};
use tessel_estimator::model::layers::{dense, Dense};
use tessel_estimator::model::optimizers::GradientDescent;
use tessel_estimator::model::{CrossShardOptimizer, Optimizer};
use tessel_estimator::{
    EstimatorError, Graph, Mode, Params, RunConfig, TpuEstimator, TpuEstimatorSpec,
};

/// A model_dir trained to step 20 with checkpoints at 0, 10 and 20.
fn trained(name: &str) -> crate::support::tiny::TestDir {
    let dir = temp_dir(name);
    estimator(config(&dir, 5, 10), Params::new())
        .train(tiny::train_input, None, Some(20))
        .unwrap();
    assert_eq!(checkpoint_steps(&dir), vec![0, 10, 20]);
    dir
}

/// Every checkpoint file's bytes, to prove that nothing was overwritten.
fn snapshot(dir: &Path) -> Vec<(i64, Vec<u8>)> {
    checkpoint_steps(dir)
        .into_iter()
        .map(|s| (s, ckpt_bytes(dir, s)))
        .collect()
}

fn train_error(config: RunConfig) -> String {
    estimator(config, Params::new())
        .train(tiny::train_input, None, Some(40))
        .unwrap_err()
        .to_string()
}

/// A zero-length state file (what a power loss can leave) used to start training afresh and
/// overwrite model.ckpt-0 and the trained checkpoints. Now it is an error that changes nothing.
#[test]
fn an_empty_state_file_is_refused_and_nothing_is_overwritten() {
    let dir = trained("fault_empty_state");
    let before = snapshot(&dir);
    std::fs::write(dir.join("checkpoint"), b"").unwrap();
    let e = train_error(config(&dir, 5, 10));
    assert!(e.contains("checkpoint state file"), "{e}");
    assert!(e.contains("is empty"), "{e}");
    assert!(
        e.contains("model.ckpt-0, model.ckpt-10, model.ckpt-20"),
        "{e}"
    );
    assert!(
        e.contains("write `model_checkpoint_path: \"model.ckpt-20\"`"),
        "{e}"
    );
    assert_eq!(snapshot(&dir), before);
    // Evaluation refuses it too, rather than evaluate initial values.
    let e = estimator(config(&dir, 5, 10), Params::new())
        .evaluate(tiny::eval_input, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is empty"), "{e}");

    // Following the advice resumes from step 20.
    std::fs::write(
        dir.join("checkpoint"),
        "model_checkpoint_path: \"model.ckpt-20\"\n",
    )
    .unwrap();
    let r = estimator(config(&dir, 5, 10), Params::new())
        .train(tiny::train_input, None, Some(30))
        .unwrap();
    assert!(
        r.log
            .iter()
            .any(|l| l.ends_with("model.ckpt-20.safetensors")),
        "{:?}",
        r.log
    );
    assert_eq!(r.global_step, 30);
}

#[test]
fn a_cut_off_or_inconsistent_state_file_is_refused() {
    let dir = trained("fault_cut_state");
    let before = snapshot(&dir);
    for (text, says) in [
        ("model_checkpoint_path: \"model.ck", "cannot be parsed"),
        (
            "all_model_checkpoint_paths: \"model.ckpt-10\"\n",
            "names no checkpoint",
        ),
        (
            "model_checkpoint_path: \"model.ckpt-90\"\n",
            "names model.ckpt-90, but",
        ),
        ("\u{0}\u{0}\u{0}\u{0}", "cannot be parsed"),
    ] {
        std::fs::write(dir.join("checkpoint"), text).unwrap();
        let e = train_error(config(&dir, 5, 10));
        assert!(e.contains(says), "{text:?}: {e}");
        assert!(
            e.contains("model.ckpt-0, model.ckpt-10, model.ckpt-20"),
            "{e}"
        );
        assert_eq!(snapshot(&dir), before, "{text:?}");
    }
}

/// Checkpoints of another run (or with their state file deleted): a fresh run there would
/// overwrite them, so it is refused.
#[test]
fn trained_checkpoints_without_a_state_file_are_refused() {
    let dir = trained("fault_orphans");
    let before = snapshot(&dir);
    std::fs::remove_file(dir.join("checkpoint")).unwrap();
    let e = train_error(config(&dir, 5, 10));
    assert!(e.contains("no `checkpoint` state file"), "{e}");
    assert!(
        e.contains("model.ckpt-0, model.ckpt-10, model.ckpt-20"),
        "{e}"
    );
    assert_eq!(snapshot(&dir), before);

    // Only the step-0 checkpoint of a first save cut off before its state file: nothing
    // trained, so a new run starts there.
    let fresh = temp_dir("fault_orphan_zero");
    std::fs::copy(
        dir.join("model.ckpt-0.safetensors"),
        fresh.join("model.ckpt-0.safetensors"),
    )
    .unwrap();
    let r = estimator(config(&fresh, 5, 10), Params::new())
        .train(tiny::train_input, None, Some(10))
        .unwrap();
    assert_eq!(r.global_step, 10);
}

/// 16 flipped bytes in the middle of the latest checkpoint used to load silently. The
/// checksum names the file and the tensor; the error lists the intact older checkpoints;
/// falling back is the user's choice.
#[test]
fn a_flipped_checkpoint_is_caught_and_fallback_is_opt_in() {
    let _s = serial();
    let dir = trained("fault_flipped");
    let latest = dir.join("model.ckpt-20.safetensors");
    let mut bytes = std::fs::read(&latest).unwrap();
    let middle = bytes.len() / 2;
    for b in &mut bytes[middle..middle + 16] {
        *b ^= 0x5A;
    }
    std::fs::write(&latest, &bytes).unwrap();

    let e = estimator(config(&dir, 5, 10), Params::new())
        .train(tiny::train_input, None, Some(40))
        .unwrap_err();
    assert!(
        matches!(
            &e,
            EstimatorError::Checkpoint(CheckpointError::Corrupt { intact, .. })
                if intact == &["model.ckpt-10".to_string(), "model.ckpt-0".to_string()]
        ),
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains("model.ckpt-20.safetensors: tensor \""),
        "{text}"
    );
    assert!(text.contains("is corrupt"), "{text}");
    assert!(text.contains("fall_back_to_intact_checkpoint"), "{text}");
    assert_eq!(std::fs::read(&latest).unwrap(), bytes, "left as it was");
    let e = estimator(config(&dir, 5, 10), Params::new())
        .evaluate(tiny::eval_input, None)
        .unwrap_err();
    assert!(e.to_string().contains("is corrupt"), "{e}");

    // Asked to, training resumes from step 10 and says what it passed over.
    let mut fall_back = config(&dir, 5, 10);
    fall_back.fall_back_to_intact_checkpoint = true;
    let r = estimator(fall_back, Params::new())
        .train(tiny::train_input, None, Some(20))
        .unwrap();
    assert!(
        r.log
            .iter()
            .any(|l| l.starts_with("Passing over a damaged checkpoint")
                && l.contains("model.ckpt-20")),
        "{:?}",
        r.log
    );
    assert!(
        r.log
            .iter()
            .any(|l| l.ends_with("model.ckpt-10.safetensors")),
        "{:?}",
        r.log
    );
    // Retrained from 10 to 20, the checkpoint is the uninterrupted run's again.
    let reference = trained("fault_flipped_ref");
    assert!(ckpt_bytes(&dir, 20) == ckpt_bytes(&reference, 20));
}

/// Dense 8 -> 3 on the tiny data, with a PREDICT mode to export.
fn exportable_model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    _params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let logits = dense(g, &features["x"], tiny::CLASSES as i64, Dense::default())?;
    let mut spec = TpuEstimatorSpec::new(mode);
    if mode == Mode::Predict {
        spec.predictions = vec![("classes".into(), logits.argmax(1))];
        return Ok(spec);
    }
    let labels = labels.ok_or_else(|| EstimatorError::ModelFn("labels".into()))?;
    let loss = logits
        .softmax_cross_entropy_with_logits(&labels.one_hot(tiny::CLASSES as i64, ElementType::F32))
        .reduce_mean(&[], false);
    spec.loss = Some(loss.clone());
    spec.train_op = Some(CrossShardOptimizer::new(GradientDescent::new(0.5)).minimize(g, &loss)?);
    Ok(spec)
}

/// An export's variables carry checksums too: `tessel predict`'s loader names the tensor.
#[test]
fn a_flipped_export_is_caught() {
    let dir = temp_dir("fault_flipped_export");
    let base = temp_dir("fault_flipped_export_out");
    let est = TpuEstimator::new(
        exportable_model_fn,
        config(&dir, 5, 10),
        Params::new(),
        false,
        8,
        Some(8),
        Some(8),
    )
    .unwrap()
    .quiet();
    est.train(tiny::train_input, None, Some(10)).unwrap();
    let serving = ServingInput::new().feature("x", ElementType::F32, &[tiny::FEATURES as i64]);
    let export = est.export(&*base, &serving).unwrap();
    assert!(ExportedModel::load(&export).is_ok());
    let variables = export.join("variables.safetensors");
    let mut bytes = std::fs::read(&variables).unwrap();
    let at = bytes.len() - 8;
    bytes[at] ^= 1;
    std::fs::write(&variables, &bytes).unwrap();
    let e = ExportedModel::load(&export)
        .err()
        .expect("a damaged export");
    let text = e.to_string();
    assert!(text.contains("variables.safetensors"), "{text}");
    assert!(text.contains("is corrupt"), "{text}");
}

/// Temporaries of a save killed mid-write are removed by the next trainer, which says so.
#[test]
fn leftover_temporaries_are_removed_at_the_next_start() {
    let dir = trained("fault_leftovers");
    for name in ["model.ckpt-30.safetensors.tmp4242", "checkpoint.tmp4242"] {
        std::fs::write(dir.join(name), b"half a save").unwrap();
    }
    let r = estimator(config(&dir, 5, 10), Params::new())
        .train(tiny::train_input, None, Some(30))
        .unwrap();
    for name in ["model.ckpt-30.safetensors.tmp4242", "checkpoint.tmp4242"] {
        assert!(
            r.log.iter().any(|l| l.starts_with("Removed ")
                && l.contains(name)
                && l.ends_with("left by a save that was interrupted.")),
            "{name}: {:?}",
            r.log
        );
    }
    assert_clean(&dir);
}

/// A second trainer fails at once naming the holder; a lock whose holder died is taken over.
#[test]
fn one_trainer_per_model_dir_and_stale_locks_are_taken_over() {
    let dir = trained("fault_lock");
    let before = snapshot(&dir);
    {
        let _held = ModelDirLock::acquire(&dir).unwrap();
        let e = train_error(config(&dir, 5, 10));
        assert!(e.contains("another trainer is using"), "{e}");
        assert!(
            e.contains(&format!("pid {} on host ", std::process::id())),
            "{e}"
        );
        assert!(e.contains(", started 20"), "{e}");
        assert_eq!(snapshot(&dir), before);
        // Evaluation only reads: it runs while a trainer holds the lock.
        estimator(config(&dir, 5, 10), Params::new())
            .evaluate(tiny::eval_input, None)
            .unwrap();
    }
    // What a holder that was killed leaves: its name in the file, and no lock held.
    std::fs::write(
        dir.join("trainer.lock"),
        "pid 999999 on host elsewhere, started 2026-01-01 00:00:00 UTC\n",
    )
    .unwrap();
    let r = estimator(config(&dir, 5, 10), Params::new())
        .train(tiny::train_input, None, Some(30))
        .unwrap();
    assert!(
        r.log.iter().any(|l| l
            == "Took over the trainer lock of pid 999999 on host elsewhere, started 2026-01-01 00:00:00 UTC: that process ended without releasing it."),
        "{:?}",
        r.log
    );
    // Released cleanly: the next trainer finds no stale holder.
    let r = estimator(config(&dir, 5, 10), Params::new())
        .train(tiny::train_input, None, Some(40))
        .unwrap();
    assert!(
        !r.log.iter().any(|l| l.starts_with("Took over")),
        "{:?}",
        r.log
    );
}

/// A step count past the device's s32 counter is refused; it used to wrap to "nothing to do".
#[test]
fn step_counts_out_of_range_are_refused_not_wrapped() {
    let dir = temp_dir("fault_counts");
    let est = estimator(config(&dir, 5, 10), Params::new());
    for (steps, max) in [
        (None, Some(u64::MAX)),
        (Some(u64::MAX), None),
        (None, Some(1u64 << 31)),
        (Some(i64::MAX as u64), None),
    ] {
        let e = est
            .train(tiny::train_input, steps, max)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "would train past step 2147483647, the last the device's s32 step counter holds"
            ),
            "{steps:?} {max:?}: {e}"
        );
    }
    assert!(checkpoint_steps(&dir).is_empty());
}
