//! Datasets read from files: TFRecordDataset over one and several files, interleaved files,
//! corrupt records skipped and counted (never silently) or reported with file and offset, and
//! IDX files as a source.

use std::path::{Path, PathBuf};
use tessel_estimator::input::tfrecord::{Compression, ReaderOptions, RecordFileWriter};
use tessel_estimator::input::{idx_dataset, tfrecord_dataset, tfrecord_interleave, Dataset, Value};

fn write(path: &Path, records: &[Vec<u8>]) {
    let mut w = RecordFileWriter::create(path, Compression::None).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    w.commit().unwrap();
}

fn records(ds: &Dataset) -> Vec<Result<Vec<u8>, String>> {
    ds.iter()
        .map(|e| match e {
            Ok(e) => match &e.values[0] {
                Value::Bytes { items, .. } => Ok(items[0].clone()),
                other => panic!("a record element holds bytes, not {other:?}"),
            },
            Err(e) => Err(e.to_string()),
        })
        .collect()
}

fn files(dir: &Path, n: usize, per_file: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|f| {
            let path = dir.join(format!("f{f}.tfrecords"));
            let recs: Vec<Vec<u8>> = (0..per_file)
                .map(|r| format!("{f}:{r}").into_bytes())
                .collect();
            write(&path, &recs);
            path
        })
        .collect()
}

fn text(r: &[Result<Vec<u8>, String>]) -> Vec<String> {
    r.iter()
        .map(|x| String::from_utf8(x.clone().unwrap()).unwrap())
        .collect()
}

#[test]
fn tfrecord_dataset_reads_files_in_order_and_again_each_pass() {
    let dir = tempfile::tempdir().unwrap();
    let paths = files(dir.path(), 2, 3);
    let ds = tfrecord_dataset(&paths, ReaderOptions::default());
    let want = ["0:0", "0:1", "0:2", "1:0", "1:1", "1:2"];
    assert_eq!(text(&records(&ds)), want);
    let twice = ds.repeat(Some(2));
    assert_eq!(records(&twice).len(), 12);
}

#[test]
fn interleave_takes_blocks_from_open_files_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    let paths = files(dir.path(), 3, 2);
    let ds = tfrecord_interleave(&paths, ReaderOptions::default(), 2, 1).unwrap();
    // Files 0 and 1 open first, one record each in turn; file 2 replaces file 0 when it ends.
    assert_eq!(
        text(&records(&ds)),
        ["0:0", "1:0", "0:1", "1:1", "2:0", "2:1"]
    );
}

#[test]
fn a_corrupt_record_is_an_error_with_file_and_offset_or_skipped_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.tfrecords");
    write(
        &path,
        &[b"first".to_vec(), b"second".to_vec(), b"third".to_vec()],
    );
    let mut bytes = std::fs::read(&path).unwrap();
    // Record 1 starts at 8 + 4 + 5 + 4 = 21; its data starts 12 bytes later.
    bytes[21 + 12] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();

    let strict = records(&tfrecord_dataset(
        std::slice::from_ref(&path),
        ReaderOptions::default(),
    ));
    assert_eq!(strict.len(), 2);
    let err = strict[1].clone().unwrap_err();
    assert!(
        err.contains("bad.tfrecords") && err.contains("record 1") && err.contains("byte 21"),
        "{err}"
    );

    let skip = ReaderOptions {
        skip_corrupt: true,
        ..ReaderOptions::default()
    };
    assert_eq!(
        text(&records(&tfrecord_dataset(&[path], skip))),
        ["first", "third"]
    );
}

#[test]
fn idx_files_are_a_source_and_bad_ones_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    // IDX: magic 0x00000803 (u8, 3 dims), dims 2 x 2 x 3, then the bytes.
    let mut images = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3];
    images.extend(0u8..12);
    let mut labels = vec![0, 0, 8, 1, 0, 0, 0, 2];
    labels.extend([7u8, 9]);
    std::fs::write(dir.path().join("images.idx"), &images).unwrap();
    std::fs::write(dir.path().join("labels.idx"), &labels).unwrap();
    let ds = idx_dataset(&[
        ("image", dir.path().join("images.idx")),
        ("label", dir.path().join("labels.idx")),
    ])
    .unwrap();
    let elements: Vec<_> = ds.iter().map(|e| e.unwrap()).collect();
    assert_eq!(elements.len(), 2);
    match (&elements[1].values[0], &elements[1].values[1]) {
        (Value::Dense(img), Value::Dense(label)) => {
            assert_eq!(img.shape.dims.as_slice(), &[2, 3]);
            assert_eq!(img.data.get_f64(0), 6.0);
            assert_eq!(label.data.get_f64(0), 9.0);
        }
        other => panic!("{other:?}"),
    }
    std::fs::write(dir.path().join("short.idx"), &images[..20]).unwrap();
    let err = idx_dataset(&[("image", dir.path().join("short.idx"))]).unwrap_err();
    assert!(err.to_string().contains("short.idx"), "{err}");
}
