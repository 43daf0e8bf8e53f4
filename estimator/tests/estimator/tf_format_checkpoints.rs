//! Checkpoints in TF's format (`RunConfig::checkpoint_format`): a model_dir written with
//! `CheckpointFormat::Tf` alone resumes, evaluates and keeps its newest checkpoints exactly as a
//! safetensors one does, `Both` writes the same tensors, bitwise, in the two formats, and a
//! model_dir TensorFlow wrote restores and trains on.
//! (TensorFlow itself reading them is checked by `tests/tf_interop/check_tf_reads.py`.)

use crate::support::tiny::{self, config, estimator, files, temp_dir};
use std::path::Path;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::checkpoint::{
    read_checkpoint, Checkpoint, CheckpointState, TfBundle, WarmStart,
};
use tessel_estimator::estimator::Features;
use tessel_estimator::input::Dataset;
use tessel_estimator::model::layers::{dense, Activation, Dense};
use tessel_estimator::model::optimizers::Momentum;
use tessel_estimator::model::Optimizer;
use tessel_estimator::{
    CheckpointFormat, EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuConfig,
    TpuEstimator, TpuEstimatorSpec,
};

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

/// The model of the TF-written fixture `tests/fixtures/tf_ckpt/` (two `tf.layers.dense`, 3 → 4
/// relu → 2, Momentum): loss mean(y²).
fn fixture_model_fn(
    g: &mut Graph,
    features: &Features,
    _labels: Option<&Tensor>,
    mode: Mode,
    _params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let relu = Dense {
        activation: Activation::Relu,
        ..Dense::default()
    };
    let h = dense(g, &features["x"], 4, relu)?;
    let y = dense(g, &h, 2, Dense::default())?;
    let mut spec = TpuEstimatorSpec::new(mode);
    let loss = (&y * &y).reduce_mean(&[], false);
    spec.loss = Some(loss.clone());
    if mode == Mode::Train {
        spec.train_op = Some(Momentum::new(0.1f32, 0.9).minimize(g, &loss)?);
    }
    Ok(spec)
}

fn fixture_input(p: &Params) -> Result<Input, EstimatorError> {
    let x: Vec<f32> = (0..8 * 3)
        .map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.0)
        .collect();
    let label = Array::new(
        ArrayShape::new(ElementType::S32, &[8]),
        ArrayData::S32(vec![0; 8]),
    );
    let ds = Dataset::from_tensor_slices(vec![
        ("x".into(), Array::f32(&[8, 3], x)),
        ("label".into(), label),
    ])?;
    Ok(Input::new(
        ds.repeat(None).batch(p.batch_size() as u64, true)?,
        "label",
    ))
}

fn fixture_estimator(model_dir: &Path, format: CheckpointFormat) -> TpuEstimator {
    let config = RunConfig {
        model_dir: Some(model_dir.to_path_buf()),
        checkpoint_format: format,
        tpu_config: TpuConfig {
            iterations_per_loop: 1,
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    TpuEstimator::new(
        fixture_model_fn,
        config,
        Params::new(),
        false,
        8,
        Some(8),
        None,
    )
    .unwrap()
    .quiet()
}

#[test]
fn a_model_dir_tensorflow_wrote_restores_and_trains_on() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf_ckpt");
    let tmp = temp_dir("tf_written_model_dir");
    let model_dir = tmp.join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    for f in [
        "checkpoint",
        "model.ckpt-7.index",
        "model.ckpt-7.data-00000-of-00001",
    ] {
        std::fs::copy(fixture.join(f), model_dir.join(f)).unwrap();
    }
    // Evaluation restores TF's checkpoint: its global step, and the values a warm start of
    // every variable gives.
    let restored = fixture_estimator(&model_dir, CheckpointFormat::Safetensors)
        .evaluate(fixture_input, Some(1))
        .unwrap();
    assert_eq!(restored.global_step, 7);
    assert!(
        restored
            .log
            .iter()
            .any(|l| l.starts_with("Restoring parameters from") && l.contains("model.ckpt-7.index")),
        "{:#?}",
        restored.log
    );
    let warm = fixture_estimator(&tmp.join("empty"), CheckpointFormat::Safetensors)
        .with_warm_start(WarmStart::new(&fixture).all_variables())
        .evaluate(fixture_input, Some(1))
        .unwrap();
    assert_eq!(restored.loss, warm.loss);

    // Training resumes from step 7 with TF's Momentum slots, and saves in TF's format beside
    // TF's own checkpoint.
    let r = fixture_estimator(&model_dir, CheckpointFormat::Tf)
        .train(fixture_input, None, Some(10))
        .unwrap();
    assert_eq!(r.global_step, 10);
    let st = state(&model_dir);
    assert_eq!(st.model_checkpoint_path.as_deref(), Some("model.ckpt-10"));
    assert_eq!(
        st.all_model_checkpoint_paths,
        ["model.ckpt-7", "model.ckpt-10"]
    );
    let c = read_checkpoint(&model_dir.join("model.ckpt-10.index")).unwrap();
    assert_eq!(c.global_step, 10);
    assert!(c
        .variables
        .iter()
        .any(|(n, _)| n == "dense/kernel/Momentum"));
}

/// The writer's files for the tensors of TF's fixture checkpoint are TF's own, byte for byte
/// (index and data): the same SSTable layout, protos, order and CRCs as TF's `BundleWriter`.
#[test]
fn the_writer_writes_tfs_bytes_for_tfs_fixture() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf_ckpt");
    let bundle = TfBundle::open(fixture.join("model.ckpt-7")).unwrap();
    let tensors = bundle.read_all().unwrap();
    let tmp = temp_dir("tf_bytes");
    tessel_estimator::checkpoint::tf_bundle::write_bundle(&tmp.join("model.ckpt-7"), &tensors)
        .unwrap();
    for f in ["model.ckpt-7.data-00000-of-00001", "model.ckpt-7.index"] {
        let ours = std::fs::read(tmp.join(f)).unwrap();
        let tfs = std::fs::read(fixture.join(f)).unwrap();
        assert!(
            ours == tfs,
            "{f}: {} bytes vs TF's {}\n{ours:?}\n{tfs:?}",
            ours.len(),
            tfs.len()
        );
    }
}
