//! `tessel predict` on an export of a tiny model (dense 4 → 3, trained a few steps): its
//! outputs equal the estimator's own `predict()`; a short batch and a missing export are
//! errors with exit code 1.

use std::path::Path;
use std::process::Command;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::estimator::{Features, ServingInput};
use tessel_estimator::input::Dataset;
use tessel_estimator::model::layers::{dense, Dense};
use tessel_estimator::model::optimizers::GradientDescent;
use tessel_estimator::model::Optimizer;
use tessel_estimator::{
    EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuConfig, TpuEstimator,
    TpuEstimatorSpec,
};
use tessel_runtime::host_io::{read_safetensors, write_safetensors};

fn model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    _params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let logits = dense(g, &features["x"], 3, Dense::default())?;
    let mut spec = TpuEstimatorSpec::new(mode);
    if mode == Mode::Predict {
        spec.predictions = vec![
            ("classes".into(), logits.argmax(1)),
            ("probabilities".into(), logits.softmax(1)),
        ];
        return Ok(spec);
    }
    let onehot = labels.expect("labels").one_hot(3, ElementType::F32);
    let loss = logits
        .softmax_cross_entropy_with_logits(&onehot)
        .reduce_mean(&[], false);
    spec.loss = Some(loss.clone());
    spec.train_op = Some(GradientDescent::new(0.5).minimize(g, &loss)?);
    Ok(spec)
}

fn x(n: usize) -> Array {
    let v: Vec<f32> = (0..n * 4)
        .map(|k| ((k * 5 + k / 4) % 9) as f32 / 4.0 - 1.0)
        .collect();
    Array::new(
        ArrayShape::new(ElementType::F32, &[n as i64, 4]),
        ArrayData::F32(v),
    )
}

fn estimator(dir: &Path) -> TpuEstimator {
    let config = RunConfig {
        model_dir: Some(dir.to_path_buf()),
        tf_random_seed: Some(3),
        tpu_config: TpuConfig {
            iterations_per_loop: 4,
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    TpuEstimator::new(model_fn, config, Params::new(), false, 8, None, Some(8))
        .unwrap()
        .quiet()
}

fn tessel(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn predict_runs_an_export_as_the_estimator_predicts() {
    let tmp = tempfile::tempdir().unwrap();
    let est = estimator(&tmp.path().join("model"));
    let train_input = |p: &Params| {
        let y: Vec<i32> = (0..24).map(|i| i % 3).collect();
        let y = Array::new(ArrayShape::new(ElementType::S32, &[24]), ArrayData::S32(y));
        let ds = Dataset::from_tensor_slices(vec![("x".into(), x(24)), ("y".into(), y)])?
            .repeat(None)
            .batch(p.batch_size() as u64, true)?;
        Ok(Input::new(ds, "y"))
    };
    est.train(train_input, None, Some(8)).unwrap();
    let serving = ServingInput::new().feature("x", ElementType::F32, &[4]);
    let export = est.export(tmp.path().join("export"), &serving).unwrap();
    let expected: Vec<_> = est
        .predict(
            |p: &Params| {
                let ds = Dataset::from_tensor_slices(vec![("x".into(), x(8))])?
                    .batch(p.batch_size() as u64, false)?;
                Ok(Input::features_only(ds))
            },
            None,
        )
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();

    let inputs = tmp.path().join("x.safetensors");
    let outputs = tmp.path().join("y.safetensors");
    write_safetensors(&inputs, &[("x".to_string(), x(8))]).unwrap();
    let out = tessel(&[
        "predict",
        export.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--outputs",
        outputs.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = read_safetensors(&outputs).unwrap();
    let mut names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, ["classes", "probabilities"]);
    for (name, a) in &got {
        let per_row = a.len() / 8;
        for (i, p) in expected.iter().enumerate() {
            let e = &p[name.as_str()];
            for k in 0..per_row {
                let (u, v) = (a.data.get_f64(i * per_row + k), e.data.get_f64(k));
                assert!((u - v).abs() < 1e-6, "{name}[{i}][{k}]: {u} vs {v}");
            }
        }
    }

    // A short batch: the caller pads; the error says so.
    write_safetensors(&inputs, &[("x".to_string(), x(5))]).unwrap();
    let out = tessel(&[
        "predict",
        export.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--outputs",
        outputs.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("f32[8,4]") && err.contains("pad a short batch"),
        "{err}"
    );

    // Not an export.
    let out = tessel(&[
        "predict",
        tmp.path().to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--outputs",
        outputs.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("signature.json"), "{err}");
}
