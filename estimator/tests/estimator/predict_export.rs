//! `predict` and `export` on a tiny model (dense 4 → 3) trained a few steps on synthetic data:
//! predictions in input order against the host's own arithmetic on the checkpoint, the padded
//! rows of a short last batch stripped, shards, an early drop, the export's files and its
//! round trip through `ExportedModel` (on any number of rows), and an export that fails
//! leaving nothing behind.

use std::time::{Duration, Instant};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_compiler::trace::Tensor;
use tessel_estimator::checkpoint::read_checkpoint;
use tessel_estimator::estimator::{ExportedModel, Features, ServingInput, Signature};
use tessel_estimator::input::Dataset;
use tessel_estimator::model::layers::{dense, Dense};
use tessel_estimator::model::optimizers::GradientDescent;
use tessel_estimator::model::{CrossShardOptimizer, Optimizer};
use tessel_estimator::{
    EstimatorError, Graph, Input, Mode, Params, RunConfig, TpuConfig, TpuEstimator,
    TpuEstimatorSpec,
};

const N: usize = 37; // not a multiple of any batch below

fn model_fn(
    g: &mut Graph,
    features: &Features,
    labels: Option<&Tensor>,
    mode: Mode,
    params: &Params,
) -> Result<TpuEstimatorSpec, EstimatorError> {
    let logits = dense(g, &features["x"], 3, Dense::default())?;
    let mut spec = TpuEstimatorSpec::new(mode);
    if mode == Mode::Predict {
        spec.predictions = vec![
            ("classes".into(), logits.argmax(1)),
            ("probabilities".into(), logits.softmax(1)),
        ];
        // A value a TPU has no type for, for the export's legality check.
        let wide = params.get("f64_logits").is_some();
        spec.predictions.push((
            "logits".into(),
            if wide {
                logits.cast(ElementType::F64)
            } else {
                logits
            },
        ));
        return Ok(spec);
    }
    let labels = labels.expect("labels in TRAIN");
    let loss = logits
        .softmax_cross_entropy_with_logits(&labels.one_hot(3, ElementType::F32))
        .reduce_mean(&[], false);
    spec.loss = Some(loss.clone());
    spec.train_op = Some(CrossShardOptimizer::new(GradientDescent::new(0.5)).minimize(g, &loss)?);
    Ok(spec)
}

/// `x[i] = ((i * 7 + j * 3) % 11) / 5 - 1`, label `i % 3`.
fn data(n: usize) -> (Array, Array) {
    let x: Vec<f32> = (0..n * 4)
        .map(|k| ((k / 4 * 7 + k % 4 * 3) % 11) as f32 / 5.0 - 1.0)
        .collect();
    let y: Vec<i32> = (0..n).map(|i| (i % 3) as i32).collect();
    (
        Array::new(
            ArrayShape::new(ElementType::F32, &[n as i64, 4]),
            ArrayData::F32(x),
        ),
        Array::new(
            ArrayShape::new(ElementType::S32, &[n as i64]),
            ArrayData::S32(y),
        ),
    )
}

fn estimator(dir: &std::path::Path, shards: usize, ipl: u64, batch: usize) -> TpuEstimator {
    let config = RunConfig {
        model_dir: Some(dir.to_path_buf()),
        tf_random_seed: Some(7),
        tpu_config: TpuConfig {
            iterations_per_loop: ipl,
            num_shards: Some(shards),
            ..TpuConfig::default()
        },
        ..RunConfig::default()
    };
    TpuEstimator::new(
        model_fn,
        config,
        Params::new(),
        true,
        8 * shards,
        None,
        Some(batch),
    )
    .expect("estimator")
    .quiet()
}

fn train(dir: &std::path::Path) {
    let est = estimator(dir, 1, 5, 8);
    est.train(
        |p: &Params| {
            let (x, y) = data(N);
            let ds = Dataset::from_tensor_slices(vec![("x".into(), x), ("y".into(), y)])?
                .repeat(None)
                .batch(p.batch_size() as u64, true)?;
            Ok(Input::new(ds, "y"))
        },
        None,
        Some(10),
    )
    .expect("trains");
}

fn predict_input(n: usize) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |p: &Params| {
        let (x, _) = data(n);
        let ds = Dataset::from_tensor_slices(vec![("x".into(), x)])?
            .batch(p.batch_size() as u64, false)?;
        Ok(Input::features_only(ds))
    }
}

