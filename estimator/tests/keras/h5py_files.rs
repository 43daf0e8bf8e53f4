//! The HDF5 reader on files h5py wrote in ways Keras does not: chunked with gzip and
//! shuffle, compact, big attributes, many nested groups, `libver="latest"`, and features it
//! refuses by name.

use crate::fixtures::{h5py_file, walk};
use tessel_estimator::keras::file::KerasFileError;
use tessel_estimator::keras::hdf5::{Dataset, Hdf5File, Node};

fn dataset<'f>(file: &'f Hdf5File, path: &str) -> Dataset<'f> {
    match file.get(path).expect("reads") {
        Some(Node::Dataset(d)) => d,
        _ => panic!("no dataset {path}"),
    }
}

fn reference(file: &str, key: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(h5py_file("reference.json")).expect("reference.json");
    let all: serde_json::Value = serde_json::from_str(&text).expect("json");
    all[file][key].clone()
}

fn reference_a() -> Vec<f32> {
    reference("chunked_gzip_shuffle.h5", "a")
        .as_array()
        .expect("rows")
        .iter()
        .flat_map(|row| row.as_array().expect("row").clone())
        .map(|v| v.as_f64().expect("number") as f32)
        .collect()
}

#[test]
fn chunked_datasets_with_gzip_and_shuffle_read_as_h5py_wrote_them() {
    let file = Hdf5File::open(&h5py_file("chunked_gzip_shuffle.h5")).expect("opens");
    let a = dataset(&file, "a");
    assert_eq!(a.shape, [37, 21]);
    // chunks of 8x5 do not divide 37x21: the edge chunks are clipped
    assert_eq!(a.read_f32().expect("reads"), reference_a());
    let f64s = dataset(&file, "gzip_only");
    assert_eq!(f64s.read_f32().expect("reads"), reference_a());
    let ints = dataset(&file, "ints").read_f32().expect("reads");
    assert_eq!(ints, (-50..50).map(|i| i as f32).collect::<Vec<_>>());
}

#[test]
fn compact_scalar_and_empty_datasets_read() {
    let file = Hdf5File::open(&h5py_file("compact.h5")).expect("opens");
    let small = dataset(&file, "small");
    assert_eq!(small.shape, [3, 4]);
    assert_eq!(
        small.read_f32().expect("reads"),
        (0..12).map(|i| i as f32).collect::<Vec<_>>()
    );
    let scalar = dataset(&file, "scalar");
    assert!(scalar.shape.is_empty());
    assert_eq!(scalar.read_f32().expect("reads"), [2.5]);
    let empty = dataset(&file, "empty");
    assert_eq!(empty.shape, [0, 3]);
    assert!(empty.read_f32().expect("reads").is_empty());
}

#[test]
fn big_variable_length_and_fixed_attributes_read() {
    let file = Hdf5File::open(&h5py_file("big_attributes.h5")).expect("opens");
    let root = file.root().expect("root");
    let config = root
        .attribute("model_config")
        .expect("reads")
        .expect("present");
    let text = config.string().expect("a string");
    let len = reference("big_attributes.h5", "model_config_len")
        .as_u64()
        .expect("len");
    assert_eq!(text.len() as u64, len);
    assert!(
        len > 64 * 1024,
        "bigger than an object header message can hold"
    );
    let parsed: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(parsed["layers"][1999]["name"], "layer_1999");
    let names = root
        .attribute("weight_names")
        .expect("reads")
        .expect("present");
    let names = names.strings().expect("strings");
    assert_eq!(names.len(), 1000);
    assert_eq!(names[987], "layer_987/kernel:0");
    let fixed = root.attribute("fixed").expect("reads").expect("present");
    assert_eq!(fixed.string().expect("string"), "fixed-length text");
    let numbers = root.attribute("numbers").expect("reads").expect("present");
    assert_eq!(
        numbers.numbers().expect("numbers"),
        [0.0, 1.0, 2.0, 3.0, 4.0]
    );
    let count = root.attribute("count").expect("reads").expect("present");
    assert_eq!(count.numbers().expect("numbers"), [-7.0]);
}

