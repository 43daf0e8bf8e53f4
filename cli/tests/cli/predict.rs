//! `tessel predict` on an export of a tiny model (dense 4 → 3, trained a few steps): its
//! outputs equal the estimator's own `predict()` for any number of rows (1, batch - 1,
//! batch + 1, 3 * batch + 5); a missing export and tampered copies of a real one (an extra or
//! mis-shaped output or a mis-shaped parameter in the signature, a module the verifier
//! refuses, a mis-shaped variable) are errors with exit code 1 that name what is wrong.

use std::path::{Path, PathBuf};
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

/// Trains the tiny model and exports it (batch 8); returns the estimator and the export.
fn trained_export(tmp: &Path) -> (TpuEstimator, PathBuf) {
    let est = estimator(&tmp.join("model"));
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
    let export = est.export(tmp.join("export"), &serving).unwrap();
    (est, export)
}

/// `tessel predict EXPORT --inputs X --outputs Y` with `x` of `rows` rows.
fn predict(tmp: &Path, export: &Path, rows: usize) -> std::process::Output {
    let inputs = tmp.join("x.safetensors");
    write_safetensors(&inputs, &[("x".to_string(), x(rows))]).unwrap();
    tessel(&[
        "predict",
        export.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--outputs",
        tmp.join("y.safetensors").to_str().unwrap(),
    ])
}

/// The error `tessel predict` gives on `export`, which must fail with exit code 1.
fn predict_error(tmp: &Path, export: &Path) -> String {
    let out = predict(tmp, export, 8);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn predict_runs_an_export_as_the_estimator_predicts_on_any_number_of_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let (est, export) = trained_export(tmp.path());
    // 1, batch - 1, batch + 1 and 3 * batch + 5 rows (batch 8).
    for rows in [1, 7, 9, 29] {
        let expected: Vec<_> = est
            .predict(
                |p: &Params| {
                    let ds = Dataset::from_tensor_slices(vec![("x".into(), x(rows))])?
                        .batch(p.batch_size() as u64, false)?;
                    Ok(Input::features_only(ds))
                },
                None,
            )
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(expected.len(), rows);
        let out = predict(tmp.path(), &export, rows);
        assert!(
            out.status.success(),
            "{rows} rows: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("classes: s32[{rows}]")),
            "{stdout}"
        );
        let got = read_safetensors(tmp.path().join("y.safetensors")).unwrap();
        let mut names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        names.sort();
        assert_eq!(names, ["classes", "probabilities"]);
        for (name, a) in &got {
            assert_eq!(a.shape.dims[0], rows as i64, "{name}");
            let per_row = a.len() / rows;
            for (i, p) in expected.iter().enumerate() {
                let e = &p[name.as_str()];
                for k in 0..per_row {
                    let (u, v) = (a.data.get_f64(i * per_row + k), e.data.get_f64(k));
                    assert!(
                        (u - v).abs() < 1e-6,
                        "{rows} rows: {name}[{i}][{k}]: {u} vs {v}"
                    );
                }
            }
        }
    }

    // Rows of the wrong width: the error says what the export takes.
    let inputs = tmp.path().join("x.safetensors");
    let wide = Array::new(
        ArrayShape::new(ElementType::F32, &[3, 5]),
        ArrayData::F32(vec![0.0; 15]),
    );
    write_safetensors(&inputs, &[("x".to_string(), wide)]).unwrap();
    let out = tessel(&[
        "predict",
        export.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--outputs",
        tmp.path().join("y.safetensors").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("export: inputs: `x` is f32[3,5], but the export takes f32[N,4]"),
        "{err}"
    );
    assert!(!err.contains("input_fn"), "{err}");

    // Not an export.
    let err = predict_error(tmp.path(), tmp.path());
    assert!(err.contains("signature.json"), "{err}");
}

/// A copy of `export` in `tmp/name`, to damage.
fn tampered_copy(export: &Path, tmp: &Path, name: &str) -> PathBuf {
    let copy = tmp.join(name);
    std::fs::create_dir_all(&copy).unwrap();
    for f in ["model.hlo", "signature.json", "variables.safetensors"] {
        std::fs::copy(export.join(f), copy.join(f)).unwrap();
    }
    copy
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} has no {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn predict_names_what_is_wrong_with_a_tampered_export() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, export) = trained_export(tmp.path());
    let sig = |dir: &Path| dir.join("signature.json");

    // An output the module does not have.
    let extra = tampered_copy(&export, tmp.path(), "extra_output");
    edit(
        &sig(&extra),
        "\"dtype\": \"f32\"}]}",
        "\"dtype\": \"f32\"},\n {\"index\": 2, \"name\": \"logits\", \"shape\": [8, 3], \"dtype\": \"f32\"}]}",
    );
    let err = predict_error(tmp.path(), &extra);
    assert!(
        err.contains("output `logits` (index 2) is not in the module, which has 2 outputs"),
        "{err}"
    );

    // An output whose shape is not the module's.
    let shape = tampered_copy(&export, tmp.path(), "output_shape");
    edit(&sig(&shape), "\"shape\": [8, 3]", "\"shape\": [8, 4]");
    let err = predict_error(tmp.path(), &shape);
    assert!(
        err.contains("output `probabilities` (index 1) is f32[8,4] in signature.json, but the module's output 1 is f32[8,3]"),
        "{err}"
    );

    // A parameter whose shape is not the module's.
    let parameter = tampered_copy(&export, tmp.path(), "parameter_shape");
    edit(&sig(&parameter), "\"shape\": [8, 4]", "\"shape\": [8, 5]");
    let err = predict_error(tmp.path(), &parameter);
    assert!(
        err.contains("parameter 1 `x` is f32[8,5] in signature.json, but the module's parameter 1 is f32[8,4]"),
        "{err}"
    );

    // A module the verifier refuses: one instruction's shape changed. Every finding is
    // printed with its computation and instruction, not only their count.
    let invalid = tampered_copy(&export, tmp.path(), "invalid_module");
    let hlo = std::fs::read_to_string(invalid.join("model.hlo")).unwrap();
    let line = hlo
        .lines()
        .find(|l| l.contains("f32[8,3]{1,0} add("))
        .unwrap_or_else(|| panic!("no add of f32[8,3] in\n{hlo}"));
    let instruction = line
        .trim()
        .trim_start_matches("ROOT ")
        .split(' ')
        .next()
        .unwrap();
    edit(
        &invalid.join("model.hlo"),
        line,
        &line.replace("f32[8,3]{1,0} add(", "f32[8,5]{1,0} add("),
    );
    let err = predict_error(tmp.path(), &invalid);
    assert!(err.contains("model.hlo: the module is not valid"), "{err}");
    assert!(
        err.contains("in computation") && err.contains(&format!("instruction {instruction}")),
        "{err}"
    );

    // A variable of the wrong shape is named as a variable (not an input or padding error).
    let variable = tampered_copy(&export, tmp.path(), "variable_shape");
    let mut vars = read_safetensors(variable.join("variables.safetensors")).unwrap();
    for (name, a) in vars.iter_mut() {
        if name == "dense/kernel" {
            *a = Array::new(ArrayShape::new(ElementType::F32, &[3, 4]), a.data.clone());
        }
    }
    write_safetensors(variable.join("variables.safetensors"), &vars).unwrap();
    let err = predict_error(tmp.path(), &variable);
    assert!(
        err.contains("variables.safetensors: variable `dense/kernel` is f32[3,4], but the module takes f32[4,3]"),
        "{err}"
    );
    assert!(!err.contains("input_fn") && !err.contains("pad"), "{err}");
}
