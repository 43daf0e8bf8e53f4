//! `tf.train.Example` and its parts (TensorFlow's `example.proto` and `feature.proto`) as
//! `prost` structs written here, so that no `protoc` runs at build time. The feature map is a
//! `BTreeMap`, so encoding is deterministic (keys sorted, as TF's deterministic serialization).

use prost::Message;
use std::collections::BTreeMap;

/// `tf.train.Example`.
#[derive(Clone, PartialEq, Message)]
pub struct Example {
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

/// `tf.train.Features`: feature name to feature.
#[derive(Clone, PartialEq, Message)]
pub struct Features {
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature: BTreeMap<String, Feature>,
}

/// `tf.train.Feature`: one of three lists (or none: an empty feature).
#[derive(Clone, PartialEq, Message)]
pub struct Feature {
    #[prost(oneof = "FeatureKind", tags = "1, 2, 3")]
    pub kind: Option<FeatureKind>,
}

/// The `kind` oneof of `tf.train.Feature`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum FeatureKind {
    #[prost(message, tag = "1")]
    BytesList(BytesList),
    #[prost(message, tag = "2")]
    FloatList(FloatList),
    #[prost(message, tag = "3")]
    Int64List(Int64List),
}

#[derive(Clone, PartialEq, Message)]
pub struct BytesList {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
pub struct FloatList {
    #[prost(float, repeated, packed = "true", tag = "1")]
    pub value: Vec<f32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Int64List {
    #[prost(int64, repeated, packed = "true", tag = "1")]
    pub value: Vec<i64>,
}

impl FeatureKind {
    /// The proto's name of this kind, as error messages say it.
    pub fn type_name(&self) -> &'static str {
        match self {
            FeatureKind::BytesList(_) => "bytes_list",
            FeatureKind::FloatList(_) => "float_list",
            FeatureKind::Int64List(_) => "int64_list",
        }
    }

    /// How many values the list holds.
    pub fn len(&self) -> usize {
        match self {
            FeatureKind::BytesList(l) => l.value.len(),
            FeatureKind::FloatList(l) => l.value.len(),
            FeatureKind::Int64List(l) => l.value.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Feature {
    pub fn bytes(values: Vec<Vec<u8>>) -> Feature {
        Feature {
            kind: Some(FeatureKind::BytesList(BytesList { value: values })),
        }
    }

    pub fn floats(values: Vec<f32>) -> Feature {
        Feature {
            kind: Some(FeatureKind::FloatList(FloatList { value: values })),
        }
    }

    pub fn int64s(values: Vec<i64>) -> Feature {
        Feature {
            kind: Some(FeatureKind::Int64List(Int64List { value: values })),
        }
    }
}

impl Example {
    /// An example of these features.
    pub fn from_features(features: impl IntoIterator<Item = (String, Feature)>) -> Example {
        Example {
            features: Some(Features {
                feature: features.into_iter().collect(),
            }),
        }
    }

    /// The feature called `name`.
    pub fn feature(&self, name: &str) -> Option<&Feature> {
        self.features.as_ref()?.feature.get(name)
    }

    /// The wire bytes (what TF's `SerializeToString(deterministic=True)` gives).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// Decodes wire bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Example, prost::DecodeError> {
        Example::decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tf.train.Example` written by TF 2.15 (`SerializeToString(deterministic=True)`) for
    /// {"image_raw": bytes [b"\x00\x01\xff"], "label": int64 [7], "neg": int64 [-1],
    /// "x": float [1.5, -2.0]}; written by tests/tf/check_tfrecords.py --fixture.
    const TF_BYTES: &[u8] = include_bytes!("../../../tests/fixtures/tf_example.pb");

    fn known() -> Example {
        Example::from_features([
            ("image_raw".into(), Feature::bytes(vec![vec![0, 1, 255]])),
            ("label".into(), Feature::int64s(vec![7])),
            ("neg".into(), Feature::int64s(vec![-1])),
            ("x".into(), Feature::floats(vec![1.5, -2.0])),
        ])
    }

    #[test]
    fn encodes_tensorflows_exact_bytes() {
        assert_eq!(known().to_bytes(), TF_BYTES);
    }

    #[test]
    fn decodes_tensorflows_bytes() {
        assert_eq!(Example::from_bytes(TF_BYTES).unwrap(), known());
    }

    #[test]
    fn decodes_unpacked_repeated_values() {
        // proto2-style unpacked int64 (tag 1, varint) is legal on the wire and must decode.
        let list = [0x08, 0x05, 0x08, 0x06];
        let mut feature = vec![0x1a, list.len() as u8];
        feature.extend(list);
        let mut entry = vec![0x0a, 1, b'a', 0x12, feature.len() as u8];
        entry.extend(feature);
        let mut features = vec![0x0a, entry.len() as u8];
        features.extend(entry);
        let mut example = vec![0x0a, features.len() as u8];
        example.extend(features);
        let e = Example::from_bytes(&example).unwrap();
        assert_eq!(e.feature("a"), Some(&Feature::int64s(vec![5, 6])));
    }
}
