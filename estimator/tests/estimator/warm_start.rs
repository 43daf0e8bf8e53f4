//! TensorFlow checkpoints read natively, and warm start from them or from tessel's own.
//!
//! The fixture `tests/fixtures/tf_ckpt` was written by TF 2.15 (`tests/tf/make_tf_ckpt_fixture.py`,
//! which also wrote `expected.json` with TF's own reader); every value is compared.

use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::checkpoint::{
    Checkpoint, Saver, TfBundle, TfBundleError, WarmStart, WarmStartError,
};
use tessel_estimator::estimator::{Features, Input};
use tessel_estimator::input::Dataset;
use tessel_estimator::model::layers::{dense, Activation, Dense};
use tessel_estimator::model::optimizers::GradientDescent;
use tessel_estimator::model::variables::Variable;
use tessel_estimator::model::{get_variable, Initializer, Optimizer};
use tessel_estimator::{
    EstimatorError, Graph, Mode, Params, RunConfig, TpuEstimator, TpuEstimatorSpec,
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf_ckpt")
}

fn expected() -> BTreeMap<String, Json> {
    let text = std::fs::read_to_string(fixture().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Asserts `a` holds exactly the values TF's reader gave for `name`.
fn assert_same(name: &str, a: &Array, e: &Json) {
    let dims: Vec<i64> = e["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect();
    assert_eq!(a.shape.dims.as_slice(), dims.as_slice(), "{name}");
    let values = e["values"].as_array().unwrap();
    assert_eq!(a.len(), values.len(), "{name}");
    for (i, v) in values.iter().enumerate() {
        match &a.data {
            ArrayData::F32(d) => assert_eq!(d[i], v.as_f64().unwrap() as f32, "{name}[{i}]"),
            ArrayData::S32(d) => assert_eq!(i64::from(d[i]), v.as_i64().unwrap(), "{name}[{i}]"),
            ArrayData::S64(d) => assert_eq!(d[i], v.as_i64().unwrap(), "{name}[{i}]"),
            ArrayData::F64(d) => assert_eq!(d[i], v.as_f64().unwrap(), "{name}[{i}]"),
            other => panic!("{name}: unexpected {:?}", other.element_type()),
        }
    }
}

#[test]
fn every_tensor_of_a_tf_checkpoint_reads_as_tf_reads_it() {
    let bundle = TfBundle::open(fixture().join("model.ckpt-7")).unwrap();
    let expected = expected();
    let names: Vec<&str> = bundle.names().collect();
    assert_eq!(
        names,
        expected.keys().map(String::as_str).collect::<Vec<_>>()
    );
    let mut read = 0;
    for (name, e) in &expected {
        let info = bundle.info(name).unwrap();
        assert_eq!(info.dtype, e["dtype"].as_str().unwrap(), "{name}");
        assert_same(name, &bundle.read(name).unwrap(), e);
        read += 1;
    }
    assert_eq!(read, expected.len());
    assert_eq!(
        bundle.read("global_step").unwrap().data,
        ArrayData::S64(vec![7])
    );
    assert!(matches!(
        bundle.read("nope"),
        Err(TfBundleError::NotFound { .. })
    ));
}

/// A copy of the fixture in a temporary directory, to damage.
fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(fixture()).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), dir.path().join(f.file_name())).unwrap();
    }
    dir
}

