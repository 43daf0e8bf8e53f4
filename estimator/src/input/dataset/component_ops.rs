//! Dataset ops on one named component, so an input_fn is a chain of calls as TF's is, with no
//! closure that matches `Value`s: `parse_example` (`tf.io.parse_single_example`), `decode_raw`
//! with a static shape (`tf.io.decode_raw` + `set_shape`), `cast` (`tf.cast`), `scale`
//! (`x * multiply + add`) and `reshape` (`tf.reshape`).
//!
//! Each is a map under its own name: the output spec is inferred from the input's when the
//! dataset is built (a wrong component name or type is an error then), and an element that
//! does not fit (an image of the wrong size) is an error naming the op, the element and the
//! record it came from, never a panic.

use super::error::DatasetError;
use super::map::{Map, MapFn};
use super::spec_check::{find_component, show_dims};
use super::Dataset;
use crate::input::parse::{decode_raw, parse_single_example, ParseSpec, RawType};
use crate::input::{Element, ElementSpec, Value, ValueSpec};
use std::sync::Arc;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

impl Dataset {
    /// `tf.io.parse_single_example` of every record: the input has one scalar string
    /// component (a `tfrecord_dataset`'s `record`); the output has one component per feature
    /// of `spec`, named and shaped by it (int64 read as s32, range checked).
    pub fn parse_example(
        self,
        spec: ParseSpec,
        num_parallel_calls: usize,
    ) -> Result<Dataset, DatasetError> {
        const OP: &str = "parse_example";
        let input = self.element_spec();
        if !matches!(&input.components[..], [(_, ValueSpec::Bytes { dims })] if dims.is_empty()) {
            return Err(DatasetError::invalid(
                OP,
                format!(
                    "needs elements of one scalar string (a serialized tf.train.Example, as \
                     tfrecord_dataset gives), these have {}",
                    describe_components(input)
                ),
            ));
        }
        let out = spec.element_spec();
        let f = move |e: Element| {
            let Some(Value::Bytes { items, .. }) = e.values.first() else {
                return Err(DatasetError::msg("the element holds no record"));
            };
            let record = items.first().map(Vec::as_slice).unwrap_or_default();
            parse_single_example(record, &spec).map_err(|e| DatasetError::msg(e.without_record()))
        };
        Ok(self.op_map(OP, out, num_parallel_calls, f))
    }

    /// `tf.io.decode_raw(input, out_type)` followed by `set_shape(shape)`: the scalar string
    /// component `input` becomes the numeric component `output` (in its place; the same name
    /// keeps it) of the static `shape`, read little endian (TF's default). A string that does
    /// not hold exactly `product(shape)` values is an error naming the element and its record.
    pub fn decode_raw(
        self,
        input: &str,
        output: &str,
        out_type: RawType,
        shape: &[i64],
    ) -> Result<Dataset, DatasetError> {
        const OP: &str = "decode_raw";
        let spec = self.element_spec();
        let i = find_component(spec, input)?;
        if !matches!(&spec.components[i].1, ValueSpec::Bytes { dims } if dims.is_empty()) {
            return Err(DatasetError::invalid(
                OP,
                format!(
                    "component `{input}` is {}, decode_raw needs a scalar string",
                    describe(&spec.components[i].1)
                ),
            ));
        }
        if output != input && spec.index_of(output).is_some() {
            return Err(DatasetError::invalid(
                OP,
                format!("component `{output}` already exists"),
            ));
        }
        let wanted = element_count(OP, shape)?;
        let element_type = out_type.element_type();
        let mut out = spec.clone();
        out.components[i] = (
            output.to_string(),
            ValueSpec::Dense {
                element_type,
                dims: shape.iter().map(|&d| Some(d)).collect(),
            },
        );
        let (name, shape) = (input.to_string(), shape.to_vec());
        let f = move |mut e: Element| {
            let Value::Bytes { items, .. } = &mut e.values[i] else {
                return Err(DatasetError::msg(format!(
                    "component `{name}` is not a string"
                )));
            };
            let bytes = items.pop().unwrap_or_default();
            let decoded =
                decode_raw(&bytes, out_type, true).map_err(|e| DatasetError::msg(e.to_string()))?;
            if decoded.len() != wanted {
                return Err(DatasetError::msg(format!(
                    "component `{name}` decodes to shape [{}] ({} bytes of {element_type:?}), \
                     the shape {shape:?} needs {wanted} values",
                    decoded.len(),
                    bytes.len()
                )));
            }
            let array = Array::try_new(ArrayShape::new(element_type, &shape), decoded.data)
                .map_err(|e| DatasetError::msg(format!("component `{name}`: {e}")))?;
            e.values[i] = Value::Dense(array);
            Ok(e)
        };
        Ok(self.op_map(OP, out, 1, f))
    }

    /// `tf.cast(component, to)`: a numeric component converted to `to` as Rust's `as` does
    /// (floats to integers round toward zero and saturate; NaN gives 0). Conversions go
    /// through f64, exact for every type of 32 bits or fewer.
    pub fn cast(self, component: &str, to: ElementType) -> Result<Dataset, DatasetError> {
        const OP: &str = "cast";
        let (i, from, dims) = dense_component(self.element_spec(), component, OP)?;
        if from == to {
            return Ok(self);
        }
        let mut out = self.element_spec().clone();
        out.components[i].1 = ValueSpec::Dense {
            element_type: to,
            dims,
        };
        let f = move |mut e: Element| {
            let Value::Dense(a) = &e.values[i] else {
                return Err(DatasetError::msg("the component is not a dense array"));
            };
            let data = ArrayData::from_f64_fn(to, a.len(), |k| a.data.get_f64(k));
            e.values[i] = Value::Dense(
                Array::try_new(a.shape.with_element_type(to), data)
                    .map_err(|e| DatasetError::msg(e.to_string()))?,
            );
            Ok(e)
        };
        Ok(self.op_map(OP, out, 1, f))
    }

