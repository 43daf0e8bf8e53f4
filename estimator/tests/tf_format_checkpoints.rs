//! Checkpoints in TF's format (`RunConfig::checkpoint_format`): a model_dir written with
//! `CheckpointFormat::Tf` alone resumes, evaluates and keeps its newest checkpoints exactly as a
//! safetensors one does, and `Both` writes the same tensors, bitwise, in the two formats.
//! (TensorFlow itself reading them is checked by `tests/tf_interop/check_tf_reads.py`.)

mod support;

use std::path::Path;
use support::tiny::{self, config, estimator, files, temp_dir};
use tessel_estimator::checkpoint::{read_checkpoint, Checkpoint, CheckpointState, TfBundle};
use tessel_estimator::{CheckpointFormat, Params, RunConfig};

fn with_format(config: RunConfig, format: CheckpointFormat) -> RunConfig {
    RunConfig {
        checkpoint_format: format,
        ..config
    }
}

/// The checkpoint with its tensors in name order (TF's bundle keeps them sorted).
fn sorted(mut c: Checkpoint) -> Checkpoint {
    c.variables.sort_by(|a, b| a.0.cmp(&b.0));
    c.input_state.sort_by(|a, b| a.0.cmp(&b.0));
    c
}

fn state(dir: &Path) -> CheckpointState {
    CheckpointState::parse(&std::fs::read_to_string(dir.join("checkpoint")).unwrap()).unwrap()
}

#[test]
fn tf_format_alone_resumes_and_evaluates_as_safetensors_does() {
    let one = temp_dir("tf_format_one");
    let two = temp_dir("tf_format_two");
    let a = estimator(config(&one, 30, 1000), Params::new());
    a.train(tiny::train_input, None, Some(200)).unwrap();

    let tf = || {
        estimator(
            with_format(config(&two, 30, 1000), CheckpointFormat::Tf),
            Params::new(),
        )
    };
    tf().train(tiny::train_input, None, Some(100)).unwrap();
    // A new estimator, as a new process would make: it resumes from TF's files alone.
    let r = tf().train(tiny::train_input, None, Some(200)).unwrap();
    assert_eq!(r.global_step, 200);
    assert!(
        r.log
            .iter()
            .any(|l| l.starts_with("Restoring parameters from")
                && l.contains("model.ckpt-100.index")),
        "{:#?}",
        r.log
    );
    let written: Vec<String> = files(&two)
        .into_iter()
        .filter(|f| f.starts_with("model.ckpt-"))
        .collect();
    assert_eq!(
        written,
        [
            "model.ckpt-0.data-00000-of-00001",
            "model.ckpt-0.index",
            "model.ckpt-100.data-00000-of-00001",
            "model.ckpt-100.index",
            "model.ckpt-200.data-00000-of-00001",
            "model.ckpt-200.index",
        ]
    );
    // The state file names prefixes, as TF's does: TF resolves `PREFIX.index`.
    assert_eq!(
        state(&two).model_checkpoint_path.as_deref(),
        Some("model.ckpt-200")
    );

    // Resuming through TF's format is as exact as through safetensors: the same tensors,
    // bitwise (Adam's slots, the global step and the input position included).
    let want = sorted(read_checkpoint(&one.join("model.ckpt-200.safetensors")).unwrap());
    let got = sorted(read_checkpoint(&two.join("model.ckpt-200.index")).unwrap());
    assert_eq!(got.global_step, want.global_step);
    assert_eq!(got.input_state, want.input_state);
    assert_eq!(got.variables.len(), want.variables.len());
    for ((n, a), (m, b)) in got.variables.iter().zip(&want.variables) {
        assert_eq!(n, m);
        assert_eq!(a.shape, b.shape, "{n}");
        assert_eq!(a.data.to_le_bytes(), b.data.to_le_bytes(), "{n}");
    }

    // Evaluation restores TF's format too, at the same figures.
    let ea = a.evaluate(tiny::eval_input, None).unwrap();
    let eb = tf().evaluate(tiny::eval_input, None).unwrap();
    assert_eq!(eb.global_step, 200);
    assert_eq!((eb.loss, &eb.metrics), (ea.loss, &ea.metrics));
}

#[test]
fn both_formats_hold_the_same_tensors_and_old_ones_go_together() {
    let dir = temp_dir("tf_format_both");
    let mut cfg = with_format(config(&dir, 25, 50), CheckpointFormat::Both);
    cfg.keep_checkpoint_max = 2;
    estimator(cfg, Params::new())
        .train(tiny::train_input, None, Some(200))
        .unwrap();
    let written: Vec<String> = files(&dir)
        .into_iter()
        .filter(|f| f.starts_with("model.ckpt-"))
        .collect();
    assert_eq!(
        written,
        [
            "model.ckpt-150.data-00000-of-00001",
            "model.ckpt-150.index",
            "model.ckpt-150.safetensors",
            "model.ckpt-200.data-00000-of-00001",
            "model.ckpt-200.index",
            "model.ckpt-200.safetensors",
        ]
    );
    for step in [150, 200] {
        let st =
            sorted(read_checkpoint(&dir.join(format!("model.ckpt-{step}.safetensors"))).unwrap());
        let tf = sorted(read_checkpoint(&dir.join(format!("model.ckpt-{step}.index"))).unwrap());
        assert_eq!(tf, st, "step {step}");
        // TF's names and dtypes: the global step is an int64 scalar.
        let bundle = TfBundle::open(dir.join(format!("model.ckpt-{step}"))).unwrap();
        let info = bundle.info("global_step").unwrap();
        assert_eq!((info.dtype.as_str(), info.dims.len()), ("int64", 0));
        assert!(
            bundle.names().any(|n| n == "dense/kernel/Adam"),
            "{:?}",
            bundle.names().collect::<Vec<_>>()
        );
    }
}
