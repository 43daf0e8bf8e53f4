//! A parse spec: for each feature to read, TF's `FixedLenFeature(shape, dtype, default)` or
//! `VarLenFeature(dtype)`. The spec alone fixes the element's [`ElementSpec`], so a dataset
//! of parsed records knows its shapes before reading one.
//!
//! TF's dtypes are `tf.string`, `tf.int64` and `tf.float32`. tessel (like a TPU) has no 64-bit
//! values: an int64 feature is read as s32, with a range check on every value.

use crate::input::{ElementSpec, InputError, ValueSpec};
use tessel_compiler::ir::ElementType;

/// The type of a feature's values as stored in the Example.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureDType {
    /// `tf.string` (a `bytes_list`): gives `Value::Bytes`.
    String,
    /// `tf.int64` (an `int64_list`): gives s32 values, range checked.
    Int64,
    /// `tf.float32` (a `float_list`): gives f32 values.
    Float32,
}

impl FeatureDType {
    /// The proto list this dtype reads.
    pub(crate) fn list_name(self) -> &'static str {
        match self {
            FeatureDType::String => "bytes_list",
            FeatureDType::Int64 => "int64_list",
            FeatureDType::Float32 => "float_list",
        }
    }

    /// The element type of the parsed value (`None` for strings).
    pub fn element_type(self) -> Option<ElementType> {
        match self {
            FeatureDType::String => None,
            FeatureDType::Int64 => Some(ElementType::S32),
            FeatureDType::Float32 => Some(ElementType::F32),
        }
    }
}

/// A `FixedLenFeature`'s default values, row-major, as many as the shape has elements.
#[derive(Clone, Debug, PartialEq)]
pub enum FeatureDefault {
    Bytes(Vec<Vec<u8>>),
    Int64(Vec<i64>),
    Float32(Vec<f32>),
}

impl FeatureDefault {
    fn dtype(&self) -> FeatureDType {
        match self {
            FeatureDefault::Bytes(_) => FeatureDType::String,
            FeatureDefault::Int64(_) => FeatureDType::Int64,
            FeatureDefault::Float32(_) => FeatureDType::Float32,
        }
    }

    fn len(&self) -> usize {
        match self {
            FeatureDefault::Bytes(v) => v.len(),
            FeatureDefault::Int64(v) => v.len(),
            FeatureDefault::Float32(v) => v.len(),
        }
    }
}

/// How to read one feature.
#[derive(Clone, Debug, PartialEq)]
pub enum FeatureSpec {
    /// `tf.io.FixedLenFeature(shape, dtype, default_value)`: exactly `product(shape)` values.
    FixedLen {
        shape: Vec<i64>,
        dtype: FeatureDType,
        default: Option<FeatureDefault>,
    },
    /// `tf.io.VarLenFeature(dtype)`: any number of values, a ragged value of one row.
    VarLen { dtype: FeatureDType },
}

/// The features to read, in the order of the element's components.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParseSpec {
    pub features: Vec<(String, FeatureSpec)>,
}

impl FeatureSpec {
    /// The number of values a `FixedLen` feature has.
    pub fn element_count(shape: &[i64]) -> usize {
        shape.iter().map(|&d| d as usize).product()
    }
}

impl ParseSpec {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a `FixedLenFeature(shape, dtype)` with no default (the feature must be present).
    pub fn fixed(self, name: &str, shape: &[i64], dtype: FeatureDType) -> Result<Self, InputError> {
        self.push(
            name,
            FeatureSpec::FixedLen {
                shape: shape.to_vec(),
                dtype,
                default: None,
            },
        )
    }

    /// Adds a `FixedLenFeature(shape, dtype, default)`; the default's type gives the dtype.
    pub fn fixed_with_default(
        self,
        name: &str,
        shape: &[i64],
        default: FeatureDefault,
    ) -> Result<Self, InputError> {
        self.push(
            name,
            FeatureSpec::FixedLen {
                shape: shape.to_vec(),
                dtype: default.dtype(),
                default: Some(default),
            },
        )
    }

    /// Adds a `VarLenFeature(dtype)` (int64 or float32: a ragged value holds numbers).
    pub fn var_len(self, name: &str, dtype: FeatureDType) -> Result<Self, InputError> {
        self.push(name, FeatureSpec::VarLen { dtype })
    }

    /// Adds a feature, checking it against the ones already there.
    pub fn push(mut self, name: &str, spec: FeatureSpec) -> Result<Self, InputError> {
        let bad = |reason: String| InputError::BadSpec {
            feature: name.to_string(),
            reason,
        };
        if self.features.iter().any(|(n, _)| n == name) {
            return Err(bad("appears twice".into()));
        }
        match &spec {
            FeatureSpec::FixedLen {
                shape,
                dtype,
                default,
            } => {
                if shape.iter().any(|&d| d < 0) {
                    return Err(bad(format!("shape {shape:?} has a negative dimension")));
                }
                // Element counts are computed with plain products later: refuse overflow here.
                let count = shape
                    .iter()
                    .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize));
                if count.is_none_or(|n| n > i32::MAX as usize) {
                    return Err(bad(format!("shape {shape:?} has too many elements")));
                }
                if let Some(d) = default {
                    let want = FeatureSpec::element_count(shape);
                    if d.dtype() != *dtype || d.len() != want {
                        return Err(bad(format!(
                            "the default has {} {} values, the shape {shape:?} needs {want} {}",
                            d.len(),
                            d.dtype().list_name(),
                            dtype.list_name()
                        )));
                    }
                    if let FeatureDefault::Int64(v) = d {
                        if v.iter().any(|&x| i32::try_from(x).is_err()) {
                            return Err(bad("the default does not fit in s32".into()));
                        }
                    }
                }
            }
            FeatureSpec::VarLen { dtype } => {
                if *dtype == FeatureDType::String {
                    return Err(bad(
                        "VarLenFeature of strings is not supported: a ragged value holds numbers; \
                         use a FixedLenFeature of strings"
                            .into(),
                    ));
                }
            }
        }
        self.features.push((name.to_string(), spec));
        Ok(self)
    }

    /// The element that parsing gives: one component per feature, in spec order.
    pub fn element_spec(&self) -> ElementSpec {
        let components = self
            .features
            .iter()
            .map(|(name, spec)| {
                let v = match spec {
                    FeatureSpec::FixedLen { shape, dtype, .. } => {
                        let dims = shape.iter().map(|&d| Some(d)).collect();
                        match dtype.element_type() {
                            Some(element_type) => ValueSpec::Dense { element_type, dims },
                            None => ValueSpec::Bytes { dims },
                        }
                    }
                    FeatureSpec::VarLen { dtype } => ValueSpec::Ragged {
                        element_type: dtype.element_type().expect("checked in push"),
                        dims: vec![None],
                    },
                };
                (name.clone(), v)
            })
            .collect();
        ElementSpec { components }
    }
}