    /// `component * multiply + add` on an f32 component, in f32, multiply then add (as
    /// `tf.cast(x, tf.float32) * (1. / 255) - 0.5` computes it): `scale("image", 1. / 255.,
    /// 0.)` maps u8 pixels cast to f32 onto [0, 1]. With `add` 0 nothing is added.
    pub fn scale(self, component: &str, multiply: f32, add: f32) -> Result<Dataset, DatasetError> {
        const OP: &str = "scale";
        let (i, ty, _) = dense_component(self.element_spec(), component, OP)?;
        if ty != ElementType::F32 {
            return Err(DatasetError::invalid(
                OP,
                format!("component `{component}` is {ty:?}; cast it to F32 first"),
            ));
        }
        let out = self.element_spec().clone();
        let f = move |mut e: Element| {
            let Some(Value::Dense(Array {
                data: ArrayData::F32(v),
                ..
            })) = e.values.get_mut(i)
            else {
                return Err(DatasetError::msg("the component is not f32"));
            };
            if add == 0.0 {
                v.iter_mut().for_each(|x| *x *= multiply);
            } else {
                v.iter_mut().for_each(|x| *x = *x * multiply + add);
            }
            Ok(e)
        };
        Ok(self.op_map(OP, out, 1, f))
    }

    /// `tf.reshape(component, dims)`: the same values in a new static shape with as many
    /// elements.
    pub fn reshape(self, component: &str, dims: &[i64]) -> Result<Dataset, DatasetError> {
        const OP: &str = "reshape";
        let (i, ty, old) = dense_component(self.element_spec(), component, OP)?;
        let wanted = element_count(OP, dims)?;
        let known: Option<Vec<i64>> = old.iter().copied().collect();
        if let Some(old) = known {
            if old.iter().product::<i64>() as usize != wanted {
                return Err(DatasetError::invalid(
                    OP,
                    format!(
                        "component `{component}` has dims {old:?} ({} values), {dims:?} needs {wanted}",
                        old.iter().product::<i64>()
                    ),
                ));
            }
        }
        let mut out = self.element_spec().clone();
        out.components[i].1 = ValueSpec::Dense {
            element_type: ty,
            dims: dims.iter().map(|&d| Some(d)).collect(),
        };
        let (name, dims) = (component.to_string(), dims.to_vec());
        let f = move |mut e: Element| {
            let Some(Value::Dense(a)) = e.values.get_mut(i) else {
                return Err(DatasetError::msg(format!(
                    "component `{name}` is not dense"
                )));
            };
            let data = std::mem::replace(&mut a.data, ArrayData::zeros(ty, 0));
            let old = a.shape.dims.to_vec();
            *a = Array::try_new(ArrayShape::new(ty, &dims), data).map_err(|e| {
                DatasetError::msg(format!("component `{name}` of dims {old:?}: {e}"))
            })?;
            Ok(e)
        };
        Ok(self.op_map(OP, out, 1, f))
    }

    /// A map under the op's name, with the output spec already inferred.
    fn op_map<F>(self, op: &'static str, spec: ElementSpec, workers: usize, f: F) -> Dataset
    where
        F: Fn(Element) -> Result<Element, DatasetError> + Send + Sync + 'static,
    {
        let f: Arc<MapFn> = Arc::new(f);
        Dataset::from_node(Map::new(self, f, spec, workers, op))
    }
}

/// The index, element type and dims of the dense component `name`.
fn dense_component(
    spec: &ElementSpec,
    name: &str,
    op: &'static str,
) -> Result<(usize, ElementType, Vec<Option<i64>>), DatasetError> {
    let i = find_component(spec, name)?;
    match &spec.components[i].1 {
        ValueSpec::Dense { element_type, dims } => Ok((i, *element_type, dims.clone())),
        other => Err(DatasetError::invalid(
            op,
            format!(
                "component `{name}` is {}, {op} needs a numeric array (decode strings with decode_raw)",
                describe(other)
            ),
        )),
    }
}

/// The number of elements of static `dims`, refusing negative dims and overflow.
fn element_count(op: &'static str, dims: &[i64]) -> Result<usize, DatasetError> {
    dims.iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
        .filter(|&n| n <= i32::MAX as usize)
        .ok_or_else(|| {
            DatasetError::invalid(
                op,
                format!("the shape {dims:?} needs dimensions >= 0 and fewer than 2^31 elements"),
            )
        })
}

fn describe(v: &ValueSpec) -> String {
    match v {
        ValueSpec::Dense { element_type, dims } => format!("{element_type:?} {}", show_dims(dims)),
        ValueSpec::Bytes { dims } => format!("strings {}", show_dims(dims)),
        ValueSpec::Ragged { element_type, .. } => format!("ragged {element_type:?}"),
    }
}

fn describe_components(spec: &ElementSpec) -> String {
    spec.components
        .iter()
        .map(|(n, v)| format!("`{n}` ({})", describe(v)))
        .collect::<Vec<_>>()
        .join(", ")
}
