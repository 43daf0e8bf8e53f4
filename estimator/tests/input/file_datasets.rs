//! Datasets read from files: TFRecordDataset over one and several files, interleaved files,
//! corrupt records skipped and counted (never silently) or reported with file and offset,
//! errors about a record's contents (parse, map, batch) naming its file, index and offset, and
//! IDX files as a source.

use std::path::{Path, PathBuf};
use tessel_compiler::ir::{Array, ArrayData, ElementType};
use tessel_estimator::input::example::{Example, Feature};
use tessel_estimator::input::parse::{FeatureDType, ParseSpec, RawType};
use tessel_estimator::input::tfrecord::{Compression, ReaderOptions, RecordFileWriter};
use tessel_estimator::input::{
    idx_dataset, idx_dataset_normalized, tfrecord_dataset, tfrecord_interleave, Dataset,
    DatasetError, Element, RecordContext, Value, ValueSpec,
};

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

fn labelled(label: Feature) -> Vec<u8> {
    Example::from_features([
        ("image_raw".to_string(), Feature::bytes(vec![vec![7; 4]])),
        ("label".to_string(), label),
    ])
    .to_bytes()
}

/// 1200 examples whose record 1000 has `bad` as its label, and record 1000's byte offset
/// (each record is framed in 16 bytes around its data).
fn bad_label_at_1000(path: &Path, bad: Feature) -> u64 {
    let mut recs: Vec<Vec<u8>> = (0..1200)
        .map(|i| labelled(Feature::int64s(vec![i % 10])))
        .collect();
    recs[1000] = labelled(bad);
    write(path, &recs);
    recs[..1000].iter().map(|r| r.len() as u64 + 16).sum()
}

fn parsed(files: &[PathBuf], workers: usize) -> Dataset {
    let spec = ParseSpec::new()
        .fixed("image_raw", &[], FeatureDType::String)
        .unwrap()
        .fixed("label", &[], FeatureDType::Int64)
        .unwrap();
    tfrecord_dataset(files, ReaderOptions::default())
        .parse_example(spec, workers)
        .unwrap()
}

fn first_error(ds: &Dataset) -> String {
    ds.iter()
        .find_map(Result::err)
        .expect("an error")
        .to_string()
}

#[test]
fn a_bad_label_in_record_1000_names_the_file_the_record_and_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.tfrecords");
    let offset = bad_label_at_1000(&path, Feature::floats(vec![3.0]));
    let place = format!("{}: record 1000 (byte {offset})", path.display());
    // Parsed on the caller's thread or on workers, batched or not, shuffled or not.
    for workers in [1, 2] {
        let ds = parsed(std::slice::from_ref(&path), workers);
        let want = format!(
            "{place}: parse_example failed on element 1000: feature \"label\" is of type \
             float_list, the spec wants int64_list"
        );
        assert_eq!(first_error(&ds), want);
        assert_eq!(first_error(&ds.clone().batch(128, true).unwrap()), want);
        let shuffled = ds.shuffle(64, 7).unwrap().batch(100, false).unwrap();
        assert!(first_error(&shuffled).starts_with(&format!("{place}: ")));
    }
    // A label that does not fit in s32.
    let offset = bad_label_at_1000(&path, Feature::int64s(vec![1 << 40]));
    assert_eq!(
        first_error(&parsed(std::slice::from_ref(&path), 2)),
        format!(
            "{}: record 1000 (byte {offset}): parse_example failed on element 1000: feature \
             \"label\" value 1099511627776 (at position 0) does not fit in s32; tessel has no \
             64-bit values",
            path.display()
        )
    );
}

#[test]
fn a_map_or_filter_error_names_the_record_and_the_function_needs_no_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.tfrecords");
    let offset = bad_label_at_1000(&path, Feature::int64s(vec![12]));
    let check_label = |e: Element| {
        let Value::Dense(label) = &e.values[1] else {
            return Err(DatasetError::msg("no label"));
        };
        match label.data.get_f64(0) {
            l if (0.0..10.0).contains(&l) => Ok(e),
            l => Err(DatasetError::msg(format!("label {l} is not in 0..10"))),
        }
    };
    let place = format!("{}: record 1000 (byte {offset})", path.display());
    for workers in [0, 2] {
        let ds = parsed(std::slice::from_ref(&path), 1)
            .map(|s| Ok(s.clone()), workers, check_label)
            .unwrap();
        assert_eq!(
            first_error(&ds),
            format!("{place}: map failed on element 1000: label 12 is not in 0..10")
        );
    }
    let filtered = parsed(std::slice::from_ref(&path), 1).filter(|e| match &e.values[1] {
        Value::Dense(l) if l.data.get_f64(0) < 10.0 => Ok(true),
        _ => Err(DatasetError::msg("a label out of range")),
    });
    assert_eq!(
        first_error(&filtered),
        format!("{place}: filter failed on element 1000: a label out of range")
    );
    // The error keeps its structure: the place, then what failed.
    let err = parsed(std::slice::from_ref(&path), 1)
        .map(|s| Ok(s.clone()), 0, check_label)
        .unwrap()
        .iter()
        .find_map(Result::err)
        .unwrap();
    let DatasetError::At { origin, source } = err else {
        panic!("not placed: {err}");
    };
    assert_eq!(origin, RecordContext::new(&path, 1000, offset));
    assert!(matches!(
        *source,
        DatasetError::Function { index: 1000, .. }
    ));
}

