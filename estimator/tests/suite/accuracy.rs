//! The bench's accuracy runs (`models_bench --accuracy`): the real data's preprocessing, which
//! must match the TF twins' (`tests/benches/tf/models.py`), and a run that learns.

use super::models::models_bench;
use clap::Parser;
use models_bench::models::real_data;
use std::path::Path;
use tessel_compiler::ir::ArrayData;
use tessel_estimator::input::Value;

/// An IDX file of u8 (`0x08`) or big-endian s32 (`0x0C`) values.
fn write_idx(path: &Path, dims: &[u32], values: &[i32], s32: bool) {
    let mut bytes = vec![0, 0, if s32 { 0x0C } else { 0x08 }, dims.len() as u8];
    for d in dims {
        bytes.extend_from_slice(&d.to_be_bytes());
    }
    for &v in values {
        if s32 {
            bytes.extend_from_slice(&v.to_be_bytes());
        } else {
            bytes.push(v as u8);
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// `n` 28x28 images whose label `i % 10` is written as a bright 2x2 block at row 2 * label,
/// as both splits of an image directory.
fn image_dir(dir: &Path, n: u32) {
    let mut pixels = vec![0i32; (n * 28 * 28) as usize];
    let labels: Vec<i32> = (0..n as i32).map(|i| i % 10).collect();
    for (i, &label) in labels.iter().enumerate() {
        for y in 0..2 {
            for x in 0..2 {
                let row = 2 * label as usize + y;
                pixels[i * 784 + row * 28 + 10 + x] = 255;
            }
        }
        pixels[i * 784] = 51; // top-left pixel 0.2
    }
    for split in ["train", "t10k"] {
        write_idx(
            &dir.join(format!("{split}-images-idx3-ubyte")),
            &[n, 28, 28],
            &pixels,
            false,
        );
        write_idx(
            &dir.join(format!("{split}-labels-idx1-ubyte")),
            &[n],
            &labels,
            false,
        );
    }
}

fn first_features(model: &str, dir: &Path) -> (Vec<i64>, Vec<f32>, i32) {
    let ds = real_data::split(model, dir, true).unwrap();
    let element = ds.iter().next().unwrap().unwrap();
    let (Value::Dense(x), Value::Dense(y)) = (&element.values[0], &element.values[1]) else {
        panic!("dense features and label expected")
    };
    let ArrayData::F32(v) = &x.data else {
        panic!("f32 features expected, got {:?}", x.data.element_type())
    };
    let ArrayData::S32(label) = &y.data else {
        panic!("s32 label expected")
    };
    (x.shape.dims.as_slice().to_vec(), v.clone(), label[0])
}

#[test]
fn images_are_preprocessed_as_the_tf_twins() {
    let dir = tempfile::tempdir().unwrap();
    image_dir(dir.path(), 3);
    let (dims, v, label) = first_features("mlp", dir.path());
    assert_eq!((dims, label), (vec![784], 0));
    assert!((v[0] - 0.2).abs() < 1e-7 && v[10] == 1.0 && v[9] == 0.0);
    let (dims, v, _) = first_features("fashion", dir.path());
    assert_eq!(dims, vec![28, 28, 1]);
    assert!((v[0] - 0.2).abs() < 1e-7);
    // resnet20: 2 black pixels of padding on each side, x / 255 - 0.5, 3 equal channels.
    let (dims, v, _) = first_features("resnet20", dir.path());
    assert_eq!(dims, vec![32, 32, 3]);
    let at = |y: usize, x: usize, c: usize| v[(y * 32 + x) * 3 + c];
    assert_eq!(at(0, 0, 0), -0.5);
    assert_eq!(at(31, 31, 2), -0.5);
    assert!((at(2, 2, 0) - (0.2 - 0.5)).abs() < 1e-6, "{}", at(2, 2, 0));
    assert_eq!(at(2, 12, 0), 0.5);
    assert_eq!(at(2, 12, 1), 0.5);
    assert_eq!(at(2, 12, 2), 0.5);
    assert_eq!(at(2, 11, 0), -0.5);
}

#[test]
fn missing_files_are_an_error_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let e = real_data::split("fashion", dir.path(), true)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("train-images-idx3-ubyte"), "{e}");
    let e = real_data::split("textcnn", dir.path(), false)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("t10k-ids-idx2-int"), "{e}");
}

fn accuracy(args: &[&str]) -> models_bench::Accuracy {
    let mut all = vec!["models_bench", "--accuracy"];
    all.extend_from_slice(args);
    models_bench::run_accuracy(&models_bench::Flags::parse_from(all)).unwrap()
}

/// The label is in the image, so a few steps learn it: an accuracy near 1 shows the
/// features, the labels and the evaluation's padded last batch line up.
#[test]
fn a_run_learns_a_separable_set() {
    let dir = tempfile::tempdir().unwrap();
    image_dir(dir.path(), 50);
    let d = dir.path().to_str().unwrap();
    let a = accuracy(&[
        "--model",
        "mlp",
        "--data-dir",
        d,
        "--steps",
        "60",
        "--iterations",
        "20",
        "--batch",
        "16",
        "--random-seed",
        "3",
    ]);
    assert_eq!(a.steps, 60);
    assert!(a.accuracy >= 0.9, "accuracy {}", a.accuracy);
}

/// The text task's s32 files: a keyword per class, so the text CNN learns it too.
#[test]
fn the_text_cnn_reads_s32_ids() {
    let dir = tempfile::tempdir().unwrap();
    let n = 40u32;
    let labels: Vec<i32> = (0..n as i32).map(|i| i % 10).collect();
    let mut ids = vec![0i32; (n * 200) as usize];
    for (i, &label) in labels.iter().enumerate() {
        for (t, id) in ids[i * 200..(i + 1) * 200].iter_mut().enumerate() {
            *id = 500 + ((i * 7919 + t * 104729) % 19500) as i32;
        }
        ids[i * 200 + (i * 37) % 196] = 100 + label;
    }
    for split in ["train", "t10k"] {
        let p = |kind: &str| dir.path().join(format!("{split}-{kind}"));
        write_idx(&p("ids-idx2-int"), &[n, 200], &ids, true);
        write_idx(&p("labels-idx1-int"), &[n], &labels, true);
    }
    let d = dir.path().to_str().unwrap();
    let a = accuracy(&[
        "--model",
        "textcnn",
        "--data-dir",
        d,
        "--steps",
        "40",
        "--iterations",
        "20",
        "--batch",
        "8",
        "--random-seed",
        "5",
    ]);
    assert_eq!(a.steps, 40);
    assert!(a.accuracy > 0.5, "accuracy {}", a.accuracy);
}
