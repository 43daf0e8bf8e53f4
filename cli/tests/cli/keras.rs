//! `tessel keras` end to end on the MNIST-like CNN of the Keras fixtures (a Keras 3 `.keras`
//! file): summary, train on two shards with evaluation, predict, export, and errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tessel_runtime::host_io::read_safetensors;

pub(crate) fn model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../estimator/tests/fixtures/keras/mnist_cnn/keras3.keras")
}

pub(crate) fn tessel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(args)
        .output()
        .expect("runs")
}

/// An `.npy` of f32 values.
fn npy(dims: &[usize], values: &[f32]) -> Vec<u8> {
    let shape: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        shape.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((header.len() as u16).to_le_bytes());
    b.extend(header.as_bytes());
    b.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    b
}

/// A stored (uncompressed) zip of `.npy` members, as `np.savez` writes one.
fn write_npz(path: &Path, members: &[(&str, Vec<u8>)]) {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for (name, data) in members {
        let name = format!("{name}.npy");
        let offset = out.len() as u32;
        let crc = crc32(data);
        let mut local = vec![0x50, 0x4b, 0x03, 0x04, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        local.extend(crc.to_le_bytes());
        local.extend((data.len() as u32).to_le_bytes());
        local.extend((data.len() as u32).to_le_bytes());
        local.extend((name.len() as u16).to_le_bytes());
        local.extend(0u16.to_le_bytes());
        out.extend(&local);
        out.extend(name.as_bytes());
        out.extend(data);
        let mut c = vec![0x50, 0x4b, 0x01, 0x02, 20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        c.extend(crc.to_le_bytes());
        c.extend((data.len() as u32).to_le_bytes());
        c.extend((data.len() as u32).to_le_bytes());
        c.extend((name.len() as u16).to_le_bytes());
        c.extend([0u8; 12]);
        c.extend(offset.to_le_bytes());
        c.extend(name.as_bytes());
        central.extend(c);
    }
    let start = out.len() as u32;
    out.extend(&central);
    let mut end = vec![0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0];
    end.extend((members.len() as u16).to_le_bytes());
    end.extend((members.len() as u16).to_le_bytes());
    end.extend((central.len() as u32).to_le_bytes());
    end.extend(start.to_le_bytes());
    end.extend(0u16.to_le_bytes());
    out.extend(end);
    std::fs::write(path, out).unwrap();
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// 32 images of 12x12x1 and one-hot targets keyed `x` / `y`; the first 10 images keyed
/// by the input's name.
fn data(dir: &Path) -> (PathBuf, PathBuf) {
    let n = 32;
    let x: Vec<f32> = (0..n * 144)
        .map(|i| ((i * 37 % 101) as f32) / 101.0)
        .collect();
    let y: Vec<f32> = (0..n * 10)
        .map(|i| ((i / 10) % 10 == i % 10) as u8 as f32)
        .collect();
    let train = dir.join("train.npz");
    write_npz(
        &train,
        &[("x", npy(&[n, 12, 12, 1], &x)), ("y", npy(&[n, 10], &y))],
    );
    let pred = dir.join("x.npz");
    write_npz(&pred, &[("image", npy(&[10, 12, 12, 1], &x[..10 * 144]))]);
    (train, pred)
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn train_evaluate_predict_export_on_two_shards() {
    let dir = tempfile::tempdir().unwrap();
    let (train, x) = data(dir.path());
    let md = dir.path().join("md");
    let m = model();
    let (m, md, train, x) = (
        m.to_str().unwrap(),
        md.to_str().unwrap(),
        train.to_str().unwrap(),
        x.to_str().unwrap(),
    );
    let o = tessel(&[
        "keras",
        "train",
        m,
        "--data",
        train,
        "--eval-data",
        train,
        "--batch-size",
        "8",
        "--steps",
        "6",
        "--model-dir",
        md,
        "--num-shards",
        "2",
        "--iterations",
        "3",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("trained to step 6"), "{out}");
    assert!(
        out.contains("examples = 32") && out.contains("accuracy = "),
        "{out}"
    );
    assert!(Path::new(md).join("model.ckpt-6.safetensors").is_file());
    let y = dir.path().join("y.safetensors");
    let o = tessel(&[
        "keras",
        "predict",
        m,
        "--data",
        x,
        "--outputs",
        y.to_str().unwrap(),
        "--model-dir",
        md,
        "--batch-size",
        "4",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let outputs = read_safetensors(&y).unwrap();
    assert_eq!(outputs[0].0, "logits");
    assert_eq!(outputs[0].1.shape.dims.to_vec(), vec![10, 10]);
    let export = dir.path().join("export");
    let o = tessel(&[
        "keras",
        "export",
        m,
        "--model-dir",
        md,
        "--export-dir",
        export.to_str().unwrap(),
        "--batch-size",
        "4",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&export).unwrap().count(), 1);
}

#[test]
fn summary_and_errors() {
    let m = model();
    let o = tessel(&["keras", "summary", m.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("Total params: 832") && out.contains("conv1 (Conv2D)"),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.keras");
    std::fs::write(&bad, b"not a model").unwrap();
    let o = tessel(&["keras", "summary", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let npz = dir.path().join("bad.npz");
    std::fs::write(&npz, b"PK\x03\x04 truncated").unwrap();
    let o = tessel(&[
        "keras",
        "evaluate",
        m.to_str().unwrap(),
        "--data",
        npz.to_str().unwrap(),
        "--model-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("bad.npz"), "{}", text(&o));
}
