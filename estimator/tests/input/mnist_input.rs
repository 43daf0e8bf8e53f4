//! MNIST's input_fn in the short form: the one `docs/input.md` shows beside TF's runs here
//! as written, the MNIST example's form gives bitwise the batches of the closures it
//! replaced, and wrong-size images are an error naming the element and its record, with no
//! panic anywhere in the pipeline.

#[path = "../../examples/common/mnist_data.rs"]
mod mnist_data;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_estimator::input::example::{Example, Feature};
use tessel_estimator::input::parse::{
    decode_raw, parse_single_example, FeatureDType, ParseSpec, RawType,
};
use tessel_estimator::input::tfrecord::{Compression, ReaderOptions, RecordFileWriter};
use tessel_estimator::input::{
    idx_dataset_normalized, tfrecord_dataset, Dataset, DatasetError, Element, ElementSpec, Value,
    ValueSpec,
};
use tessel_estimator::{EstimatorError, Input, Params};

// The lines between the markers are the ones docs/input.md shows (indented 4 more here).
#[rustfmt::skip]
fn documented_input_fn(
    path: PathBuf,
    repeat: bool,
) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    // docs/input.md: begin
    let input_fn = move |params: &Params| -> Result<Input, EstimatorError> {
        let spec = ParseSpec::new().fixed("image_raw", &[], FeatureDType::String)?;
        let spec = spec.fixed("label", &[], FeatureDType::Int64)?;
        let options = ReaderOptions { buffer_size: 8 << 20, ..ReaderOptions::default() };
        let ds = tfrecord_dataset(&[&path], options).parse_example(spec, 2)?
            .decode_raw("image_raw", "image", RawType::U8, &[784])?
            .cast("image", ElementType::F32)?.scale("image", 1. / 255., -0.5)?.cache();
        let ds = if repeat { ds.repeat(None) } else { ds };
        Ok(Input::new(ds.batch(params.batch_size() as u64, true)?.prefetch(4), "label"))
    };
    // docs/input.md: end
    input_fn
}