#[test]
fn nested_groups_read_through_their_symbol_tables() {
    let file = Hdf5File::open(&h5py_file("nested_groups.h5")).expect("opens");
    let root = file.root().expect("root");
    assert_eq!(
        root.member_names().expect("names"),
        ["g0", "g1", "g2", "g3", "g4"]
    );
    assert_eq!(walk(&root).expect("walks"), 40);
    for i in 0..40 {
        let d = dataset(&file, &format!("g{}/h{i}/d", i % 5));
        assert_eq!(d.read_f32().expect("reads"), [i as f32, i as f32]);
    }
    let g0 = root.group("g0").expect("reads").expect("a group");
    let note = g0.attribute("note").expect("reads").expect("present");
    assert_eq!(note.string().expect("string"), "group five");
    assert!(file.get("g0/nope").expect("reads").is_none());
}

#[test]
fn libver_latest_files_read_with_compact_links_and_a_single_chunk() {
    let file = Hdf5File::open(&h5py_file("libver_latest.h5")).expect("opens");
    assert_eq!(
        dataset(&file, "g/x").read_f32().expect("reads"),
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    );
    assert_eq!(
        dataset(&file, "g/chunked").read_f32().expect("reads"),
        reference_a()
    );
    let g = file
        .root()
        .expect("root")
        .group("g")
        .expect("reads")
        .expect("group");
    let name = g.attribute("name").expect("reads").expect("present");
    assert_eq!(name.string().expect("string"), "latest");
}

fn unsupported_feature(err: KerasFileError) -> String {
    match err {
        KerasFileError::Unsupported {
            feature, offset, ..
        } => {
            assert!(offset > 0, "the error names the byte");
            feature
        }
        other => panic!("expected Unsupported, got {other}"),
    }
}

#[test]
fn dense_link_storage_is_refused_by_name() {
    let file = Hdf5File::open(&h5py_file("many_links_latest.h5")).expect("opens");
    let err = file
        .root()
        .expect("root")
        .member_names()
        .expect_err("dense links");
    assert!(unsupported_feature(err).contains("dense link storage"));
}

#[test]
fn an_unknown_filter_is_refused_by_name() {
    let file = Hdf5File::open(&h5py_file("lzf_filter.h5")).expect("opens");
    let err = dataset(&file, "a").read_f32().expect_err("lzf");
    let feature = unsupported_feature(err);
    assert!(
        feature.contains("32000") && feature.contains("lzf"),
        "{feature}"
    );
}

#[test]
fn dense_attribute_storage_is_refused_by_name() {
    let file = Hdf5File::open(&h5py_file("many_attributes_latest.h5")).expect("opens");
    let root = file.root().expect("root");
    let err = root.attribute("a03").err().expect("dense attributes");
    assert!(unsupported_feature(err).contains("dense attribute storage"));
}

#[test]
fn foreign_types_and_links_are_refused_by_name() {
    let file = Hdf5File::open(&h5py_file("foreign_types.h5")).expect("opens");
    let root = file.root().expect("root");
    let feature = |path: &str| -> String {
        let read = file.get(path).and_then(|node| match node {
            Some(Node::Dataset(d)) => d.read_f32().map(drop),
            _ => panic!("{path}: not a dataset"),
        });
        unsupported_feature(read.expect_err(path))
    };
    assert_eq!(feature("big_endian"), "a big-endian floating-point type");
    assert!(
        feature("bools").contains("enumeration"),
        "h5py's bool is an enum"
    );
    assert!(feature("pairs").contains("compound"));
    for link in ["soft", "external"] {
        let err = match root.member(link) {
            Err(err) => err,
            Ok(_) => panic!("{link} followed"),
        };
        let named = unsupported_feature(err);
        assert!(named.contains(link) && named.contains("link"), "{named}");
    }
    // the dataset the soft link points to reads
    assert!(matches!(file.get("target"), Ok(Some(Node::Dataset(_)))));
}
