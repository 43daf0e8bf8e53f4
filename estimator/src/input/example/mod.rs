//! `tf.train.Example`: the protos (`proto`), and a text rendering for `tessel data inspect`
//! (`text`).

pub(crate) mod proto;
pub mod text;

pub use proto::{BytesList, Example, Feature, FeatureKind, Features, FloatList, Int64List};