/// The host's logits for row `i` from the checkpoint's `dense/kernel` and `dense/bias`.
fn host_logits(dir: &std::path::Path, n: usize) -> Vec<[f64; 3]> {
    let state = std::fs::read_to_string(dir.join("checkpoint")).unwrap();
    let name = state
        .lines()
        .next()
        .unwrap()
        .split('"')
        .nth(1)
        .unwrap()
        .to_string();
    let ckpt = read_checkpoint(&dir.join(format!("{name}.safetensors"))).unwrap();
    let get = |n: &str| {
        ckpt.variables
            .iter()
            .find(|(k, _)| k == n)
            .unwrap()
            .1
            .clone()
    };
    let (w, b) = (get("dense/kernel"), get("dense/bias"));
    let (x, _) = data(n);
    (0..n)
        .map(|i| {
            let mut out = [0.0; 3];
            for (c, o) in out.iter_mut().enumerate() {
                *o = b.data.get_f64(c)
                    + (0..4)
                        .map(|j| x.data.get_f64(i * 4 + j) * w.data.get_f64(j * 3 + c))
                        .sum::<f64>();
            }
            out
        })
        .collect()
}

fn f(a: &Array) -> Vec<f64> {
    (0..a.len()).map(|i| a.data.get_f64(i)).collect()
}

fn check_predictions(dir: &std::path::Path, shards: usize, ipl: u64, batch: usize) {
    let est = estimator(dir, shards, ipl, batch);
    let got: Vec<_> = est
        .predict(predict_input(N), None)
        .expect("predict")
        .collect::<Result<Vec<_>, _>>()
        .expect("every prediction");
    assert_eq!(got.len(), N, "one prediction per example, padding stripped");
    let expected = host_logits(dir, N);
    for (i, (p, e)) in got.iter().zip(&expected).enumerate() {
        let logits = f(&p["logits"]);
        assert_eq!(p["logits"].shape.dims.as_slice(), &[3]);
        for c in 0..3 {
            assert!(
                (logits[c] - e[c]).abs() < 1e-5,
                "row {i}: {logits:?} vs {e:?}"
            );
        }
        let argmax = (0..3).max_by(|&a, &b| e[a].total_cmp(&e[b])).unwrap();
        assert_eq!(p["classes"].data.get_f64(0) as usize, argmax, "row {i}");
        let probs = f(&p["probabilities"]);
        assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-5);
    }
}

#[test]
fn predict_rows_in_input_order_with_padding_stripped() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path());
    // 37 = 4 loops of 2 batches of 5, the last loop with one short batch.
    check_predictions(dir.path(), 1, 2, 5);
    // Two shards, per-shard batch 4: 10 batches, the last loop leaves shard 1 idle.
    check_predictions(dir.path(), 2, 3, 8);
    // predict_keys selects.
    let est = estimator(dir.path(), 1, 4, 8);
    let first = est
        .predict(predict_input(N), Some(&["classes"]))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(first.keys().collect::<Vec<_>>(), vec!["classes"]);
    let e = est
        .predict(predict_input(N), Some(&["nope"]))
        .err()
        .unwrap();
    assert!(e.to_string().contains("\"nope\""), "{e}");
    let e = est.predict(predict_input(N), Some(&[])).err().unwrap();
    assert!(e.to_string().contains("at least one output"), "{e}");
}

#[test]
fn dropping_the_iterator_early_stops_the_producer() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path());
    let est = estimator(dir.path(), 1, 2, 4);
    // An endless input: the producer could run forever if drop did not stop it.
    let endless = |p: &Params| {
        let (x, _) = data(N);
        let ds = Dataset::from_tensor_slices(vec![("x".into(), x)])?
            .repeat(None)
            .batch(p.batch_size() as u64, false)?;
        Ok(Input::features_only(ds))
    };
    let mut it = est.predict(endless, None).unwrap();
    let taken: Vec<_> = it.by_ref().take(3).collect();
    assert_eq!(taken.len(), 3);
    let start = Instant::now();
    drop(it);
    assert!(start.elapsed() < Duration::from_secs(10), "drop returned");
    // Dropped before the first value, too.
    drop(est.predict(endless, None).unwrap());
}