/// The lines of this file between `// {marker}: begin` and `// {marker}: end`, dedented by
/// `indent` spaces.
fn marked_lines(source: &str, marker: &str, indent: usize) -> String {
    let begin = format!("// {marker}: begin\n");
    let start = source.find(&begin).expect("begin marker") + begin.len();
    let end = source[start..]
        .find(&format!("// {marker}: end"))
        .expect("end marker");
    let block = &source[start..start + end];
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.get(indent..).unwrap_or(l).trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A file of the repository, its blank lines left out (as [`marked_lines`] leaves them out).
fn manifest(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn docs_show_the_input_fn_this_test_runs_in_at_most_10_lines() {
    let lines = marked_lines(include_str!("mnist_input.rs"), "docs/input.md", 4);
    assert!(lines.lines().count() <= 10, "{lines}");
    let docs = manifest("../docs/input.md");
    assert!(
        docs.contains(&lines),
        "docs/input.md does not show the input_fn this test runs:\n{lines}"
    );
}

/// The first `n` images and labels of MNIST's bundled test split.
fn mnist_rows(n: usize) -> (Vec<Vec<u8>>, Vec<u8>) {
    let split = mnist_data::load(&mnist_data::bundled_dir(), false).unwrap();
    let (ArrayData::U8(pixels), ArrayData::U8(labels)) = (split.images.data, split.labels.data)
    else {
        panic!("MNIST is u8");
    };
    let images = pixels.chunks(784).take(n).map(<[u8]>::to_vec).collect();
    (images, labels[..n].to_vec())
}

/// `convert_to_records.py`'s features for one image of `rows x cols` pixels.
fn mnist_example(pixels: &[u8], label: i64, rows: i64, cols: i64) -> Vec<u8> {
    Example::from_features([
        ("height".to_string(), Feature::int64s(vec![rows])),
        ("width".to_string(), Feature::int64s(vec![cols])),
        ("depth".to_string(), Feature::int64s(vec![1])),
        ("label".to_string(), Feature::int64s(vec![label])),
        (
            "image_raw".to_string(),
            Feature::bytes(vec![pixels.to_vec()]),
        ),
    ])
    .to_bytes()
}

fn write_records(path: &Path, records: &[Vec<u8>]) {
    let mut w = RecordFileWriter::create(path, Compression::None).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    w.commit().unwrap();
}

fn dense(v: &Value) -> &Array {
    match v {
        Value::Dense(a) => a,
        other => panic!("not dense: {other:?}"),
    }
}

#[test]
fn the_documented_input_fn_reads_mnist_tfrecords() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.tfrecords");
    let (images, labels) = mnist_rows(300);
    let records: Vec<Vec<u8>> = images
        .iter()
        .zip(&labels)
        .map(|(image, &label)| mnist_example(image, label as i64, 28, 28))
        .collect();
    write_records(&path, &records);

    let input_fn = documented_input_fn(path.clone(), false);
    let input = input_fn(&Params::new().with("batch_size", 128i64)).unwrap();
    assert_eq!(input.labels.as_deref(), Some("label"));
    let spec = input.dataset.element_spec();
    assert_eq!(
        spec.components,
        vec![
            (
                "image".to_string(),
                ValueSpec::Dense {
                    element_type: ElementType::F32,
                    dims: vec![Some(128), Some(784)]
                }
            ),
            (
                "label".to_string(),
                ValueSpec::Dense {
                    element_type: ElementType::S32,
                    dims: vec![Some(128)]
                }
            ),
        ]
    );
    let batches: Vec<Element> = input.dataset.iter().map(Result::unwrap).collect();
    assert_eq!(batches.len(), 2, "300 examples make 2 full batches of 128");
    for (b, batch) in batches.iter().enumerate() {
        let (image, label) = (dense(&batch.values[0]), dense(&batch.values[1]));
        let want: Vec<f32> = images[b * 128..(b + 1) * 128]
            .iter()
            .flatten()
            .map(|&p| p as f32 * (1. / 255.) - 0.5)
            .collect();
        assert_eq!(image.data, ArrayData::F32(want));
        let want: Vec<i32> = labels[b * 128..(b + 1) * 128]
            .iter()
            .map(|&l| l as i32)
            .collect();
        assert_eq!(label.data, ArrayData::S32(want));
    }
    // Training repeats: more than one pass's batches.
    let train = documented_input_fn(path, true)(&Params::new().with("batch_size", 128i64));
    assert_eq!(train.unwrap().dataset.iter().take(5).count(), 5);
}

// ---- the MNIST example's input: its short form against the closures it replaced ----

// example: begin
fn tfrecord_source(path: &Path) -> Result<Dataset, EstimatorError> {
    let spec = ParseSpec::new()
        .fixed("image_raw", &[], FeatureDType::String)?
        .fixed("label", &[], FeatureDType::Int64)?;
    let options = ReaderOptions {
        buffer_size: 8 << 20,
        ..ReaderOptions::default()
    };
    Ok(tfrecord_dataset(&[path], options)
        .parse_example(spec, 2)?
        .decode_raw("image_raw", "image", RawType::U8, &[784])?
        .cast("image", ElementType::F32)?
        .scale("image", 1.0 / 255.0, -0.5)?)
}

/// The same elements from the bundled IDX files (MD5-checked): images in [0, 1], flattened
/// and shifted to [-0.5, 0.5) as the parser does.
fn idx_source(train: bool) -> Result<Dataset, EstimatorError> {
    let dir = mnist_data::bundled_dir();
    let [images, labels] = if train { [0, 1] } else { [2, 3] }.map(|i| mnist_data::FILES[i]);
    for (name, md5) in [images, labels] {
        mnist_data::check_md5(&dir.join(name), md5).map_err(EstimatorError::Input)?;
    }
    let ds = idx_dataset_normalized(("image", dir.join(images.0)), ("label", dir.join(labels.0)))?;
    Ok(ds.reshape("image", &[784])?.scale("image", 1.0, -0.5)?)
}
// example: end

#[test]
fn the_example_runs_the_input_functions_tested_here() {
    let lines = marked_lines(include_str!("mnist_input.rs"), "example", 0);
    assert!(
        manifest("examples/mnist.rs").contains(&lines),
        "examples/mnist.rs no longer holds the input functions this test checks:\n{lines}"
    );
}

/// The example's elements before the port: hand-built spec, closures matching `Value`s.
mod before_the_port {
    use super::*;

    fn example_spec() -> ElementSpec {
        ElementSpec {
            components: vec![
                (
                    "image".into(),
                    ValueSpec::Dense {
                        element_type: ElementType::F32,
                        dims: vec![Some(784)],
                    },
                ),
                (
                    "label".into(),
                    ValueSpec::Dense {
                        element_type: ElementType::S32,
                        dims: vec![],
                    },
                ),
            ],
        }
    }

    fn normalize(pixels: &[u8]) -> Array {
        let v: Vec<f32> = pixels
            .iter()
            .map(|&p| p as f32 * (1.0 / 255.0) - 0.5)
            .collect();
        Array::new(ArrayShape::new(ElementType::F32, &[784]), ArrayData::F32(v))
    }

    fn fail(index: u64, message: String) -> DatasetError {
        DatasetError::Function {
            op: "map",
            index,
            message,
        }
    }

    pub fn tfrecord_source(path: &Path) -> Dataset {
        let spec = ParseSpec::new()
            .fixed("image_raw", &[], FeatureDType::String)
            .unwrap()
            .fixed("label", &[], FeatureDType::Int64)
            .unwrap();
        let parser = move |e: Element| -> Result<Element, DatasetError> {
            let Some(Value::Bytes { items, .. }) = e.values.first() else {
                return Err(fail(0, "not a record".into()));
            };
            let f =
                parse_single_example(&items[0], &spec).map_err(|err| fail(0, err.to_string()))?;
            let (Value::Bytes { items, .. }, label) = (&f.values[0], f.values[1].clone()) else {
                return Err(fail(0, "image_raw".into()));
            };
            let raw =
                decode_raw(&items[0], RawType::U8, true).map_err(|err| fail(0, err.to_string()))?;
            let ArrayData::U8(pixels) = &raw.data else {
                return Err(fail(0, "image_raw".into()));
            };
            Ok(Element::new(vec![Value::Dense(normalize(pixels)), label]))
        };
        tfrecord_dataset(&[path.to_path_buf()], ReaderOptions::default())
            .map(|_| Ok(example_spec()), 2, parser)
            .unwrap()
    }

    pub fn idx_source(train: bool) -> Dataset {
        let split = mnist_data::load(&mnist_data::bundled_dir(), train).unwrap();
        let n = split.labels.shape.dims[0];
        let images = Array::new(
            ArrayShape::new(ElementType::U8, &[n, 784]),
            split.images.data,
        );
        let dataset = Dataset::from_tensor_slices(vec![
            ("image".into(), images),
            ("label".into(), split.labels),
        ])
        .unwrap();
        let to_example = |e: Element| -> Result<Element, DatasetError> {
            let (Value::Dense(image), Value::Dense(label)) = (&e.values[0], &e.values[1]) else {
                return Err(fail(0, "not dense".into()));
            };
            let ArrayData::U8(pixels) = &image.data else {
                return Err(fail(0, "image is not u8".into()));
            };
            let label = Array::new(
                ArrayShape::new(ElementType::S32, &[]),
                ArrayData::S32(vec![label.data.get_f64(0) as i32]),
            );
            Ok(Element::new(vec![
                Value::Dense(normalize(pixels)),
                Value::Dense(label),
            ]))
        };
        dataset.map(|_| Ok(example_spec()), 2, to_example).unwrap()
    }
}

/// Every batch of 128 (the last one short) of both datasets, which must be equal bit for bit.
fn assert_same_batches(new: Dataset, old: Dataset) {
    assert_eq!(new.element_spec(), old.element_spec());
    let batches = |d: Dataset| -> Vec<Vec<(Vec<i64>, Vec<u8>)>> {
        d.batch(128, false)
            .unwrap()
            .iter()
            .map(|b| {
                b.unwrap()
                    .values
                    .iter()
                    .map(|v| (dense(v).shape.dims.to_vec(), dense(v).data.to_le_bytes()))
                    .collect()
            })
            .collect()
    };
    let (new, old) = (batches(new), batches(old));
    assert!(!new.is_empty());
    assert!(new == old, "the batches differ");
}

#[test]
fn the_short_form_gives_bitwise_the_batches_of_the_closures_from_tfrecords() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.tfrecords");
    let (images, labels) = mnist_rows(1000);
    let records: Vec<Vec<u8>> = images
        .iter()
        .zip(&labels)
        .map(|(image, &label)| mnist_example(image, label as i64, 28, 28))
        .collect();
    write_records(&path, &records);
    assert_same_batches(
        tfrecord_source(&path).unwrap(),
        before_the_port::tfrecord_source(&path),
    );
}