#[test]
fn elements_keep_their_record_through_interleave_and_batches_name_the_odd_one() {
    let dir = tempfile::tempdir().unwrap();
    let paths = files(dir.path(), 2, 3);
    let ds = tfrecord_interleave(&paths, ReaderOptions::default(), 2, 1).unwrap();
    let origins: Vec<RecordContext> = ds.iter().map(|e| e.unwrap().origin.unwrap()).collect();
    // Records "f:r" are 3 bytes: each is framed in 19 bytes.
    let want: Vec<RecordContext> = (0..3u64)
        .flat_map(|r| (0..2).map(move |f| (f, r)))
        .map(|(f, r)| RecordContext::new(&paths[f], r, 19 * r))
        .collect();
    assert_eq!(origins, want);

    // A map that gives record 1 of f1 a different shape: the batch names that record.
    let ragged = tfrecord_dataset(&paths, ReaderOptions::default())
        .map(
            |_| {
                Ok(tessel_estimator::input::ElementSpec {
                    components: vec![(
                        "v".into(),
                        ValueSpec::Dense {
                            element_type: ElementType::F32,
                            dims: vec![None],
                        },
                    )],
                })
            },
            0,
            |e| {
                let Value::Bytes { items, .. } = &e.values[0] else {
                    return Err(DatasetError::msg("not a record"));
                };
                let n = if items[0] == b"1:1" { 2 } else { 1 };
                Ok(Element::new(vec![Value::Dense(Array::f32(
                    &[n],
                    vec![0.0; n as usize],
                ))]))
            },
        )
        .unwrap();
    let err = first_error(&ragged.batch(6, false).unwrap());
    assert_eq!(
        err,
        format!(
            "{}: record 1 (byte 19): batch: component `v` of element 4 has dims [2], but the \
             batch's first element has [1]; batch needs elements of one shape",
            paths[1].display()
        )
    );
}

#[test]
fn idx_files_normalized_give_f32_images_in_0_1_and_s32_labels() {
    let dir = tempfile::tempdir().unwrap();
    let mut images = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3];
    images.extend([0u8, 51, 255, 1, 2, 128]);
    let mut labels = vec![0, 0, 8, 1, 0, 0, 0, 2];
    labels.extend([7u8, 9]);
    let (img, lab) = (dir.path().join("images.idx"), dir.path().join("labels.idx"));
    std::fs::write(&img, &images).unwrap();
    std::fs::write(&lab, &labels).unwrap();
    let ds = idx_dataset_normalized(("image", img.clone()), ("label", lab.clone())).unwrap();
    assert_eq!(
        ds.element_spec().components,
        vec![
            (
                "image".to_string(),
                ValueSpec::Dense {
                    element_type: ElementType::F32,
                    dims: vec![Some(1), Some(3)]
                }
            ),
            (
                "label".to_string(),
                ValueSpec::Dense {
                    element_type: ElementType::S32,
                    dims: vec![]
                }
            ),
        ]
    );
    let e: Vec<Element> = ds.iter().map(Result::unwrap).collect();
    let scaled = |p: &[u8]| ArrayData::F32(p.iter().map(|&x| x as f32 * (1. / 255.)).collect());
    // x * (1. / 255), as TF's idiom computes it (0.2 is 51 / 255, one ulp away).
    assert_eq!(
        e[0].values[0],
        Value::Dense(Array::f32(&[1, 3], vec![0.0, 0.20000002, 1.0]))
    );
    assert_eq!(
        e[1].values[0],
        Value::Dense(
            Array::try_new(
                tessel_compiler::ir::ArrayShape::new(ElementType::F32, &[1, 3]),
                scaled(&[1, 2, 128])
            )
            .unwrap()
        )
    );
    assert_eq!(e[1].values[1], Value::Dense(Array::scalar_s32(9)));
    // Only u8 pixels are normalized: an s32 images file is refused, naming it.
    let mut wide = vec![0, 0, 0x0c, 1, 0, 0, 0, 2];
    wide.extend([0u8; 8]);
    std::fs::write(&img, &wide).unwrap();
    let err = idx_dataset_normalized(("image", img.clone()), ("label", lab)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "idx_dataset_normalized: {} holds S32 values; normalizing to [0, 1] needs u8 pixels",
            img.display()
        )
    );
}

#[test]
fn a_wrong_size_image_names_its_record_through_decode_raw() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("images.tfrecords");
    let image = |n: usize| {
        Example::from_features([
            ("image_raw".to_string(), Feature::bytes(vec![vec![1; n]])),
            ("label".to_string(), Feature::int64s(vec![1])),
        ])
        .to_bytes()
    };
    let recs = vec![image(6), image(6), image(4)];
    write(&path, &recs);
    let offset: usize = recs[..2].iter().map(|r| r.len() + 16).sum();
    let ds = parsed(std::slice::from_ref(&path), 1)
        .decode_raw("image_raw", "image", RawType::U8, &[2, 3])
        .unwrap();
    let got: Vec<_> = ds.iter().collect();
    assert_eq!(got.len(), 3);
    assert_eq!(
        got[0].as_ref().unwrap().values[0],
        Value::Dense(
            Array::try_new(
                tessel_compiler::ir::ArrayShape::new(ElementType::U8, &[2, 3]),
                ArrayData::U8(vec![1; 6])
            )
            .unwrap()
        )
    );
    assert_eq!(
        got[2].as_ref().unwrap_err().to_string(),
        format!(
            "{}: record 2 (byte {offset}): decode_raw failed on element 2: component `image_raw` \
             decodes to shape [4] (4 bytes of U8), the shape [2, 3] needs 6 values",
            path.display()
        )
    );
}