#[test]
fn export_round_trip_and_signature() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("export");
    let est = estimator(&dir.path().join("model"), 1, 2, 8);
    let serving = ServingInput::new().feature("x", ElementType::F32, &[4]);
    // No checkpoint: TF's error, and no directory left behind.
    let e = est.export(&base, &serving).unwrap_err();
    assert!(e.to_string().contains("Couldn't find trained model"), "{e}");
    train(&dir.path().join("model"));
    let path = est.export(&base, &serving).expect("exports");
    let entries: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries.len(), 1, "only the export: {entries:?}");
    assert!(path
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .parse::<u64>()
        .is_ok());

    let sig = Signature::from_json(&std::fs::read_to_string(path.join("signature.json")).unwrap())
        .unwrap();
    assert_eq!(sig.batch_size, 8);
    let params: Vec<_> = sig
        .parameters
        .iter()
        .map(|p| {
            (
                p.number,
                p.kind.as_str(),
                p.name.as_str(),
                p.shape.clone(),
                p.dtype,
            )
        })
        .collect();
    assert_eq!(
        params,
        vec![
            (0, "variable", "global_step", vec![], ElementType::S32),
            (1, "input", "x", vec![8, 4], ElementType::F32),
            (2, "variable", "dense/kernel", vec![4, 3], ElementType::F32),
            (3, "variable", "dense/bias", vec![3], ElementType::F32),
        ]
    );
    let outputs: Vec<_> = sig
        .outputs
        .iter()
        .map(|o| (o.index, o.name.as_str(), o.shape.clone(), o.dtype))
        .collect();
    assert_eq!(
        outputs,
        vec![
            (0, "classes", vec![8], ElementType::S32),
            (1, "probabilities", vec![8, 3], ElementType::F32),
            (2, "logits", vec![8, 3], ElementType::F32),
        ]
    );
    let text = std::fs::read_to_string(path.join("model.hlo")).unwrap();
    assert!(
        text.starts_with("HloModule "),
        "{}",
        &text[..40.min(text.len())]
    );

    // The export on the first 8 rows equals predict().
    let model = ExportedModel::load(&path).expect("loads");
    let (x, _) = data(8);
    let out = model.run(&[("x".into(), x.clone())]).expect("runs");
    let preds: Vec<_> = est
        .predict(predict_input(8), None)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    for (name, a) in &out {
        for (i, p) in preds.iter().enumerate() {
            let row = f(&p[name.as_str()]);
            let n = row.len();
            let got = &f(a)[i * n..(i + 1) * n];
            for (u, v) in got.iter().zip(&row) {
                assert!((u - v).abs() < 1e-6, "{name} row {i}: {got:?} vs {row:?}");
            }
        }
    }
    // `run` takes the export's batch; a short one is refused, pointing at `predict`.
    let (short, _) = data(5);
    let e = model.run(&[("x".into(), short)]).unwrap_err();
    assert!(
        e.to_string().contains("predict takes any number of rows"),
        "{e}"
    );
    let e = model
        .run(&[("x".into(), x.clone()), ("y".into(), x)])
        .unwrap_err();
    assert!(e.to_string().contains("no input `y`"), "{e}");

    // A failing export (a serving input the model_fn cannot take) leaves nothing behind
    // (a failure while writing is `export.rs`'s unit test).
    let bad = ServingInput::new().feature("x", ElementType::F32, &[5]);
    assert!(est.export(&base, &bad).is_err());
    let entries: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries.len(), 1, "failed exports left {entries:?}");
}

#[test]
fn an_input_error_mid_stream_ends_the_iteration_with_it() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path());
    let est = estimator(dir.path(), 1, 2, 4);
    let failing = |p: &Params| {
        let (x, _) = data(N);
        let ids = Array::new(
            ArrayShape::new(ElementType::S32, &[N as i64]),
            ArrayData::S32((0..N as i32).collect()),
        );
        let ds = Dataset::from_tensor_slices(vec![("x".into(), x), ("id".into(), ids)])?
            .map(
                |s| Ok(s.clone()),
                1,
                |e: tessel_estimator::input::Element| match &e.values[1] {
                    tessel_estimator::input::Value::Dense(a) if a.data.get_f64(0) == 21.0 => {
                        Err(tessel_estimator::input::DatasetError::Function {
                            op: "map",
                            index: 21,
                            message: "corrupt record".into(),
                        })
                    }
                    _ => Ok(e),
                },
            )?
            .batch(p.batch_size() as u64, false)?;
        Ok(Input::features_only(ds))
    };
    let results: Vec<_> = est.predict(failing, None).unwrap().collect();
    // Two loops of 2 batches of 4 come back (16 rows), then the error; nothing after it.
    let ok = results.iter().take_while(|r| r.is_ok()).count();
    assert_eq!(ok, 16);
    assert_eq!(results.len(), 17);
    let e = results[16].as_ref().unwrap_err().to_string();
    assert!(e.contains("corrupt record"), "{e}");
}

