//! `tessel data`: convert-mnist on small IDX files, inspect's output, and a corrupt file
//! exiting 1 with the file, the record and the byte offset.

use crate::common::succeeded;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

fn tessel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(args)
        .output()
        .unwrap()
}

/// An IDX file of u8 values, gzip-compressed when `gz`.
fn idx(path: &Path, dims: &[u32], values: &[u8], gz: bool) {
    let mut b = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        b.extend(d.to_be_bytes());
    }
    b.extend(values);
    if gz {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&b).unwrap();
        b = e.finish().unwrap();
    }
    std::fs::write(path, b).unwrap();
}

fn mnist_dir(dir: &Path) {
    let pixels: Vec<u8> = (0..3 * 784).map(|i| (i % 251) as u8).collect();
    idx(
        &dir.join("train-images-idx3-ubyte.gz"),
        &[3, 28, 28],
        &pixels,
        true,
    );
    idx(
        &dir.join("train-labels-idx1-ubyte.gz"),
        &[3],
        &[5, 0, 4],
        true,
    );
    idx(
        &dir.join("t10k-images-idx3-ubyte"),
        &[2, 28, 28],
        &pixels[..2 * 784],
        false,
    );
    idx(&dir.join("t10k-labels-idx1-ubyte"), &[2], &[7, 2], false);
}

#[test]
fn convert_mnist_then_inspect() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    mnist_dir(dir.path());
    let out = tessel(&[
        "data",
        "convert-mnist",
        dir.path().to_str().unwrap(),
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let train = out_dir.join("train.tfrecords");
    let test = out_dir.join("test.tfrecords");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "wrote {} (3 records)\nwrote {} (2 records)\n",
            train.display(),
            test.display()
        )
    );
    let out = tessel(&[
        "data",
        "inspect",
        train.to_str().unwrap(),
        test.to_str().unwrap(),
        "--limit",
        "4",
    ]);
    let text = succeeded(&out);
    let second = 12 + 875 + 4; // header, Example bytes, footer
    let expected_first = format!(
        "records: 5\nexample 0 ({}: record 0 (byte 0)):\n  depth: int64_list[1] 1\n  height: int64_list[1] 28\n  \
         image_raw: bytes_list[1] <784 bytes: 00 01 02 03 04 05 06 07 ...>\n  label: int64_list[1] 5\n  \
         width: int64_list[1] 28\nexample 1 ({}: record 1 (byte {second})):\n",
        train.display(),
        train.display()
    );
    assert!(text.starts_with(&expected_first), "{text}");
    assert!(
        text.contains(&format!(
            "example 3 ({}: record 0 (byte 0)):",
            test.display()
        )),
        "{text}"
    );
    assert!(text.contains("label: int64_list[1] 7"), "{text}");
    assert!(!text.contains("example 4"), "{text}");
}

#[test]
fn inspect_a_corrupt_file_exits_1_naming_file_record_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    mnist_dir(dir.path());
    let out_dir = dir.path().join("out");
    let out = tessel(&[
        "data",
        "convert-mnist",
        dir.path().to_str().unwrap(),
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let test = out_dir.join("test.tfrecords");
    let mut bytes = std::fs::read(&test).unwrap();
    bytes[891 + 100] ^= 1; // inside record 1's data
    std::fs::write(&test, bytes).unwrap();
    let out = tessel(&["data", "inspect", test.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "error: {}: record 1 at byte 891: corrupt data: the CRC of 875 bytes does not match\n",
            test.display()
        )
    );
}

#[test]
fn convert_mnist_with_a_bad_idx_file_says_which() {
    let dir = tempfile::tempdir().unwrap();
    mnist_dir(dir.path());
    let labels = dir.path().join("t10k-labels-idx1-ubyte");
    std::fs::write(&labels, b"PK\x03\x04").unwrap();
    let out = tessel(&[
        "data",
        "convert-mnist",
        dir.path().to_str().unwrap(),
        dir.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "error: {}: not an IDX file: the magic starts 50 4b, not 00 00\n",
            labels.display()
        )
    );
}