#[test]
fn the_short_form_gives_bitwise_the_batches_of_the_closures_from_idx() {
    assert_same_batches(
        idx_source(false).unwrap(),
        before_the_port::idx_source(false),
    );
}

/// Panic messages seen by the hook on the threads the pipeline runs on (its map workers and
/// its prefetch thread) and on this test's own.
fn record_panics(test_thread: &'static str) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = seen.clone();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("");
        if name.starts_with("tessel-") || name.ends_with(test_thread) {
            hook_seen.lock().unwrap().push(format!("{name}: {info}"));
        }
    }));
    seen
}

#[test]
fn a_wrong_size_image_is_an_error_naming_its_record_not_a_panic() {
    let seen = record_panics("a_wrong_size_image_is_an_error_naming_its_record_not_a_panic");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.tfrecords");
    let (images, labels) = mnist_rows(200);
    let mut records: Vec<Vec<u8>> = images
        .iter()
        .zip(&labels)
        .map(|(image, &label)| mnist_example(image, label as i64, 28, 28))
        .collect();
    records[150] = mnist_example(&images[150][..27 * 27], labels[150] as i64, 27, 27);
    write_records(&path, &records);
    let offset: usize = records[..150].iter().map(|r| r.len() + 16).sum();

    for source in [
        documented_input_fn(path.clone(), true)(&Params::new().with("batch_size", 64i64))
            .unwrap()
            .dataset,
        tfrecord_source(&path).unwrap().batch(64, true).unwrap(),
    ] {
        let results: Vec<_> = source.iter().collect();
        assert_eq!(results.len(), 3, "two good batches, then the error");
        let err = results[2].as_ref().unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: record 150 (byte {offset}): decode_raw failed on element 150: component \
                 `image_raw` decodes to shape [729] (729 bytes of U8), the shape [784] needs 784 \
                 values",
                path.display()
            )
        );
    }
    assert!(seen.lock().unwrap().is_empty(), "panics: {seen:?}");

    // The hook does see the pipeline's panics: the closures before the port panicked in
    // `Array::new`'s assertion on a map worker.
    let old = before_the_port::tfrecord_source(&path)
        .batch(64, true)
        .unwrap();
    let err = old.iter().find_map(Result::err).unwrap().to_string();
    std::mem::drop(std::panic::take_hook());
    assert!(
        err.contains(&format!(
            "record 150 (byte {offset}): map panicked on element 150: assertion"
        )),
        "{err}"
    );
    let seen = seen.lock().unwrap();
    assert!(
        seen.len() == 1 && seen[0].starts_with("tessel-map: "),
        "{seen:?}"
    );
}