#[test]
fn a_damaged_index_is_a_crc_error_naming_the_file() {
    let dir = fixture_copy();
    let index = dir.path().join("model.ckpt-7.index");
    let clean = std::fs::read(&index).unwrap();
    // Flip a byte inside the first data block (its keys), then one in the footer's magic.
    let mut bad = clean.clone();
    bad[10] ^= 0x40;
    std::fs::write(&index, &bad).unwrap();
    let e = TfBundle::open(dir.path().join("model.ckpt-7"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("CRC32C mismatch") && e.contains(&index.display().to_string()),
        "{e}"
    );
    let mut bad = clean.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    std::fs::write(&index, &bad).unwrap();
    let e = TfBundle::open(dir.path().join("model.ckpt-7"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad magic number"), "{e}");
    // Every truncation is an error, never a panic.
    for len in 0..clean.len() {
        std::fs::write(&index, &clean[..len]).unwrap();
        assert!(
            TfBundle::open(dir.path().join("model.ckpt-7")).is_err(),
            "len {len}"
        );
    }
}

#[test]
fn a_damaged_data_shard_is_a_crc_error_naming_the_file_and_tensor() {
    let dir = fixture_copy();
    let data = dir.path().join("model.ckpt-7.data-00000-of-00001");
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[0] ^= 0x01;
    std::fs::write(&data, &bytes).unwrap();
    let bundle = TfBundle::open(dir.path().join("model.ckpt-7")).unwrap();
    let errors: Vec<String> = bundle
        .names()
        .filter(|n| *n != "extra/wide")
        .filter_map(|n| bundle.read(n).err().map(|e| e.to_string()))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("CRC32C mismatch") && errors[0].contains(&data.display().to_string()),
        "{}",
        errors[0]
    );
    // A shard cut short: the tensors past the cut say so.
    std::fs::write(&data, &bytes[..bytes.len() / 2]).unwrap();
    let short = bundle
        .names()
        .filter_map(|n| bundle.read(n).err())
        .map(|e| e.to_string());
    assert!(short.into_iter().any(|e| e.contains("run past the end")));
}

/// The tiny model's variables as its model_fn makes them, plus what an optimizer and a
/// non-trainable counter add.
fn variables(extra: &[(&str, &[i64], ElementType, bool)]) -> Vec<Variable> {
    let mut g = Graph::new("w", Mode::Train, Some(1));
    for (name, dims, ty, trainable) in [
        ("dense/kernel", &[3i64, 4][..], ElementType::F32, true),
        ("dense/bias", &[4], ElementType::F32, true),
        ("dense_1/kernel", &[4, 2], ElementType::F32, true),
        ("dense_1/bias", &[2], ElementType::F32, true),
        ("dense/kernel/Momentum", &[3, 4], ElementType::F32, false),
        ("extra/counter", &[2], ElementType::S32, false),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    {
        get_variable(&mut g, name, dims, ty, Initializer::Zeros, trainable).unwrap();
    }
    g.variables.all().map(|(_, v)| v.clone()).collect()
}

fn taken(vars: &[Variable], values: &[Option<Array>]) -> Vec<String> {
    vars.iter()
        .zip(values)
        .filter(|(_, a)| a.is_some())
        .map(|(v, _)| v.name.clone())
        .collect()
}

#[test]
fn warm_start_takes_trainable_variables_by_default_and_slots_when_asked() {
    let vars = variables(&[]);
    let expected = expected();
    // From the model_dir (its state file), the prefix, the .index and the .data file alike.
    for from in [
        fixture(),
        fixture().join("model.ckpt-7"),
        fixture().join("model.ckpt-7.index"),
        fixture().join("model.ckpt-7.data-00000-of-00001"),
    ] {
        let w = WarmStart::new(&from).load(&vars).unwrap();
        assert_eq!(w.source, fixture().join("model.ckpt-7"));
        assert_eq!(w.global_step, None);
        assert_eq!(
            taken(&vars, &w.values),
            [
                "dense/kernel",
                "dense/bias",
                "dense_1/kernel",
                "dense_1/bias"
            ]
        );
        for (v, a) in vars.iter().zip(&w.values) {
            if let Some(a) = a {
                assert_same(&v.name, a, &expected[&v.name]);
            }
        }
    }
    let w = WarmStart::new(fixture())
        .with_slots()
        .with_global_step()
        .load(&vars)
        .unwrap();
    assert_eq!(w.global_step, Some(7));
    assert_eq!(taken(&vars, &w.values).len(), 5);
    assert_same(
        "dense/kernel/Momentum",
        w.values[4].as_ref().unwrap(),
        &expected["dense/kernel/Momentum"],
    );
    let w = WarmStart::new(fixture())
        .all_variables()
        .load(&vars)
        .unwrap();
    assert_same(
        "extra/counter",
        w.values[5].as_ref().unwrap(),
        &expected["extra/counter"],
    );
}

#[test]
fn regex_matches_from_the_start_and_the_name_map_renames() {
    let vars = variables(&[("head/kernel", &[4, 2], ElementType::F32, true)]);
    let w = WarmStart::new(fixture())
        .vars_to_warm_start("dense/")
        .unwrap()
        .load(&vars)
        .unwrap();
    assert_eq!(taken(&vars, &w.values), ["dense/kernel", "dense/bias"]);
    // `ense` does not match from the start: nothing is taken (TF's re.match).
    let w = WarmStart::new(fixture())
        .vars_to_warm_start("ense")
        .unwrap()
        .load(&vars)
        .unwrap();
    assert!(taken(&vars, &w.values).is_empty());
    let w = WarmStart::new(fixture())
        .vars_to_warm_start("head")
        .unwrap()
        .rename("head/kernel", "dense_1/kernel")
        .load(&vars)
        .unwrap();
    assert_eq!(taken(&vars, &w.values), ["head/kernel"]);
    assert_same(
        "head/kernel",
        w.values[6].as_ref().unwrap(),
        &expected()["dense_1/kernel"],
    );
    assert!(matches!(
        WarmStart::new(fixture()).vars_to_warm_start("("),
        Err(WarmStartError::Regex { .. })
    ));
}

#[test]
fn every_mismatch_is_listed_and_nothing_is_loaded() {
    let vars = variables(&[
        ("head/kernel", &[4, 2], ElementType::F32, true),
        ("wrong/shape", &[3], ElementType::F32, true),
        ("typed", &[2], ElementType::F32, true),
    ]);
    let e = WarmStart::new(fixture())
        .rename("wrong/shape", "dense/bias")
        .rename("typed", "extra/counter")
        .rename("not/a/variable", "dense/bias")
        .load(&vars)
        .unwrap_err();
    let WarmStartError::Mismatch { mismatches, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(
        mismatches,
        &[
            "`head/kernel`: not in the checkpoint",
            "`wrong/shape` (as `dense/bias`): float32[4] in the checkpoint, f32[3] in the model",
            "`typed` (as `extra/counter`): int32[2] in the checkpoint, f32[2] in the model",
            "var_name_to_prev_var_name names `not/a/variable`, which is not a variable being warm-started",
        ],
        "{e}"
    );
    assert!(
        e.to_string().contains("4 mismatch(es), nothing was loaded"),
        "{e}"
    );
    let e = WarmStart::new(fixture().join("model.ckpt-8"))
        .load(&vars)
        .unwrap_err();
    assert!(e.to_string().contains("neither"), "{e}");
}

#[test]
fn a_tessel_checkpoint_is_a_source_too() {
    let dir = tempfile::tempdir().unwrap();
    let saver = Saver::new(dir.path(), 5);
    let vars = variables(&[]);
    let checkpoint = Checkpoint {
        global_step: 42,
        variables: vars
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let n: i64 = v.dims.iter().product();
                let data =
                    ArrayData::from_f64_fn(v.element_type, n as usize, |j| (i * 100 + j) as f64);
                (
                    v.name.clone(),
                    Array::new(ArrayShape::new(v.element_type, &v.dims), data),
                )
            })
            .collect(),
        input_state: vec![],
    };
    let file = saver.save(&checkpoint).unwrap();
    for from in [
        dir.path().to_path_buf(),
        file.clone(),
        dir.path().join("model.ckpt-42"),
    ] {
        let w = WarmStart::new(from).with_global_step().load(&vars).unwrap();
        assert_eq!(w.source, file);
        assert_eq!(w.global_step, Some(42));
        assert_eq!(w.values[2].as_ref(), Some(&checkpoint.variables[2].1));
        assert_eq!(taken(&vars, &w.values).len(), 4);
    }
}

/// The fixture's network, y = dense_1(relu(dense(x))), loss = mean(y²), as the fixture's TF
/// graph computes it.
fn tiny_model_fn(
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
        // A zero learning rate: the trained values stay the warm-started ones.
        spec.train_op = Some(GradientDescent::new(0.0f32).minimize(g, &loss)?);
    }
    Ok(spec)
}

#[test]
fn evaluate_with_an_empty_model_dir_uses_the_warm_started_tf_values() {
    let x = tiny_x();
    let e = expected();
    let f = |n: &str| -> Vec<f64> {
        e[n]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32 as f64)
            .collect()
    };
    let (k0, b0, k1, b1) = (
        f("dense/kernel"),
        f("dense/bias"),
        f("dense_1/kernel"),
        f("dense_1/bias"),
    );
    // The reference loss, in f64 from TF's values.
    let mut sum = 0.0;
    for row in x.chunks(3) {
        let h: Vec<f64> = (0..4)
            .map(|j| (b0[j] + (0..3).map(|i| row[i] as f64 * k0[i * 4 + j]).sum::<f64>()).max(0.0))
            .collect();
        for j in 0..2 {
            let y = b1[j] + (0..4).map(|i| h[i] * k1[i * 2 + j]).sum::<f64>();
            sum += y * y;
        }
    }
    let reference = sum / 16.0;
    let dir = tempfile::tempdir().unwrap();
    let config = RunConfig {
        model_dir: Some(dir.path().join("model")),
        ..RunConfig::default()
    };
    let estimator = TpuEstimator::new(
        tiny_model_fn,
        config,
        Params::new(),
        false,
        8,
        Some(8),
        None,
    )
    .unwrap()
    .quiet()
    .with_warm_start(WarmStart::new(fixture()));
    let input_fn = |p: &Params| -> Result<Input, EstimatorError> {
        let ds = Dataset::from_tensor_slices(vec![
            ("x".into(), Array::f32(&[8, 3], x.clone())),
            (
                "label".into(),
                Array::new(
                    ArrayShape::new(ElementType::S32, &[8]),
                    ArrayData::S32(vec![0; 8]),
                ),
            ),
        ])?;
        Ok(Input::new(ds.batch(p.batch_size() as u64, true)?, "label"))
    };
    let result = estimator.evaluate(input_fn, Some(1)).unwrap();
    // A checkpoint path in evaluate is a restore: the checkpoint's step, reported as one.
    assert_eq!(result.global_step, 7);
    let from = format!(
        "Restoring parameters from {}",
        fixture().join("model.ckpt-7").display()
    );
    assert!(
        result.log.iter().any(|l| l.contains(&from)),
        "{:?}",
        result.log
    );
    assert!(
        (result.loss - reference).abs() < 1e-5 * reference.max(1.0),
        "{} vs {reference}",
        result.loss
    );
    // Without the warm start, the initializers give another loss.
    let config = RunConfig {
        model_dir: Some(dir.path().join("cold")),
        tf_random_seed: Some(3),
        ..RunConfig::default()
    };
    let cold = TpuEstimator::new(
        tiny_model_fn,
        config,
        Params::new(),
        false,
        8,
        Some(8),
        None,
    )
    .unwrap()
    .quiet();
    let cold = cold.evaluate(input_fn, Some(1)).unwrap();
    assert!((cold.loss - reference).abs() > 1e-3, "{}", cold.loss);
}