#[test]
fn a_panicking_map_function_is_an_error_not_an_early_end() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path());
    let est = estimator(dir.path(), 1, 2, 4);
    let panicking = |p: &Params| {
        let (x, _) = data(N);
        let ds = Dataset::from_tensor_slices(vec![("x".into(), x)])?
            .map(
                |s| Ok(s.clone()),
                1,
                |e: tessel_estimator::input::Element| {
                    // The 31st element's map call panics (on the reader thread).
                    static SEEN: std::sync::atomic::AtomicUsize =
                        std::sync::atomic::AtomicUsize::new(0);
                    if SEEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 30 {
                        panic!("a map function panicked");
                    }
                    Ok(e)
                },
            )?
            .batch(p.batch_size() as u64, false)?;
        Ok(Input::features_only(ds))
    };
    let results: Vec<_> = est.predict(panicking, None).unwrap().collect();
    let last = results.last().unwrap();
    let e = last.as_ref().unwrap_err().to_string();
    assert!(e.contains("a map function panicked"), "{e}");
    assert!(results.len() < N, "not every row came back");
}

#[test]
fn an_export_predicts_any_number_of_rows_as_predict_does() {
    let dir = tempfile::tempdir().unwrap();
    train(&dir.path().join("model"));
    let est = estimator(&dir.path().join("model"), 1, 2, 8);
    let serving = ServingInput::new().feature("x", ElementType::F32, &[4]);
    let model = ExportedModel::load(est.export(dir.path().join("export"), &serving).unwrap())
        .expect("loads");
    // 1, batch - 1, batch + 1 and 3 * batch + 5 rows (batch 8), and none.
    for rows in [1, 7, 9, 29, 0] {
        let (x, _) = data(rows);
        let out = model.predict(&[("x".into(), x)]).expect("predicts");
        let preds: Vec<_> = est
            .predict(predict_input(rows), None)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        assert_eq!(preds.len(), rows);
        let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["classes", "probabilities", "logits"]);
        for (name, a) in &out {
            assert_eq!(a.shape.dims[0], rows as i64, "{name}");
            let width = if name == "classes" { 1 } else { 3 };
            assert_eq!(a.len(), rows * width, "{name}");
            let got = f(a);
            for (i, p) in preds.iter().enumerate() {
                let want = f(&p[name.as_str()]);
                for (k, v) in want.iter().enumerate() {
                    let u = got[i * width + k];
                    assert!(
                        (u - v).abs() < 1e-6,
                        "{rows} rows: {name}[{i}][{k}] {u} vs {v}"
                    );
                }
            }
        }
    }
    // Features of different lengths, and rows of the wrong width, are errors naming them.
    let model_err = |x: Array| model.predict(&[("x".into(), x)]).unwrap_err().to_string();
    let wide = Array::new(
        ArrayShape::new(ElementType::F32, &[2, 5]),
        ArrayData::F32(vec![0.0; 10]),
    );
    let e = model_err(wide);
    assert!(
        e.contains("`x` is f32[2,5], but the export takes f32[N,4]"),
        "{e}"
    );
    let e = model
        .predict(&[("x".into(), data(3).0), ("y".into(), data(3).0)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no input `y`"), "{e}");

    // With two features, their numbers of rows must agree.
    let two = ServingInput::new()
        .feature("x", ElementType::F32, &[4])
        .feature("w", ElementType::F32, &[2]);
    let model =
        ExportedModel::load(est.export(dir.path().join("export2"), &two).unwrap()).expect("loads");
    let w = Array::new(
        ArrayShape::new(ElementType::F32, &[6, 2]),
        ArrayData::F32(vec![0.0; 12]),
    );
    let e = model
        .predict(&[("x".into(), data(5).0), ("w".into(), w)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("different numbers of rows: `x` has 5, `w` has 6"),
        "{e}"
    );
}

/// Export compiles through the session: a PREDICT module the device cannot run (a 64-bit
/// value) is refused with the legality check's words, as train and predict refuse it.
#[test]
fn export_refuses_what_the_device_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("model");
    train(&model_dir);
    let config = RunConfig {
        model_dir: Some(model_dir),
        tf_random_seed: Some(7),
        ..RunConfig::default()
    };
    let est = TpuEstimator::new(
        model_fn,
        config,
        Params::new().with("f64_logits", 1),
        true,
        8,
        None,
        Some(8),
    )
    .unwrap()
    .quiet();
    let serving = ServingInput::new().feature("x", ElementType::F32, &[4]);
    let base = dir.path().join("export");
    let e = est.export(&base, &serving).unwrap_err().to_string();
    assert!(
        e.starts_with("export: the PREDICT module cannot run on the device: "),
        "{e}"
    );
    assert!(e.contains("f64"), "{e}");
    assert!(!base.exists() || std::fs::read_dir(&base).unwrap().next().is_none());
}
