//! Corrupt, truncated and foreign files: errors that name the file, the byte and what was
//! expected there, never a panic.

use crate::fixtures::{h5py_file, model_file};
use std::path::Path;
use tessel_estimator::keras::file::{read_keras_file, KerasFileError};
use tessel_estimator::keras::hdf5::Hdf5File;

fn write_temp(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("writes");
    path
}

#[test]
fn a_truncated_h5_model_names_the_byte_and_what_was_expected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = std::fs::read(model_file("mnist_cnn", "tf.h5")).expect("fixture");
    for len in [40, 100, 800, 2000, bytes.len() / 2] {
        let path = write_temp(dir.path(), "cut.h5", &bytes[..len]);
        match read_keras_file(&path) {
            Err(KerasFileError::Corrupt {
                file,
                offset,
                expected,
            }) => {
                assert_eq!(file, path, "cut at {len}");
                assert!(
                    offset <= bytes.len() as u64,
                    "cut at {len}: offset {offset}"
                );
                assert!(!expected.is_empty());
            }
            other => panic!("cut at {len}: expected Corrupt, got {other:?}"),
        }
    }
}

#[test]
fn a_damaged_btree_signature_is_reported_at_its_byte() {
    let mut bytes = std::fs::read(h5py_file("nested_groups.h5")).expect("fixture");
    let at = bytes
        .windows(4)
        .position(|w| w == b"TREE")
        .expect("a B-tree node");
    bytes[at..at + 4].copy_from_slice(b"XXXX");
    let file = Hdf5File::from_bytes("damaged.h5".into(), bytes).expect("superblock intact");
    let err = crate::fixtures::walk(&file.root().expect("root")).expect_err("damaged");
    match err {
        KerasFileError::Corrupt {
            offset, expected, ..
        } => {
            assert_eq!(offset, at as u64);
            assert_eq!(expected, "the signature TREE");
        }
        other => panic!("expected Corrupt, got {other}"),
    }
    let shown = KerasFileError::Corrupt {
        file: "damaged.h5".into(),
        offset: at as u64,
        expected: "the signature TREE".into(),
    }
    .to_string();
    assert_eq!(
        shown,
        format!("damaged.h5: at byte {at}: expected the signature TREE")
    );
}

#[test]
fn a_damaged_deflate_chunk_is_an_error() {
    let mut bytes = std::fs::read(h5py_file("chunked_gzip_shuffle.h5")).expect("fixture");
    // zlib streams of default level start 0x78 0x9c (level 9: 0x78 0xda); damage the bodies
    let mut damaged = 0;
    for i in 0..bytes.len() - 40 {
        if bytes[i] == 0x78 && (bytes[i + 1] == 0x9c || bytes[i + 1] == 0xda) {
            for b in &mut bytes[i + 2..i + 40] {
                *b ^= 0x5a;
            }
            damaged += 1;
        }
    }
    assert!(damaged > 0);
    let file = Hdf5File::from_bytes("gz.h5".into(), bytes).expect("superblock intact");
    let err = crate::fixtures::walk(&file.root().expect("root")).expect_err("damaged");
    assert!(
        matches!(err, KerasFileError::Corrupt { .. }),
        "expected Corrupt, got {err}"
    );
}

#[test]
fn a_truncated_keras_zip_is_a_zip_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = std::fs::read(model_file("text_conv1d", "keras3.keras")).expect("fixture");
    let path = write_temp(dir.path(), "cut.keras", &bytes[..bytes.len() - 30]);
    let err = read_keras_file(&path).expect_err("truncated");
    assert!(matches!(err, KerasFileError::Zip { .. }), "{err}");
}

#[test]
fn foreign_files_say_what_they_are_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    // an .npz is a zip, but not a .keras one
    let npz = model_file("bn_mlp", "tf_predict.npz");
    let err = read_keras_file(&npz).expect_err("npz");
    assert!(
        matches!(&err, KerasFileError::NotKeras { what, .. } if what.contains("config.json")),
        "{err}"
    );
    let text = write_temp(dir.path(), "notes.txt", b"just some text, long enough");
    let err = read_keras_file(&text).expect_err("text");
    assert!(matches!(err, KerasFileError::NotKeras { .. }), "{err}");
    // an HDF5 file that is not a Keras model
    let err = read_keras_file(&h5py_file("nested_groups.h5")).expect_err("plain h5");
    assert!(
        matches!(&err, KerasFileError::NotKeras { what, .. } if what.contains("model_config")),
        "{err}"
    );
    // a directory that is not a tf.keras SavedModel
    let err = read_keras_file(dir.path()).expect_err("directory");
    assert!(
        matches!(&err, KerasFileError::NotKeras { what, .. } if what.contains("keras_metadata.pb")),
        "{err}"
    );
    let err = read_keras_file(&dir.path().join("missing.keras")).expect_err("missing");
    assert!(matches!(err, KerasFileError::Io { .. }), "{err}");
}

#[test]
fn a_savedmodel_with_damaged_metadata_or_variables_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = model_file("bn_mlp", "tf_savedmodel");
    std::fs::create_dir_all(dir.path().join("variables")).expect("mkdir");
    for f in [
        "variables/variables.index",
        "variables/variables.data-00000-of-00001",
    ] {
        std::fs::copy(src.join(f), dir.path().join(f)).expect("copies");
    }
    write_temp(
        dir.path(),
        "keras_metadata.pb",
        b"\xff\xff\xff\xff not a protobuf",
    );
    let err = read_keras_file(dir.path()).expect_err("bad metadata");
    assert!(
        matches!(&err, KerasFileError::Corrupt { expected, .. } if expected.contains("SavedMetadata")),
        "{err}"
    );
    std::fs::copy(
        src.join("keras_metadata.pb"),
        dir.path().join("keras_metadata.pb"),
    )
    .expect("copies");
    read_keras_file(dir.path()).expect("the copy reads");
    let data = dir.path().join("variables/variables.data-00000-of-00001");
    let mut bytes = std::fs::read(&data).expect("reads");
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&data, bytes).expect("writes");
    let err = read_keras_file(dir.path()).expect_err("truncated variables");
    assert!(matches!(err, KerasFileError::Checkpoint(_)), "{err}");
}

#[test]
fn unsupported_features_name_the_file_byte_and_feature() {
    let file = Hdf5File::open(&h5py_file("lzf_filter.h5")).expect("opens");
    let err = match file.get("a").expect("reads") {
        Some(tessel_estimator::keras::hdf5::Node::Dataset(d)) => d.read_bytes().expect_err("lzf"),
        _ => panic!("a dataset"),
    };
    let shown = err.to_string();
    assert!(
        shown.starts_with(&h5py_file("lzf_filter.h5").display().to_string()),
        "{shown}"
    );
    assert!(
        shown.contains("the HDF5 filter 32000 (lzf) is not supported"),
        "{shown}"
    );
}