fn tiny_x() -> Vec<f32> {
    (0..8 * 3)
        .map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.0)
        .collect()
}

fn tiny_input_fn(p: &Params) -> Result<Input, EstimatorError> {
    let ds = Dataset::from_tensor_slices(vec![
        ("x".into(), Array::f32(&[8, 3], tiny_x())),
        (
            "label".into(),
            Array::new(
                ArrayShape::new(ElementType::S32, &[8]),
                ArrayData::S32(vec![0; 8]),
            ),
        ),
    ])?;
    Ok(Input::new(
        ds.repeat(None).batch(p.batch_size() as u64, true)?,
        "label",
    ))
}

#[test]
fn training_starts_from_the_warm_start_and_a_checkpoint_then_wins() {
    let dir = tempfile::tempdir().unwrap();
    let config = || RunConfig {
        model_dir: Some(dir.path().to_path_buf()),
        ..RunConfig::default()
    };
    let estimator = TpuEstimator::new(
        tiny_model_fn,
        config(),
        Params::new(),
        false,
        8,
        Some(8),
        None,
    )
    .unwrap()
    .quiet()
    .with_warm_start(WarmStart::new(fixture()).with_global_step());
    // The global step is taken too: from 7, max_steps 9 runs two steps.
    estimator.train(tiny_input_fn, None, Some(9)).unwrap();
    let saved = Saver::new(dir.path(), 5).restore_latest().unwrap().unwrap();
    assert_eq!(saved.global_step, 9);
    let e = expected();
    for name in [
        "dense/kernel",
        "dense/bias",
        "dense_1/kernel",
        "dense_1/bias",
    ] {
        let (_, a) = saved.variables.iter().find(|(n, _)| n == name).unwrap();
        assert_same(name, a, &e[name]);
    }
    // The model_dir has a checkpoint now: a warm start (from a source whose names do not
    // even match) is ignored, as TF ignores warm_start_from then.
    let again = TpuEstimator::new(
        tiny_model_fn,
        config(),
        Params::new(),
        false,
        8,
        Some(8),
        None,
    )
    .unwrap()
    .quiet()
    .with_warm_start(WarmStart::new(fixture()).rename("x", "y"));
    assert_eq!(
        again.evaluate(tiny_input_fn, Some(1)).unwrap().global_step,
        9
    );
}
