//! `parse_single_example`: one serialized `tf.train.Example` into an [`Element`], one component
//! per feature of the spec, in spec order (as `tf.io.parse_single_example`, with int64 read as
//! range-checked s32).

use super::spec::{FeatureDType, FeatureDefault, FeatureSpec, ParseSpec};
use crate::input::error::{FeatureProblem, RecordContext};
use crate::input::example::{Example, FeatureKind};
use crate::input::{Element, InputError, Value};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

/// Parses one record; errors say "record" without a file or index (see
/// [`parse_single_example_at`] to name them).
pub fn parse_single_example(bytes: &[u8], spec: &ParseSpec) -> Result<Element, InputError> {
    parse_single_example_at(bytes, spec, &RecordContext::default())
}

/// Parses one record; errors name `record` (its file, index and offset, where known).
pub fn parse_single_example_at(
    bytes: &[u8],
    spec: &ParseSpec,
    record: &RecordContext,
) -> Result<Element, InputError> {
    let example = Example::from_bytes(bytes).map_err(|e| InputError::NotAnExample {
        record: record.clone(),
        reason: e.to_string(),
    })?;
    let mut map = example.features.map(|f| f.feature).unwrap_or_default();
    let mut values = Vec::with_capacity(spec.features.len());
    for (name, feature_spec) in &spec.features {
        let fail = |problem| InputError::Feature {
            record: record.clone(),
            feature: name.clone(),
            problem,
        };
        let dtype = match feature_spec {
            FeatureSpec::FixedLen { dtype, .. } | FeatureSpec::VarLen { dtype } => *dtype,
        };
        // A feature with no list set is an empty list of any type (as in TF).
        let list = match map.remove(name).map(|f| f.kind) {
            None => None,
            Some(None) => Some(empty(dtype)),
            Some(Some(kind)) => Some(kind),
        };
        if let Some(kind) = &list {
            if kind.type_name() != dtype.list_name() {
                return Err(fail(FeatureProblem::WrongType {
                    found: kind.type_name(),
                    wanted: dtype.list_name(),
                }));
            }
        }
        let value = match feature_spec {
            FeatureSpec::FixedLen { shape, default, .. } => {
                let wanted = FeatureSpec::element_count(shape);
                let kind = match (list, default) {
                    (Some(kind), _) => kind,
                    (None, Some(d)) => from_default(d.clone()),
                    (None, None) => return Err(fail(FeatureProblem::Missing)),
                };
                if kind.len() != wanted {
                    return Err(fail(FeatureProblem::WrongLength {
                        found: kind.len(),
                        wanted,
                        shape: shape.clone(),
                    }));
                }
                dense(kind, shape).map_err(fail)?
            }
            FeatureSpec::VarLen { dtype } => {
                // A missing VarLen feature is an empty row (as TF's empty SparseTensor).
                let kind = list.unwrap_or_else(|| empty(*dtype));
                let n = kind.len();
                match dense(kind, &[n as i64]).map_err(fail)? {
                    Value::Dense(values) => Value::Ragged {
                        values,
                        row_splits: vec![0, n],
                    },
                    _ => unreachable!("VarLen of strings is refused by the spec"),
                }
            }
        };
        values.push(value);
    }
    let origin = (*record != RecordContext::default()).then(|| record.clone());
    Ok(Element { values, origin })
}

fn empty(dtype: FeatureDType) -> FeatureKind {
    from_default(match dtype {
        FeatureDType::String => FeatureDefault::Bytes(vec![]),
        FeatureDType::Int64 => FeatureDefault::Int64(vec![]),
        FeatureDType::Float32 => FeatureDefault::Float32(vec![]),
    })
}

fn from_default(d: FeatureDefault) -> FeatureKind {
    use crate::input::example::{BytesList, FloatList, Int64List};
    match d {
        FeatureDefault::Bytes(value) => FeatureKind::BytesList(BytesList { value }),
        FeatureDefault::Int64(value) => FeatureKind::Int64List(Int64List { value }),
        FeatureDefault::Float32(value) => FeatureKind::FloatList(FloatList { value }),
    }
}

/// The list as a value of `shape` (its length already checked).
fn dense(kind: FeatureKind, shape: &[i64]) -> Result<Value, FeatureProblem> {
    let array = |ty, data: ArrayData| {
        let found = data.len();
        Array::try_new(ArrayShape::new(ty, shape), data).map_err(|_| FeatureProblem::WrongLength {
            found,
            wanted: FeatureSpec::element_count(shape),
            shape: shape.to_vec(),
        })
    };
    Ok(match kind {
        FeatureKind::BytesList(l) => Value::Bytes {
            dims: shape.to_vec(),
            items: l.value,
        },
        FeatureKind::FloatList(l) => {
            Value::Dense(array(ElementType::F32, ArrayData::F32(l.value))?)
        }
        FeatureKind::Int64List(l) => {
            let mut out = Vec::with_capacity(l.value.len());
            for (position, &value) in l.value.iter().enumerate() {
                let v = i32::try_from(value)
                    .map_err(|_| FeatureProblem::OutOfRange { value, position })?;
                out.push(v);
            }
            Value::Dense(array(ElementType::S32, ArrayData::S32(out))?)
        }
    })
}
