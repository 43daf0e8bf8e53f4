//! `parse_single_example` and its errors: the element spec from the spec alone, defaults,
//! VarLen as ragged, and the exact error for a wrong type, a missing feature, a wrong length and
//! an int64 out of range for s32, each naming the feature and the record.

use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_estimator::input::example::{Example, Feature};
use tessel_estimator::input::parse::{
    decode_raw, parse_single_example, parse_single_example_at, FeatureDType, FeatureDefault,
    ParseSpec, RawType,
};
use tessel_estimator::input::{RecordContext, Value, ValueSpec};

fn mnist_spec() -> ParseSpec {
    ParseSpec::new()
        .fixed("image_raw", &[], FeatureDType::String)
        .unwrap()
        .fixed("label", &[], FeatureDType::Int64)
        .unwrap()
}

fn mnist_example(label: i64) -> Vec<u8> {
    Example::from_features([
        ("image_raw".into(), Feature::bytes(vec![vec![0, 128, 255]])),
        ("label".into(), Feature::int64s(vec![label])),
        ("height".into(), Feature::int64s(vec![28])),
    ])
    .to_bytes()
}

fn ctx() -> RecordContext {
    RecordContext::new("train.tfrecords", 17, 14739)
}

#[test]
fn parses_in_spec_order_with_a_static_spec() {
    let spec = mnist_spec();
    assert_eq!(
        spec.element_spec().components,
        vec![
            ("image_raw".to_string(), ValueSpec::Bytes { dims: vec![] }),
            (
                "label".to_string(),
                ValueSpec::Dense {
                    element_type: ElementType::S32,
                    dims: vec![]
                }
            ),
        ]
    );
    let e = parse_single_example(&mnist_example(7), &spec).unwrap();
    assert_eq!(
        e.values,
        vec![
            Value::Bytes {
                dims: vec![],
                items: vec![vec![0, 128, 255]]
            },
            Value::Dense(Array::scalar_s32(7)),
        ]
    );
    let Value::Bytes { items, .. } = &e.values[0] else {
        unreachable!()
    };
    let pixels = decode_raw(&items[0], RawType::U8, true).unwrap();
    assert_eq!(pixels.data, ArrayData::U8(vec![0, 128, 255]));
}

#[test]
fn defaults_shapes_and_var_len() {
    let spec = ParseSpec::new()
        .fixed_with_default("weight", &[2], FeatureDefault::Float32(vec![1.0, 0.5]))
        .unwrap()
        .fixed("height", &[1, 1], FeatureDType::Int64)
        .unwrap()
        .var_len("tokens", FeatureDType::Int64)
        .unwrap();
    let bytes = Example::from_features([
        ("height".into(), Feature::int64s(vec![28])),
        ("tokens".into(), Feature::int64s(vec![4, 5, 6])),
    ])
    .to_bytes();
    let e = parse_single_example(&bytes, &spec).unwrap();
    assert_eq!(e.values[0], Value::Dense(Array::f32(&[2], vec![1.0, 0.5])));
    assert_eq!(
        e.values[1],
        Value::Dense(Array::new(
            ArrayShape::new(ElementType::S32, &[1, 1]),
            ArrayData::S32(vec![28])
        ))
    );
    assert_eq!(
        e.values[2],
        Value::Ragged {
            values: Array::new(
                ArrayShape::new(ElementType::S32, &[3]),
                ArrayData::S32(vec![4, 5, 6])
            ),
            row_splits: vec![0, 3],
        }
    );
    assert!(!spec.element_spec().components[2].1.is_static());
}

#[test]
fn wrong_feature_type() {
    let spec = ParseSpec::new()
        .fixed("label", &[], FeatureDType::Float32)
        .unwrap();
    let e = parse_single_example_at(&mnist_example(7), &spec, &ctx()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "train.tfrecords: record 17 (byte 14739): feature \"label\" is of type int64_list, the spec wants float_list"
    );
}

#[test]
fn missing_feature() {
    let spec = ParseSpec::new()
        .fixed("depth", &[], FeatureDType::Int64)
        .unwrap();
    let e = parse_single_example_at(&mnist_example(7), &spec, &ctx()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "train.tfrecords: record 17 (byte 14739): feature \"depth\" missing, and the spec gives no default"
    );
}

#[test]
fn wrong_length() {
    let spec = ParseSpec::new()
        .fixed("label", &[2], FeatureDType::Int64)
        .unwrap();
    let e =
        parse_single_example_at(&mnist_example(7), &spec, &RecordContext::index(3)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "record 3: feature \"label\" has 1 values, the spec's shape [2] needs 2"
    );
}

#[test]
fn label_out_of_range_for_s32() {
    let e = parse_single_example_at(&mnist_example(1 << 31), &mnist_spec(), &ctx()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "train.tfrecords: record 17 (byte 14739): feature \"label\" value 2147483648 (at position 0) \
         does not fit in s32; tessel has no 64-bit values"
    );
    // The edges of s32 fit.
    for v in [i32::MIN as i64, i32::MAX as i64] {
        let e = parse_single_example(&mnist_example(v), &mnist_spec()).unwrap();
        assert_eq!(e.values[1], Value::Dense(Array::scalar_s32(v as i32)));
    }
}

#[test]
fn not_an_example() {
    let e = parse_single_example_at(b"\xff\xff\xff", &mnist_spec(), &ctx()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("train.tfrecords: record 17 (byte 14739): not a tf.train.Example: "),
        "{e}"
    );
}

#[test]
fn bad_specs_are_refused() {
    let e = ParseSpec::new()
        .fixed_with_default("w", &[3], FeatureDefault::Float32(vec![1.0]))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "parse spec: feature \"w\": the default has 1 float_list values, the shape [3] needs 3 float_list"
    );
    let e = mnist_spec()
        .fixed("label", &[], FeatureDType::Int64)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "parse spec: feature \"label\": appears twice"
    );
    assert!(ParseSpec::new().var_len("s", FeatureDType::String).is_err());
    let e = ParseSpec::new()
        .fixed("big", &[i64::MAX, 4], FeatureDType::Float32)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "parse spec: feature \"big\": shape [9223372036854775807, 4] has too many elements"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 500, ..Default::default() })]

    /// Random bytes, and random byte changes of a valid example, parse or fail: never panic.
    #[test]
    fn parsing_never_panics(
        random in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
        at in proptest::prelude::any::<proptest::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let spec = mnist_spec()
            .var_len("height", FeatureDType::Int64)
            .unwrap();
        let _ = parse_single_example(&random, &spec);
        let mut bytes = mnist_example(3);
        let i = at.index(bytes.len());
        bytes[i] ^= xor;
        let _ = parse_single_example(&bytes, &spec);
    }
}
